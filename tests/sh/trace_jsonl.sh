#!/usr/bin/env bash
# The JSON lines sink: every line parses on its own (python3's json), the
# keys come in the documented order, and the lost count adds up.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
GEN="$(dirname "$TRACEVM")/../tests/trace_gen"
out=$("$GEN" jsonl | python3 -c '
import json, sys
n = lost = 0
for line in sys.stdin:
    o = json.loads(line)
    keys = list(o)
    assert keys[:2] == ["ts", "sched"], keys
    if o["kind"] == "lost":
        assert keys == ["ts", "sched", "kind", "count"], keys
        lost += o["count"]
    else:
        assert keys[2:4] == ["pid", "kind"], keys
        n += 1
print(n, lost)
' 2>&1) || fail "$out"
[[ $out == "15 3" ]] || fail "expected 15 events and 3 lost, got $out"
exit 0
