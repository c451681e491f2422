#!/usr/bin/env bash
# The Chrome trace JSON parses (python3's json), its B/E events nest per
# lane and each E names the B it closes (speedscope ignores an E named
# otherwise), the running slices (X) of a scheduler's lane do not overlap,
# and it stays a whole document when calls are still open at the end and
# events were lost.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
GEN="$(dirname "$TRACEVM")/../tests/trace_gen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check='
import json, sys
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"]
assert doc["displayTimeUnit"] == "ns"
assert ev[0]["ph"] == "M" and ev[0]["name"] == "process_name"
depth, named, run_end = {}, set(), {}
for e in ev:
    for k in ("ph", "pid", "tid"):
        assert k in e, e
    if e["ph"] == "M" and e["name"] == "thread_name":
        named.add(e["tid"])
    if e["ph"] in "BEiX" and e["tid"] != 0:
        assert e["tid"] in named, ("lane without a name", e)
    if e["ph"] == "X":
        assert e["ts"] >= run_end.get(e["tid"], 0), ("overlapping runs", e)
        run_end[e["tid"]] = e["ts"] + e["dur"]
    if e["ph"] == "B":
        depth.setdefault(e["tid"], []).append(e["name"])
    elif e["ph"] == "E":
        open_ = depth.get(e["tid"], [])
        assert open_, ("E without B", e)
        # speedscope pairs E with B by name and ignores an E that differs.
        assert e.get("name") == open_.pop(), ("E named unlike its B", e)
assert all(not d for d in depth.values()), depth
lost = sum(e["args"]["count"] for e in ev if e.get("name") == "lost")
assert lost == doc["otherData"]["lost_events"], lost
print(len(ev), lost)
'
"$GEN" chrome >"$tmp/fixed.json" || fail "trace_gen chrome"
out=$(python3 -c "$check" "$tmp/fixed.json" 2>&1) || fail "fixed sequence: $out"
# 22 events (an exception_from writes an instant and its E), plus the run
# of <0.7.0> on scheduler 1 and that lane's name.
[[ $out == "24 3" ]] || fail "fixed sequence: expected 24 events and 3 lost, got $out"
counts=$("$GEN" pipeline-chrome "$tmp/pipe.json" 600) || fail "trace_gen pipeline-chrome: $counts"
lost=$(sed -n 's/.*lost=\([0-9]*\).*/\1/p' <<<"$counts")
out=$(python3 -c "$check" "$tmp/pipe.json" 2>&1) || fail "pipeline: $out"
[[ ${out#* } == "$lost" ]] || fail "pipeline: $out, but the pipeline lost $lost"
exit 0
