#!/usr/bin/env bash
# tracevm attach PID trace, count and time (docs/control.md): call tracing switched on in
# a running program from another OS process, and off again, in a session
# of the client's own.  examples/ticker.tasm runs two workers that call
# ticker:tick(Id, N) every 10 ms with N counting up.  Checked: the exact
# shape and order of the events and the last record for --max-events, a
# match spec that keeps one worker's calls, --duration, the exact error
# replies (nothing traced after them), a client killed mid-trace, and
# twenty traces one after another (more than the VM's sixteen sessions:
# each one's session is gone when it ends); count and time tables and
# their errors; the program never notices.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
export TRACEVM_CONTROL_DIR=$tmp/ctl
vm=
cleanup() { [[ -n "$vm" ]] && kill "$vm" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
attach() { "$TRACEVM" attach "$@"; }

"$TRACEVM" run -q -S 2 examples/ticker.tasm -e ticker:main 600000 >"$tmp/out" 2>"$tmp/err" &
vm=$!
for _ in $(seq 200); do
    [[ "$(attach $vm info 2>/dev/null | grep '^processes:')" == "processes: 3" ]] && break
    sleep 0.05
done

# Each worker's calls in order: N counts up by one, from one call to its next.
in_order() { # FILE: every event line's worker counts up by one
    python3 - "$1" <<'PY'
import re, sys
last = {}
for line in open(sys.argv[1]).read().splitlines():
    m = re.fullmatch(r'\{trace,<0\.([23])\.0>,call,\{ticker,tick,\[([ab]),(\d+)\]\}\}', line)
    if not m:
        continue
    pid, wid, n = m.group(1), m.group(2), int(m.group(3))
    if (pid, wid) not in (('2', 'a'), ('3', 'b')):
        sys.exit('worker %s in process %s: %s' % (wid, pid, line))
    if wid in last and n != last[wid] + 1:
        sys.exit('%s after %d: %s' % (wid, last[wid], line))
    last[wid] = n
PY
}

# --max-events 6: six calls, then the record that says why it stopped.
attach $vm trace ticker:tick/2 --max-events 6 >"$tmp/t1" || fail "trace exited $?"
[[ $(wc -l <"$tmp/t1") == 7 ]] || fail "--max-events 6: $(cat "$tmp/t1")"
[[ $(grep -cE '^\{trace,<0\.[23]\.0>,call,\{ticker,tick,\[[ab],[0-9]+\]\}\}$' "$tmp/t1") == 6 ]] ||
    fail "--max-events 6 events: $(cat "$tmp/t1")"
[[ $(tail -1 "$tmp/t1") == '{trace_stopped,max_events,6,0}' ]] || fail "last record: $(tail -1 "$tmp/t1")"
in_order "$tmp/t1" || fail "--max-events order: $(cat "$tmp/t1")"

# A match spec keeps worker a's calls only; --duration ends it.
attach $vm trace ticker:tick/2 --match "[{[a,'_'],[],[]}]" --duration 0.3 >"$tmp/t2" ||
    fail "trace --match exited $?"
n=$(grep -c '^{trace,<0.2.0>,call,{ticker,tick,\[a,' "$tmp/t2")
(( n >= 1 )) || fail "--match: no event of worker a: $(cat "$tmp/t2")"
[[ $(wc -l <"$tmp/t2") == $((n + 1)) ]] || fail "--match let other events through: $(cat "$tmp/t2")"
[[ $(tail -1 "$tmp/t2") == "{trace_stopped,duration,$n,0}" ]] || fail "--duration record: $(tail -1 "$tmp/t2")"
in_order "$tmp/t2" || fail "--match order: $(cat "$tmp/t2")"

# Errors: the exact reply, exit 1, nothing on stdout.
expect_error() { # WANT ARGS...
    local want=$1
    shift
    attach $vm trace "$@" >"$tmp/o" 2>"$tmp/e" && fail "trace $* succeeded"
    [[ ! -s "$tmp/o" ]] || fail "trace $*: stdout: $(cat "$tmp/o")"
    [[ "$(cat "$tmp/e")" == "tracevm attach: $want" ]] || fail "trace $*: $(cat "$tmp/e")"
}
expect_error "trace: needs a pattern (MOD:FUN/ARITY, _ for any part)"
expect_error "trace: the patterns match no function (without --local, exported ones only)" \
    ticker:nope/2
expect_error 'trace: bad pattern: bad pattern "bad pattern": expected mod:fun/arity' 'bad pattern'
expect_error "trace: unknown option '--bogus'" ticker:tick/2 --bogus
expect_error "trace: --max-events needs a value" ticker:tick/2 --max-events
expect_error "trace: bad value for --max-events: '0'" ticker:tick/2 --max-events 0
expect_error "trace: bad value for --duration: 'soon'" ticker:tick/2 --duration soon
expect_error "trace: --flags: unknown flag 'bogus' (expected a comma-separated list of call, arity, timestamp, procs, return_to, silent, running, send, receive)" \
    ticker:tick/2 --flags bogus

# A client killed in the middle: its session goes with it.
"$TRACEVM" attach $vm trace ticker:tick/2 --duration 60 >/dev/null &
tc=$!
sleep 0.3
kill -9 $tc
wait $tc 2>/dev/null
# ...its session is destroyed within moments (the default one stays).
for _ in $(seq 100); do
    grep -qx 'sessions: 1' <(attach $vm info) && break
    sleep 0.05
done
grep -qx 'sessions: 1' <(attach $vm info) || fail "the killed client's session is still there"

# Twenty traces in a row, more than the sixteen sessions a VM has at once.
for i in $(seq 20); do
    got=$(attach $vm trace ticker:tick/2 --max-events 1) || fail "trace $i exited $?"
    [[ $(tail -1 <<<"$got") == '{trace_stopped,max_events,1,0}' ]] || fail "trace $i: $got"
done

# count and time: a table of the interval, the function's row and the
# total agreeing.
attach $vm count ticker:_/_ --duration 0.3 >"$tmp/c" || fail "count exited $?"
python3 - "$tmp/c" <<'PY' || fail "count: $(cat "$tmp/c")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
assert re.fullmatch(r'FUNCTION +CALLS', lines[0]), lines[0]
m = re.fullmatch(r'ticker:tick/2 +(\d+)', lines[1])
assert m and int(m.group(1)) > 0, lines[1]
assert lines[2] == '1 functions, %s calls in 0.30 s' % m.group(1), lines[2]
assert len(lines) == 3
PY
attach $vm time ticker:tick/2 --duration 0.3 >"$tmp/t" || fail "time exited $?"
python3 - "$tmp/t" <<'PY' || fail "time: $(cat "$tmp/t")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
assert re.fullmatch(r'FUNCTION +CALLS +TIME_US +US/CALL +SHARE', lines[0]), lines[0]
m = re.fullmatch(r'ticker:tick/2 +(\d+) +([\d.]+) +([\d.]+) +100\.00%', lines[1])
assert m and int(m.group(1)) > 0, lines[1]
assert lines[2] == '1 functions, %s calls, %s us in 0.30 s' % (m.group(1), m.group(2)), lines[2]
assert len(lines) == 3
PY
for args in "count" "count ticker:tick/2" "time ticker:tick/2 --duration" "count zz:_/_ --duration 1" \
            "time ticker:tick/2 --duration 1 --bogus"; do
    attach $vm $args >"$tmp/o" 2>"$tmp/e" && fail "$args succeeded"
    echo "$(cat "$tmp/e")" >>"$tmp/errors"
done
[[ "$(cat "$tmp/errors")" == "tracevm attach: count: needs a pattern (MOD:FUN/ARITY, _ for any part) and --duration S
tracevm attach: count: needs a pattern (MOD:FUN/ARITY, _ for any part) and --duration S
tracevm attach: time: --duration needs a value
tracevm attach: count: the patterns match no function
tracevm attach: time: unknown option '--bogus'" ]] || fail "count/time errors: $(cat "$tmp/errors")"

# The program went on throughout, untraced now.
grep -qx 'processes: 3' <(attach $vm info) || fail "the program after the traces"
grep -qx 'sessions: 1' <(attach $vm info) || fail "a session left after the traces"
[[ ! -s "$tmp/out" && ! -s "$tmp/err" ]] || fail "the program printed: $(cat "$tmp/out" "$tmp/err")"
kill $vm
wait $vm 2>/dev/null
vm=
echo ok
