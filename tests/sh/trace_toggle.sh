#!/usr/bin/env bash
# SIGUSR2 switches tracevm run's --trace patterns off and on while the
# program runs: tests/sh/data/trace_toggle.tasm calls tt:work(I) for
# I = 1..N, 2 ms apart.  Events appear exactly while the pattern is on:
# with --trace-off and no signal there are none; off, on, off gives one
# unbroken range of traced I that ends before N; on, off, on gives a
# range from 1 to N with one gap; each switch is reported on stderr, and
# so is a signal with no pattern to switch.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
P=tests/sh/data/trace_toggle.tasm
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
pid=

# wait_for FILE TEXT: until FILE holds TEXT (30 s at most).
wait_for() {
    for _ in $(seq 300); do
        grep -qF -- "$2" "$1" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || fail "tracevm exited before '$2' appeared in $1"
        sleep 0.1
    done
    fail "no '$2' in $1 after 30 s"
}

# range FILE: "FIRST LAST COUNT" of the traced I, checking the event form
# and that they run unbroken.
range() {
    python3 - "$1" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
xs = []
for l in lines:
    m = re.fullmatch(r"\{trace,<0\.1\.0>,call,\{tt,work,\[(\d+)\]\}\}", l)
    assert m, "unexpected event: " + l
    xs.append(int(m.group(1)))
assert xs, "no events"
assert xs == list(range(xs[0], xs[0] + len(xs))), "not one unbroken range: %s" % xs[:50]
print(xs[0], xs[-1], len(xs))
PY
}

# switch_run N [OPTS...]: runs tracevm in the background with the events in
# $tmp/ev, waits until tracing has started (the file exists), then sends
# SIGUSR2 twice, SWITCH_GAP seconds apart, each after the previous switch
# was reported; waits for the exit.
switch_run() {
    local n=$1
    shift
    rm -f "$tmp/ev"
    "$TRACEVM" run "$P" -S 2 --trace 'tt:work/1' --out "$tmp/ev" "$@" -- "$n" \
        >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 300); do [[ -e $tmp/ev ]] && break; sleep 0.1; done
    [[ -e $tmp/ev ]] || fail "no event file after 30 s"
    sleep 0.2
    kill -USR2 $pid
    wait_for "$tmp/err" "SIGUSR2: --trace tt:work/1 $first, matched 1"
    sleep 0.3
    kill -USR2 $pid
    wait_for "$tmp/err" "SIGUSR2: --trace tt:work/1 $second, matched 1"
    wait $pid || fail "exit $? for $*: $(cat "$tmp/err")"
    pid=
    [[ $(cat "$tmp/out") == "$n" ]] || fail "result: $(cat "$tmp/out")"
}

# --trace-off alone: the pattern is checked and counted, nothing traced.
"$TRACEVM" run "$P" -S 2 --trace 'tt:work/1' --trace-off --out "$tmp/ev" -- 20 \
    >"$tmp/out" 2>"$tmp/err" || fail "exit $?: $(cat "$tmp/err")"
[[ $(cat "$tmp/out") == 20 && ! -s $tmp/ev && ! -s $tmp/err ]] ||
    fail "--trace-off without a signal: $(cat "$tmp/out" "$tmp/err" "$tmp/ev")"

# Off, on, off: one window inside the run.
first=on second=off
switch_run 1500 --trace-off
read -r lo hi count < <(range "$tmp/ev") || fail "events: $(head -5 "$tmp/ev")"
# (lo is usually above 1, but a loaded machine may start main late.)
((hi < 1500 && count > 0)) || fail "window $lo..$hi of 1..1500"
diff -u - "$tmp/err" <<'WANT' || fail "stderr of the off-on-off run"
tracevm run: SIGUSR2: --trace tt:work/1 on, matched 1
tracevm run: SIGUSR2: --trace tt:work/1 off, matched 1
WANT

# On, off, on: traced from the first call, then a gap, then to the end.
first=off second=on
switch_run 1500
python3 - "$tmp/ev" <<'PY' || fail "on-off-on events: $(head -3 "$tmp/ev")"
import re, sys
xs = [int(re.search(r"\[(\d+)\]", l).group(1)) for l in open(sys.argv[1])]
gaps = [(a, b) for a, b in zip(xs, xs[1:]) if b != a + 1]
assert xs[0] == 1 and xs[-1] == 1500 and len(gaps) == 1, (xs[:3], xs[-3:], gaps)
PY

# Without --trace there is nothing to switch: said so, and the run goes on.
rm -f "$tmp/ev"
"$TRACEVM" run "$P" -S 2 --flags arity --out "$tmp/ev" -- 1500 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 300); do [[ -e $tmp/ev ]] && break; sleep 0.1; done
kill -USR2 $pid
wait_for "$tmp/err" "tracevm run: SIGUSR2: no --trace patterns to switch"
wait $pid || fail "exit $? without --trace: $(cat "$tmp/err")"
pid=
[[ $(cat "$tmp/out") == 1500 && ! -s $tmp/ev ]] || fail "without --trace: $(cat "$tmp/out" "$tmp/ev")"

# Usage errors.
"$TRACEVM" run "$P" --trace-off 5 >/dev/null 2>"$tmp/err"
[[ $? == 2 && $(cat "$tmp/err") == "tracevm run: --trace-off needs --trace" ]] ||
    fail "--trace-off without --trace: $(cat "$tmp/err")"
"$TRACEVM" run "$P" --trace 'tt:nope/1' --trace-off 5 >"$tmp/out" 2>"$tmp/err"
[[ $? == 0 && $(cat "$tmp/err") == "tracevm run: warning: --trace tt:nope/1 matches no function (without --local, exported ones only)" ]] ||
    fail "--trace-off with a pattern that matches nothing: $(cat "$tmp/err")"
"$TRACEVM" run "$P" --trace 'tt:work' --trace-off 5 >/dev/null 2>"$tmp/err"
[[ $? == 2 ]] || fail "a bad pattern with --trace-off: exit $?"
grep -q "^tracevm run: --trace tt:work: " "$tmp/err" || fail "bad pattern message: $(cat "$tmp/err")"
exit 0
