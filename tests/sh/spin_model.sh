#!/usr/bin/env bash
# The breakpoint protocol model (tests/model/bp_protocol.pml, see
# docs/breakpoints.md): spin must verify it with no errors, and the same
# model built with -DSEEDED_BUG (one thread-progress wait removed) must
# fail.  Works in a temporary directory; TRACEVM and EMBED are not used.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# The model is the same whatever the build, so it is checked once, in the
# gcc debug build's suite (the first CI runs); the others report a skip
# (exit 77) instead of spending 11-22 s each on the same verification.
# (Run by hand, without TRACEVM, it always verifies.)
if [[ -n ${TRACEVM:-} && $TRACEVM != */build/debug/* ]]; then
    echo "verifies the model, not a build: checked in mode=debug"
    exit 77
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
model="$here/../model/bp_protocol.pml"
[[ -f $model ]] || fail "missing $model"
need spin
need gcc

tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

# verify NAME [SPIN-FLAGS...]: build and run pan in $tmp/NAME; the report
# is left in $tmp/NAME/out.
verify() {
    local name=$1; shift
    local dir="$tmp/$name"
    mkdir -p "$dir" && cp "$model" "$dir/" || fail "copy model"
    (cd "$dir" &&
        spin -a "$@" bp_protocol.pml >spin.log 2>&1 &&
        gcc -O2 -DSAFETY -o pan pan.c >gcc.log 2>&1) ||
        fail "$name: cannot build pan: $(cat "$dir"/*.log)"
    # -m: the search depth must not be cut (the readers loop).
    (cd "$dir" && ./pan -m1000000 >out 2>&1)
    grep -q 'max search depth too small' "$dir/out" && fail "$name: search depth cut"
    grep -Eo 'errors: [0-9]+' "$dir/out" | head -1 | grep -Eo '[0-9]+' ||
        fail "$name: no error count in pan output: $(tail -20 "$dir/out")"
}
states() { grep -Eo '[0-9]+ states, stored' "$tmp/$1/out" | head -1; }
elapsed() { grep -Eo 'elapsed time [0-9.e+-]+' "$tmp/$1/out" | head -1; }

start=$(date +%s.%N)

errs=$(verify correct) || { echo "$errs"; exit 1; }
[[ $errs == 0 ]] || fail "correct model: errors: $errs
$(grep -E 'assertion violated|pan:' "$tmp/correct/out")"

berrs=$(verify seeded -DSEEDED_BUG) || { echo "$berrs"; exit 1; }
(( berrs >= 1 )) || fail "seeded-bug model verified (errors: 0); the check is vacuous"
violated=$(grep -Eo 'assertion violated .*\(at' "$tmp/seeded/out" | head -1 | sed 's/ (at$//')

end=$(date +%s.%N)
echo "bp_protocol.pml: errors: 0, $(states correct), $(elapsed correct)"
echo "bp_protocol.pml -DSEEDED_BUG: errors: $berrs ($violated), $(states seeded)"
printf 'total %.2f s\n' "$(echo "$end - $start" | bc -l 2>/dev/null || echo 0)"
exit 0
