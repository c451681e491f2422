#!/usr/bin/env bash
# The {backtrace} match-spec action attaches the calling process's mixed
# stack to the call event (docs/tracing.md, Match specs): for
# tests/sh/data/trace_bt.tasm, main -> erlang:apply/3 (native) ->
# trl:nest/1, the VM frames come out innermost first with their lines,
# the native frames of the apply between them, symbolized, the fiber's
# entry last, and none of the tracer's own frames before the traced call.
# The text and JSON lines formats carry it.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
spec="[{'_',[],[{backtrace}]}]"
"$TRACEVM" run -S 1 --trace 'trl:nest/1' --local --match "$spec" --flags call \
    tests/sh/data/trace_bt.tasm tests/e2e/lib/trl.tasm >"$tmp/out" 2>"$tmp/err" ||
    fail "exit $?: $(cat "$tmp/err")"
[[ $(cat "$tmp/out") == 5 ]] || fail "result: $(cat "$tmp/out")"
python3 - "$tmp/err" <<'PY' || exit 1
import re, sys
text = open(sys.argv[1]).read().strip()
m = re.fullmatch(r'\{trace,<0\.1\.0>,call,\{trl,nest,\[5\]\},\{backtrace,\[(.*)\]\}\}', text)
if not m:
    sys.exit('FAIL: not a call event with a backtrace: %r' % text)
frames = re.findall(r'\{[^{}]*\}|<<"[^"]*">>', m.group(1))
vm = [(i, f) for i, f in enumerate(frames) if f.startswith('{')]
want = ['{trl,nest,1,71}', '{erlang,apply,3,0}', '{bt,main,0,9}']
if [f for _, f in vm] != want:
    sys.exit('FAIL: VM frames %s, want %s' % ([f for _, f in vm], want))
if vm[0][0] != 0:
    sys.exit('FAIL: the tracer\'s own frames come first: %s' % frames[:vm[0][0]])
between = frames[vm[0][0] + 1:vm[1][0]]
if not between or not all(re.fullmatch(r'<<"[A-Za-z_][A-Za-z_0-9.]*\+0x[0-9a-f]+">>', f)
                          for f in between):
    sys.exit('FAIL: no symbolized native frames between nest and apply: %s' % between)
if not any('apply' in f for f in between):
    sys.exit('FAIL: the native apply is not among %s' % between)
if not re.fullmatch(r'<<"vm_fiber_entry\+0x[0-9a-f]+">>', frames[-1]):
    sys.exit('FAIL: the last frame is %s, not the fiber entry' % frames[-1])
print('backtrace: %d frames, VM %s' % (len(frames), [f for _, f in vm]))
PY
"$TRACEVM" run -S 1 --trace 'trl:nest/1' --local --match "$spec" --flags call \
    --format jsonl --out "$tmp/t.jsonl" tests/sh/data/trace_bt.tasm tests/e2e/lib/trl.tasm \
    >/dev/null 2>"$tmp/err" || fail "jsonl: exit $?: $(cat "$tmp/err")"
python3 -c '
import json, sys
e = json.loads(open(sys.argv[1]).read())
assert e["kind"] == "call" and e["args"] == "[5]", e
assert e["backtrace"].startswith("[{trl,nest,1,71},"), e["backtrace"]
' "$tmp/t.jsonl" || fail "jsonl backtrace"
exit 0
