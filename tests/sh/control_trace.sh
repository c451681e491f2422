#!/usr/bin/env bash
# tracevm attach PID trace, count and time (docs/control.md): call tracing switched on in
# a running program from another OS process, and off again, in a session
# of the client's own.  examples/ticker.tasm runs two workers that call
# ticker:tick(Id, N) every 10 ms with N counting up.  Checked: the exact
# shape and order of the events and the last record for --max-events, a
# match spec that keeps one worker's calls, --duration, the exact error
# replies (nothing traced after them), a client killed mid-trace, and
# twenty traces one after another (more than the VM's sixteen sessions:
# each one's session is gone when it ends); --pids, --format jsonl and
# chrome, the client's --out, and their exact errors; two clients at once
# with different patterns, and trace_info showing what each armed while
# it traces and nothing after (a killed client's too); count and time
# tables and their errors; the program never notices.
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

# --pids: worker b's process only, by either spelling of its pid.
for pids in 3 '<0.3.0>'; do
    attach $vm trace ticker:tick/2 --pids "$pids" --max-events 4 >"$tmp/tp" ||
        fail "trace --pids $pids exited $?"
    [[ $(grep -cE '^\{trace,<0\.3\.0>,call,\{ticker,tick,\[b,[0-9]+\]\}\}$' "$tmp/tp") == 4 &&
       $(wc -l <"$tmp/tp") == 5 ]] || fail "--pids $pids: $(cat "$tmp/tp")"
    [[ $(tail -1 "$tmp/tp") == '{trace_stopped,max_events,4,0}' ]] || fail "--pids record: $(cat "$tmp/tp")"
    in_order "$tmp/tp" || fail "--pids order: $(cat "$tmp/tp")"
done
# Both workers named: both traced, in order.
attach $vm trace ticker:tick/2 --pids 2,3 --max-events 10 >"$tmp/tp" || fail "--pids 2,3 exited $?"
for w in '2.0>,call,{ticker,tick,\[a,' '3.0>,call,{ticker,tick,\[b,'; do
    grep -q "^{trace,<0\.$w" "$tmp/tp" || fail "--pids 2,3 lacks $w: $(cat "$tmp/tp")"
done
in_order "$tmp/tp" || fail "--pids 2,3 order: $(cat "$tmp/tp")"

# --format jsonl: the same events as JSON objects, then the last record.
attach $vm trace ticker:tick/2 --pids 2 --max-events 3 --format jsonl >"$tmp/tj" ||
    fail "--format jsonl exited $?"
python3 - "$tmp/tj" <<'PY' || fail "--format jsonl: $(cat "$tmp/tj")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 4, lines
evs = [json.loads(l) for l in lines]
ns = []
for e in evs[:3]:
    assert list(e) == ['ts', 'sched', 'pid', 'kind', 'mod', 'fun', 'arity', 'args'], e
    assert (e['pid'], e['kind'], e['mod'], e['fun'], e['arity']) == (2, 'call', 'ticker', 'tick', 2), e
    assert e['args'].startswith('[a,') and e['args'].endswith(']'), e
    ns.append(int(e['args'][3:-1]))
assert ns == list(range(ns[0], ns[0] + 3)), ns
last = evs[3]
assert (last['pid'], last['kind'], last['reason'], last['written'], last['lost']) == \
    (0, 'stopped', 'max_events', '3', '0'), last
PY

# --format chrome with --out FILE: the client writes the stream to the
# file (nothing on stdout), a whole Chrome trace document with worker a's
# five calls as instants on its lane.
attach $vm trace ticker:tick/2 --pids 2 --max-events 5 --format chrome --out "$tmp/tc.json" \
    >"$tmp/o" || fail "--format chrome --out exited $?"
[[ ! -s "$tmp/o" ]] || fail "--out: stdout: $(cat "$tmp/o")"
python3 - "$tmp/tc.json" <<'PY' || fail "--format chrome: $(cat "$tmp/tc.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
calls = [e for e in doc['traceEvents'] if e.get('name') == 'ticker:tick/2']
assert len(calls) == 5, calls
assert all(e['ph'] == 'i' and e['tid'] == 2 for e in calls), calls
assert doc['otherData']['lost_events'] == 0, doc['otherData']
PY
# --out in text: the lines stdout would have had.
attach $vm trace ticker:tick/2 --max-events 2 --out "$tmp/tt" >"$tmp/o" || fail "--out exited $?"
[[ ! -s "$tmp/o" && $(wc -l <"$tmp/tt") == 3 && $(tail -1 "$tmp/tt") == '{trace_stopped,max_events,2,0}' ]] ||
    fail "--out text: $(cat "$tmp/o" "$tmp/tt")"
