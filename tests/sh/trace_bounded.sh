#!/usr/bin/env bash
# Trace frames under load (docs/tracing.md, "Traced tail loops"):
# 1. a tail-recursive loop of N = 10,000,000 iterations (2,000,000 outside
#    the native release build, below) traced with {return_trace} keeps
#    one trace frame for the whole chain (BEAM's stack grows by a frame
#    per iteration): it ends with its result although a process's frame
#    stack holds at most 1,048,576 frames (VM_STACK_LIMIT_WORDS / 4: a
#    frame per iteration would raise system_limit a tenth of the way
#    into 10,000,000), and every event is accounted for: N + 1 calls
#    (N .. 0) + 1 return_from = events written + events the drop policy
#    counted as lost; the same loop of
#    100,000 under the lossless policy gives exactly 100,001 calls, one
#    return_from and nothing lost;
# 2. 32,769 levels of body recursion with {return_trace} and return_to
#    (BEAM behaviour 21) under the lossless policy: exactly one call,
#    one return_from and one return_to per level, nothing lost.
# The events go through a FIFO into a counter, so nothing large is stored.
# The drop loop runs 10,000,000 iterations in the native release build
# and 2,000,000 in the others and under user-mode emulation (a cross
# build's suite): still about twice the frames a process's stack holds,
# so a frame per iteration would still raise system_limit, half way; the
# bigger loop adds only time (31 s of the ThreadSanitizer suite).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
N=2000000
full_scale && N=10000000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LIB=tests/e2e/lib/trl.tasm
cat >"$tmp/drive.tasm" <<'TASM'
module drive
export loop/1, deep/1
function loop/1 regs 1
    callx r0, r0, trl:loop/1
    ret r0
end
function deep/1 regs 1
    callx r0, r0, trl:deep/1
    ret r0
end
TASM

# count < FIFO: "call=N return_from=N return_to=N lost=N" of JSON lines.
count() {
    python3 -c '
import json, sys, collections
c = collections.Counter()
for line in sys.stdin:
    e = json.loads(line)
    c[e["kind"]] += e["count"] if e["kind"] == "lost" else 1
print("call=%d return_from=%d return_to=%d lost=%d" %
      (c["call"], c["return_from"], c["return_to"], c["lost"]))'
}

# run FUN N FLAGS POLICY: traces trl:FUN/1 with return_trace; prints the counts
# into $tmp/counts, the result into $tmp/out.
run() {
    rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
    count <"$tmp/fifo" >"$tmp/counts" &
    local counter=$!
    "$TRACEVM" run -S 1 -e "drive:$1" \
        --trace "trl:$1/1" --local --match "[{'_',[],[{return_trace}]}]" \
        --flags "$3" --policy "$4" --format jsonl --out "$tmp/fifo" "$tmp/drive.tasm" "$LIB" "$2" \
        >"$tmp/out" 2>"$tmp/err" || fail "$1 $2: exit $?: $(cat "$tmp/err")"
    wait $counter || fail "$1 $2: the counter failed"
}

run loop $N call,arity drop
[[ $(cat "$tmp/out") == done ]] || fail "loop result: $(cat "$tmp/out")"
read -r c rf rt lost <<<"$(tr '=' ' ' <"$tmp/counts" | awk '{print $2, $4, $6, $8}')"
# Under drop, which events were lost is the collector's pace: the sum is
# exact (N + 1 calls, one return_from), and the one return_from is either
# written or among the lost.
(( rt == 0 && c + rf + lost == N + 2 )) || fail "loop: events not accounted for: $(cat "$tmp/counts")"
echo "loop: $(cat "$tmp/counts")"

run loop 100000 call,arity lossless
[[ $(cat "$tmp/out") == done ]] || fail "lossless loop result: $(cat "$tmp/out")"
[[ $(cat "$tmp/counts") == "call=100001 return_from=1 return_to=0 lost=0" ]] ||
    fail "lossless loop: $(cat "$tmp/counts")"

run deep 32768 call,return_to lossless
[[ $(cat "$tmp/out") == 32768 ]] || fail "deep result: $(cat "$tmp/out")"
[[ $(cat "$tmp/counts") == "call=32769 return_from=32769 return_to=32769 lost=0" ]] ||
    fail "deep: $(cat "$tmp/counts")"
echo "deep: $(cat "$tmp/counts")"
exit 0
