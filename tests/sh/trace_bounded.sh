#!/usr/bin/env bash
# Trace frames under load (docs/tracing.md, "Traced tail loops"):
# 1. a tail-recursive loop of 10,000,000 iterations traced with
#    {return_trace} runs in bounded memory (BEAM's stack grows by a frame
#    per iteration): maximum RSS stays under 64 MiB, the result is right,
#    and every event is accounted for: 10,000,001 calls (N = 10,000,000 .. 0) + 1 return_from =
#    events written + events the drop policy counted as lost;
# 2. 32,769 levels of body recursion with {return_trace} and return_to
#    (BEAM behaviour 21) under the lossless policy: exactly one call,
#    one return_from and one return_to per level, nothing lost.
# The events go through a FIFO into a counter, so nothing large is stored.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
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
# into $tmp/counts, the result into $tmp/out, max RSS (KiB) into $tmp/rss.
run() {
    rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
    count <"$tmp/fifo" >"$tmp/counts" &
    local counter=$!
    /usr/bin/time -f %M -o "$tmp/rss" "$TRACEVM" run -S 1 -e "drive:$1" \
        --trace "trl:$1/1" --local --match "[{'_',[],[{return_trace}]}]" \
        --flags "$3" --policy "$4" --format jsonl --out "$tmp/fifo" "$tmp/drive.tasm" "$LIB" "$2" \
        >"$tmp/out" 2>"$tmp/err" || fail "$1 $2: exit $?: $(cat "$tmp/err")"
    wait $counter || fail "$1 $2: the counter failed"
}

run loop 10000000 call,arity drop
[[ $(cat "$tmp/out") == done ]] || fail "loop result: $(cat "$tmp/out")"
rss=$(cat "$tmp/rss")
(( rss < 65536 )) || fail "loop: max RSS $rss KiB"
read -r c rf rt lost <<<"$(tr '=' ' ' <"$tmp/counts" | awk '{print $2, $4, $6, $8}')"
(( rf <= 1 && rt == 0 )) || fail "loop: $(cat "$tmp/counts")"
(( c + rf + lost == 10000002 )) || fail "loop: events not accounted for: $(cat "$tmp/counts")"
echo "loop: $(cat "$tmp/counts"), max RSS $rss KiB"

run deep 32768 call,return_to lossless
[[ $(cat "$tmp/out") == 32768 ]] || fail "deep result: $(cat "$tmp/out")"
read -r c rf rt lost <<<"$(tr '=' ' ' <"$tmp/counts" | awk '{print $2, $4, $6, $8}')"
(( c == 32769 && rf == 32769 && rt == 32769 && lost == 0 )) || fail "deep: $(cat "$tmp/counts")"
echo "deep: $(cat "$tmp/counts")"
exit 0