# An output that fails (a full disk, as --out and as stdout) is exit 1
# naming it and the reason; both exited 0 with the trace lost.
if [[ -w /dev/full ]]; then
    attach $vm trace ticker:tick/2 --max-events 2 --out /dev/full >"$tmp/o" 2>"$tmp/e"
    [[ $? == 1 && ! -s "$tmp/o" && "$(cat "$tmp/e")" == "tracevm attach: writing the trace to /dev/full failed: No space left on device; events from then on are missing" ]] ||
        fail "--out /dev/full: $(cat "$tmp/e")"
    attach $vm trace ticker:tick/2 --max-events 2 >/dev/full 2>"$tmp/e"
    [[ $? == 1 && "$(cat "$tmp/e")" == "tracevm attach: writing the trace to stdout failed: No space left on device; events from then on are missing" ]] ||
        fail "stdout /dev/full: $(cat "$tmp/e")"
    attach $vm info >/dev/full 2>"$tmp/e"
    [[ $? == 1 && "$(cat "$tmp/e")" == "tracevm attach: writing the reply to stdout failed: No space left on device; lines from then on are missing" ]] ||
        fail "info to /dev/full: $(cat "$tmp/e")"
fi

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
expect_error "trace: --pids: no process <0.99.0>" ticker:tick/2 --pids 2,99
expect_error "trace: bad pid 'x' in --pids (N or <0.N.0>, comma-separated)" ticker:tick/2 --pids 2,x
expect_error "trace: bad pid '0' in --pids (N or <0.N.0>, comma-separated)" ticker:tick/2 --pids 0
expect_error "trace: --pids names no process" ticker:tick/2 --pids ,
expect_error "trace: --format ctf writes a directory, not a stream (tracevm run --format ctf --out DIR traces to one)" \
    ticker:tick/2 --format ctf
expect_error "trace: bad value for --format: 'xml' (expected text, jsonl or chrome)" \
    ticker:tick/2 --format xml
# --out is the client's: a missing FILE is a usage error (exit 2), one
# that cannot be created is named; the VM rejects --out sent to it.
attach $vm trace ticker:tick/2 --out >"$tmp/o" 2>"$tmp/e"
[[ $? == 2 && "$(cat "$tmp/e")" == "tracevm attach: trace: --out needs a FILE" ]] ||
    fail "--out without FILE: $(cat "$tmp/e")"
attach $vm trace ticker:tick/2 --out "$tmp/no/such" >"$tmp/o" 2>"$tmp/e"
[[ $? == 1 && "$(cat "$tmp/e")" == "tracevm attach: $tmp/no/such: No such file or directory" ]] ||
    fail "--out unwritable: $(cat "$tmp/e")"
python3 - "$TRACEVM_CONTROL_DIR/$vm.0.sock" <<'PY' || fail "--out sent to the VM"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile('rb')
f.readline()
s.sendall(b'trace ticker:tick/2 --out /tmp/x\n')
got = f.readline() + f.readline()
want = b"error trace: --out is the client's option (tracevm attach writes the stream to the file), not the VM's\n.\n"
assert got == want, got
PY
# trace_info's own errors.
for args in "ticker:tick/2 bogus" "bad" ""; do
    attach $vm trace_info $args >"$tmp/o" 2>"$tmp/e" && fail "trace_info $args succeeded"
    echo "$(cat "$tmp/e")" >>"$tmp/tierrors"
