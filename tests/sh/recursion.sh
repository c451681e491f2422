#!/usr/bin/env bash
# No C recursion grows with a term (docs/safety.md): tests/check_recursion.py
# finds every cycle of direct calls in the library (gcc's
# -fcallgraph-info) and accepts only the ones bounded by a constant, each
# listed with its bound.  It reads the call graphs the gcc debug build
# writes beside its objects, so it runs once, there; the recursive walks
# the VM used to have (term_compare, term_size, vm_print_term, the copy)
# are what it stops.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
# Exit 77 is the runner's skip: the other builds report it as skipped
# rather than passed, since they check nothing here.
case $TRACEVM in
*/build/debug/*) ;;
*) echo "reads the gcc debug build's -fcallgraph-info: checked in mode=debug"; exit 77;;
esac
out=$(python3 tests/check_recursion.py --build "${TRACEVM%/tools/tracevm}") || fail "$out"
echo ok
