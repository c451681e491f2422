#!/usr/bin/env bash
# Terms 10,000,000 levels deep (fewer outside the native release build: N
# below), built by VM code (tests/e2e/deep_terms.tasm, which runs every
# check at 200,000 levels in the suite's e2e pass):
# 1. returned by the first process: the exit value is copied out of the
#    process, into the CLI's env, and printed whole (tracevm run prints
#    the result): [[...[]...]] is 2N + 2 bytes and a newline;
# 2. sent, compared, passed to a spawned process, carried by a 'DOWN'
#    message and traced as an argument (the worker of the e2e test, one
#    shape: nested in the first element of pairs, the deepest for a
#    recursive walk, which would recurse on every level).
# Everything is checked by size and by its two ends, nothing stored whole.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 10,000,000 levels in the optimised native build (release), 1,000,000 in
# the debug, ASan and clang builds: a million is already past what
# recursion survives on these stacks (16 bytes a level at least, 16 MB
# against the main thread's 8 MiB), and the deeper walk only takes ten
# times as long.  200,000 under ThreadSanitizer and under user-mode
# emulation (a cross build's suite), where the walks run ten times slower
# or emulated and the same C walks deeper natively
# (tests/unit/vm/test_deep.c says more).
N=1000000
[[ "${TRACEVM_MODE:-}" == tsan || -n "${TRACEVM_RUN:-}" ]] && N=200000
full_scale && N=10000000
PROG=tests/e2e/deep_terms.tasm

# ends FILE: "BYTES HEAD...TAIL" (16 bytes each end).
ends() {
    python3 -c '
import sys
d = open(sys.argv[1], "rb").read()
print(len(d), d[:16].decode(), d[-17:].decode().rstrip("\n"))' "$1"
}

"$TRACEVM" run -q -S 1 $PROG -e deep_terms:build hlist $N '[]' >"$tmp/h.txt" ||
    fail "hlist: exit $?"
got=$(ends "$tmp/h.txt")
want="$((2 * N + 3)) [[[[[[[[[[[[[[[[ ]]]]]]]]]]]]]]]]"
[[ "$got" == "$want" ]] || fail "hlist: got '$got', want '$want'"

"$TRACEVM" run -q -S 1 --trace deep_terms:id/1 --local $PROG -e deep_terms:run tfirst $N \
    >"$tmp/w.txt" 2>"$tmp/w.err" || fail "worker: exit $?"
[[ "$(cat "$tmp/w.txt")" == "{tfirst,true,true,true,true,true}" ]] ||
    fail "worker: $(head -c 300 "$tmp/w.txt")"
want='{trace,<0.2.0>,call,{deep_terms,id,[{{{{{{{{{{{{{{{{...,15},14},13},12},11},10},9},8},7},6},5},4},3},2},1},0}]}}'
[[ "$(cat "$tmp/w.err")" == "$want" ]] || fail "worker trace: $(head -c 300 "$tmp/w.err")"
echo ok
