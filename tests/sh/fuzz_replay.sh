#!/usr/bin/env bash
# The fuzz harnesses (fuzz/) over their whole corpora, outside libFuzzer:
# the seeds made from tests/ and examples/, and every input a fuzzer once
# found a bug with (regress-*), each kept as a regression test.  Each
# harness checks its invariants and aborts on a broken one; this build's
# sanitizers watch the rest.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
BUILD=$(dirname "$(dirname "$TRACEVM")")
for h in asm term pattern run ctl; do
    prog="$BUILD/fuzz/fuzz_replay_$h"
    [[ -x "$prog" ]] || fail "no $prog"
    want=$(ls fuzz/corpus/$h | wc -l)
    out=$("$prog" fuzz/corpus/$h 2>&1) || fail "$h: exit $?: $(tail -c 2000 <<<"$out")"
    [[ "$out" == "$want inputs" ]] || fail "$h: $out (want $want inputs)"
done
echo ok