done
[[ "$(cat "$tmp/tierrors")" == "tracevm attach: trace_info: bad item: expected traced, call_count, call_time, match_spec, meta, meta_match_spec or all
tracevm attach: trace_info: bad pattern \"bad\": expected mod:fun/arity
tracevm attach: trace_info: expects MOD:FUN/ARITY [ITEM]" ]] || fail "trace_info errors: $(cat "$tmp/tierrors")"
expect_error "trace: --flags: unknown flag 'bogus' (expected a comma-separated list of call, arity, timestamp, procs, return_to, silent, running, send, receive, set_on_spawn, set_on_first_spawn, garbage_collection, set_on_link, set_on_first_link, exiting, monotonic_timestamp, strict_monotonic_timestamp or all)" \
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
# ...and trace_info shows nothing armed on the function it traced.
[[ "$(attach $vm trace_info ticker:tick/2)" == 'session 0 default: {all,false}' ]] ||
    fail "trace_info after the killed client: $(attach $vm trace_info ticker:tick/2)"

# Two clients at once, with different patterns and processes, each in a
# session of its own: trace_info shows both armed while they run (the
# second sets nothing on tick/2) and nothing once they are gone; each got
# exactly its own events.
# (Three seconds each: long enough for both to be set up at once on a
# loaded machine.)
attach $vm trace ticker:tick/2 --pids 2 --duration 3 >"$tmp/ca" &
ca=$!
attach $vm trace timer:sleep/1 --pids 3 --duration 3 >"$tmp/cb" &
cb=$!
# Until both clients' sessions show in trace_info with their patterns
# set.  Waiting for `sessions: 3` in info alone once let trace_info run
# while the second client's session did not show yet (a local CI run,
# the release suite beside other programs); its patterns are set after
# the session is made, and that loop went on silently after 100 tries.
for _ in $(seq 100); do
    attach $vm trace_info ticker:tick/2 >"$tmp/ti" || fail "trace_info exited $?"
    attach $vm trace_info timer:sleep/1 traced >"$tmp/ti2" || fail "trace_info traced exited $?"
    [[ $(grep -c ' control-' "$tmp/ti") == 2 && $(grep -c ' control-' "$tmp/ti2") == 2 ]] &&
        grep -q '{traced,global}' "$tmp/ti" && grep -q '{traced,global}' "$tmp/ti2" && break
    sleep 0.05
done
cat "$tmp/ti2" >>"$tmp/ti"
python3 - "$tmp/ti" <<'PY' || fail "trace_info with two clients: $(cat "$tmp/ti")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 6, lines
assert lines[0] == lines[3].replace('traced', 'all') == 'session 0 default: {all,false}', lines
# (BEAM's order: call_time before call_count)
armed = '{all,[{traced,global},{match_spec,[]},{meta,false},{meta_match_spec,false},' \
        '{call_time,false},{call_count,false}]}'
got = sorted(re.sub(r'^session [1-9]\d* control-\d+: ', '', l) for l in lines[1:3])
assert got == sorted([armed, '{all,false}']), lines
got = sorted(re.sub(r'^session [1-9]\d* control-\d+: ', '', l) for l in lines[4:6])
assert got == sorted(['{traced,global}', '{traced,false}']), lines
PY
wait $ca || fail "client a exited $?"
wait $cb || fail "client b exited $?"
for f in ca:'<0\.2\.0>,call,\{ticker,tick,\[a,[0-9]+\]\}' cb:'<0\.3\.0>,call,\{timer,sleep,\[10\]\}'; do
    out=$tmp/${f%%:*}
    n=$(grep -cE "^\{trace,${f#*:}\}$" "$out")
    (( n >= 1 )) && [[ $(wc -l <"$out") == $((n + 1)) && $(tail -1 "$out") == "{trace_stopped,duration,$n,0}" ]] ||
        fail "client ${f%%:*}: $(cat "$out")"
done
in_order "$tmp/ca" || fail "client a order: $(cat "$tmp/ca")"
for mfa in ticker:tick/2 timer:sleep/1; do
    [[ "$(attach $vm trace_info $mfa)" == 'session 0 default: {all,false}' ]] ||
        fail "trace_info $mfa after the clients: $(attach $vm trace_info $mfa)"
done

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

# A client that reads too slowly for a flood of events (examples/busy.tasm
# calls busy:tick/2 millions of times a second) loses events (drop policy:
# the program is not held up), gets only whole lines, and the last record
# comes last, after every report of a loss: it counts the events the
# client got and the losses reported to it, exactly.
"$TRACEVM" run -q -S 2 examples/busy.tasm -e busy:main 60000 >/dev/null 2>"$tmp/err" &
vm=$!
for _ in $(seq 200); do
    attach $vm info >/dev/null 2>&1 && break
    sleep 0.05
done
# Longer floods until one loses events (a sanitizer's build is slow
# enough for the buffers between to take a short one whole); every stream
# checked exactly.  The reader starts a second after the flood's end (it
# waited 2 D + 1 s: 4 s more of the three floods, each with busy.tasm
# burning two CPUs).  Under ThreadSanitizer a flood of 1 s fits them
# whole (233,069 and 305,742 events in two tries, none lost), so there
# only the 3 s one is tried: the shorter ones cost 9 s of CPU for nothing.
lost=0
floods="0.3 1 3"
[[ "${TRACEVM_MODE:-}" == tsan ]] && floods=3
for d in $floods; do
    attach $vm trace busy:tick/2 --duration $d | { sleep $((${d%.*} + 1)); cat; } >"$tmp/flood"
    lost=$(python3 - "$tmp/flood" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
m = re.fullmatch(r'\{trace_stopped,duration,(\d+),(\d+)\}', lines[-1])
assert m, lines[-1]
events = lost = 0
for l in lines[:-1]:
    if re.fullmatch(r'\{trace,<0\.[23]\.0>,call,\{busy,tick,\[[ab],\d+\]\}\}', l):
        events += 1
        continue
    k = re.fullmatch(r'\{trace_lost,\{sched,\d+\},(\d+)\}', l)
    assert k, 'not an event nor a loss: %r' % l
    lost += int(k.group(1))
assert (events, lost) == (int(m.group(1)), int(m.group(2))), (lines[-1], events, lost)
print(lost)
PY
) || fail "a slow client's stream ($d s): $(tail -3 "$tmp/flood")"
    (( lost > 0 )) && break
done
(( lost > 0 )) || fail "a slow client lost no event in 3 floods"
kill $vm
wait $vm 2>/dev/null
vm=
echo ok
