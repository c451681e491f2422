#!/usr/bin/env bash
# The CTF sink read back by babeltrace2: the fixed event sequence prints
# exactly, with the loss reported in its stream; losses at the edges of
# streams are reported too; a real pipeline that
# drops events prints every event it kept and reports every event it
# dropped.  Needs babeltrace2 (tests/sh/lib.sh: need).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
need babeltrace2
GEN="$(dirname "$TRACEVM")/../tests/trace_gen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$GEN" ctf "$tmp/fixed" || fail "trace_gen ctf"
babeltrace2 --clock-gmt --no-delta "$tmp/fixed" >"$tmp/out" 2>"$tmp/err" ||
    fail "babeltrace2 exited $?: $(cat "$tmp/err")"
cat >"$tmp/want" <<'WANT'
[00:00:00.000001000] call: { sched_id = 0 }, { pid = 42, module = "fib", function = "fib", arity = 1, args = "[10]", message = "", backtrace = "" }
[00:00:00.000001100] call: { sched_id = 0 }, { pid = 42, module = "fib", function = "fib", arity = 1, args = "[9]", message = "", backtrace = "" }
[00:00:00.000001200] in: { sched_id = 1 }, { pid = 7, module = "m", function = "loop", arity = 0 }
[00:00:00.000001300] call: { sched_id = 1 }, { pid = 7, module = "m", function = "f", arity = 1, args = "[badarg]", message = "", backtrace = "" }
[00:00:00.000001400] return_from: { sched_id = 0 }, { pid = 42, module = "fib", function = "fib", arity = 1, value = "34" }
[00:00:00.000001500] exception_from: { sched_id = 1 }, { pid = 7, module = "m", function = "f", arity = 1, class = "error", reason = "badarg" }
[00:00:00.000001600] return_to: { sched_id = 1 }, { pid = 7, module = "m", function = "loop", arity = 0 }
[00:00:00.000001700] return_from: { sched_id = 0 }, { pid = 42, module = "fib", function = "fib", arity = 1, value = "55" }
[00:00:00.000001800] spawn: { sched_id = -1 }, { pid = 42, module = "m", function = "start", arity = 1, child = "<0.43.0>", args = "[1]" }
[00:00:00.000001900] send: { sched_id = 0 }, { pid = 42, module = "", function = "", arity = 0, msg = "{hello,<<\"hi\">>}", to = "<0.43.0>" }
[00:00:00.000002000] receive: { sched_id = 1 }, { pid = 43, module = "", function = "", arity = 0, msg = "{hello,<<\"hi\">>}" }
[00:00:00.000002100] out: { sched_id = 1 }, { pid = 7, module = "m", function = "loop", arity = 0 }
[00:00:00.000002200] call: { sched_id = 0 }, { pid = 42, module = "lists", function = "seq", arity = 3, args = "[<<\"0123456789abcdefghi\"...>>|...]", message = "", backtrace = "" }
[00:00:00.000002300] call: { sched_id = 0 }, { pid = 42, module = "io", function = "format", arity = 2, args = "", message = "", backtrace = "" }
[00:00:00.000002400] exit: { sched_id = 1 }, { pid = 7, module = "", function = "", arity = 0, reason = "normal" }
WANT
diff -u "$tmp/want" "$tmp/out" || fail "babeltrace2 output differs"
grep -q "Tracer discarded 3 events between \[00:00:00.000001400\] and \[00:00:00.000002300\] .* within stream \"$tmp/fixed/sched_0\"" "$tmp/err" ||
    fail "no report of the 3 lost events: $(cat "$tmp/err")"
[[ $(grep -c discarded "$tmp/err") == 1 ]] || fail "unexpected reports: $(cat "$tmp/err")"

# Losses that need packets of their own: before a stream's first event,
# after its last one, and on a stream that has no events.
"$GEN" ctf-losses "$tmp/losses" || fail "trace_gen ctf-losses"
babeltrace2 --clock-gmt "$tmp/losses" >"$tmp/out" 2>"$tmp/err" ||
    fail "babeltrace2 exited $?: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/out") == 2 ]] || fail "expected 2 events: $(cat "$tmp/out")"
for want in "5 events between \[00:00:00.000000500\] and \[00:00:00.000001000\] .*/sched_1\"" \
            "7 events between \[00:00:00.000001100\] and \[00:00:00.000002000\] .*/sched_0\"" \
            "2 events between \[00:00:00.000002100\] and \[00:00:00.000002100\] .*/shared\""; do
    grep -q "Tracer discarded $want" "$tmp/err" || fail "no report matching '$want': $(cat "$tmp/err")"
done

# Through the pipeline: 2 schedulers + the shared ring, rings that overflow.
counts=$("$GEN" pipeline-ctf "$tmp/pipe" 600) || fail "trace_gen pipeline-ctf: $counts"
emitted=$(sed -n 's/.*emitted=\([0-9]*\).*/\1/p' <<<"$counts")
lost=$(sed -n 's/.*lost=\([0-9]*\).*/\1/p' <<<"$counts")
((lost > 0)) || fail "the pipeline run lost nothing: $counts"
babeltrace2 "$tmp/pipe" >"$tmp/out" 2>"$tmp/err" || fail "babeltrace2 exited $?: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/out") == "$emitted" ]] ||
    fail "babeltrace2 printed $(wc -l <"$tmp/out") events, the pipeline emitted $emitted"
reported=$(grep -o 'discarded [0-9]* events\?' "$tmp/err" | awk '{s += $2} END {print s + 0}')
[[ $reported == "$lost" ]] || fail "babeltrace2 reports $reported lost events, the pipeline lost $lost"
exit 0
