#!/usr/bin/env bash
# Every example program runs and prints what its header promises.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
check() { # expected command...
    local want=$1; shift
    local got
    got=$("$@" 2>&1) || fail "$* exited $?: $got"
    [[ "$got" == "$want" ]] || fail "$*: expected '$want', got '$got'"
}
check 75025 "$TRACEVM" run examples/fib.tasm -e fib:fib 25
check '{done,1000}' "$TRACEVM" run examples/pingpong.tasm -e pingpong:main 1000
check '{ring,200,20,4000}' "$TRACEVM" run -S 2 examples/ring.tasm -e ring:main 200 20
check '{8,18,20672}' "$TRACEVM" run -S 2 examples/parallel.tasm -e parallel:main 8 18
check '[100,200,300]' "$TRACEVM" run -S 1 examples/sleep.tasm
check done "$TRACEVM" run -S 2 examples/ticker.tasm -e ticker:main 50
# busy: a line of calls per second every 500 ms (how many is the
# machine's business; at least one batch of 65,536 in 500 ms), then done.
out=$("$TRACEVM" run -S 2 examples/busy.tasm -e busy:main 1000 2>&1) || fail "busy.tasm: $out"
[[ "$out" =~ ^busy:\ [1-9][0-9]*\ calls/s$'\n'busy:\ [1-9][0-9]*\ calls/s$'\n'done$ ]] ||
    fail "busy.tasm: $out"
# tracedemo: call events only while the pattern is on, and only of work/1.
# How many calls fall into its 60 ms window is the machine's business; what
# is exact: every event is a call of work/1 by one of the two workers, and
# each worker's calls (work(I) for I = 0, 1, ...) appear as one unbroken
# range, since the pattern was switched on once and off once and nothing
# in between may be lost or repeated.
tmp=$(mktemp)
out=$("$TRACEVM" run -S 2 examples/tracedemo.tasm --flags call 2>"$tmp") || fail "tracedemo.tasm: $out"
[[ "$out" == $'trace_pattern(tracedemo:work/1, true) matched 1\ntrace_pattern(tracedemo:work/1, false) matched 1\ndone' ]] ||
    fail "tracedemo.tasm: $out"
python3 - "$tmp" <<'PY' || fail "tracedemo.tasm events: $(head -5 "$tmp")"
import re, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.fullmatch(r"\{trace,<0\.([23])\.0>,call,\{tracedemo,work,\[(\d+)\]\}\}\n", line)
    assert m, "not a call of work/1 by a worker: %r" % line
    runs.setdefault(m.group(1), []).append(int(m.group(2)))
for pid, xs in runs.items():
    assert xs == list(range(xs[0], xs[0] + len(xs))), "worker %s: %s" % (pid, xs)
assert runs, "no event while the pattern was on"
PY
rm -f "$tmp"
out=$("$TRACEVM" run -S 2 examples/callcount.tasm 2>&1) || fail "callcount.tasm: $out"
[[ "$out" == $'1\n{call_count,394600}\n{call_count,394600}\n1\n{call_count,false}\n{done,3}' ]] ||
    fail "callcount.tasm: $out"
out=$("$TRACEVM" run examples/lists.tasm 2>&1) || fail "lists.tasm: $out"
[[ "$out" == *'{[81,36,25,16,9,4,1,1],173}' ]] || fail "lists.tasm result: $out"
out=$("$TRACEVM" run examples/exceptions.tasm 2>&1) || fail "exceptions.tasm: $out"
[[ "$out" == '{{ok,20},{error,badarith,{exceptions,level3,1}},{negative,-15},none}' ]] || fail "exceptions.tasm: $out"
"$TRACEVM" run examples/exceptions.tasm -e exceptions:crash >/dev/null 2>&1
[[ $? == 1 ]] || fail "exceptions:crash should exit 1"
exit 0
