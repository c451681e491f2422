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
# tracedemo: call events only while the pattern is on, and only of work/1
tmp=$(mktemp)
out=$("$TRACEVM" run -S 2 examples/tracedemo.tasm --flags call 2>"$tmp") || fail "tracedemo.tasm: $out"
[[ "$out" == $'trace_pattern(tracedemo:work/1, true) matched 1\ntrace_pattern(tracedemo:work/1, false) matched 1\ndone' ]] ||
    fail "tracedemo.tasm: $out"
nev=$(grep -c . "$tmp")
bad=$(grep -vcE '^\{trace,<0\.[23]\.0>,call,\{tracedemo,work,\[[0-9]+\]\}\}$' "$tmp")
rm -f "$tmp"
(( nev >= 2 && bad == 0 )) || fail "tracedemo.tasm: $nev events, $bad not calls of work/1"
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
