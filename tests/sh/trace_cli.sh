#!/usr/bin/env bash
# tracevm run --trace: the exact call, spawn, spawned and exit events of
# tests/sh/data/trace_calls.tasm in text for global and local patterns and
# the arity, timestamp and procs flags; the same run on every scheduler
# (same events, order free); JSON lines and Chrome JSON parsed by python3;
# CTF read by babeltrace2 (tests/sh/lib.sh: need); usage errors (exit 2,
# naming the option).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
P=tests/sh/data/trace_calls.tasm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run ARGS...: tracevm run on P, one scheduler; stdout must be the result 6.
run() {
    "$TRACEVM" run "$P" -S 1 "$@" >"$tmp/out" 2>"$tmp/err" || fail "exit $? for $*: $(cat "$tmp/err")"
    [[ $(cat "$tmp/out") == 6 ]] || fail "result for $*: $(cat "$tmp/out")"
}
# expect ARGS... <<WANT: the trace on stderr is exactly WANT.
expect() {
    run "$@"
    diff -u - "$tmp/err" || fail "trace of $* differs"
}

expect --trace 'tc:_/_' <<'WANT'
{trace,<0.1.0>,call,{tc,main,[]}}
{trace,<0.2.0>,call,{tc,worker,[5]}}
{trace,<0.2.0>,call,{tc,twice,[5]}}
WANT
expect --trace 'tc:_/_' --flags call,procs <<'WANT'
{trace,<0.1.0>,spawned,<0.0.0>,{tc,main,[]}}
{trace,<0.1.0>,call,{tc,main,[]}}
{trace,<0.1.0>,spawn,<0.2.0>,{tc,worker,[5]}}
{trace,<0.2.0>,spawned,<0.1.0>,{tc,worker,[5]}}
{trace,<0.2.0>,call,{tc,worker,[5]}}
{trace,<0.2.0>,call,{tc,twice,[5]}}
{trace,<0.2.0>,exit,normal}
{trace,<0.1.0>,exit,normal}
WANT
# Local patterns: local calls too (add_self/1, and twice/1 from main).
cat >"$tmp/local" <<'WANT'
{trace,<0.1.0>,spawned,<0.0.0>,{tc,main,[]}}
{trace,<0.1.0>,call,{tc,main,[]}}
{trace,<0.1.0>,spawn,<0.2.0>,{tc,worker,[5]}}
{trace,<0.2.0>,spawned,<0.1.0>,{tc,worker,[5]}}
{trace,<0.2.0>,call,{tc,worker,[5]}}
{trace,<0.2.0>,call,{tc,twice,[5]}}
{trace,<0.2.0>,call,{tc,add_self,[5]}}
{trace,<0.2.0>,exit,normal}
{trace,<0.1.0>,call,{tc,twice,[3]}}
{trace,<0.1.0>,call,{tc,add_self,[3]}}
{trace,<0.1.0>,exit,normal}
WANT
expect --trace 'tc:_/_' --local --flags call,procs <"$tmp/local"
# Two patterns; arity instead of arguments.
expect --trace tc:twice/1 --trace tc:add_self/1 --local --flags call,arity <<'WANT'
{trace,<0.2.0>,call,{tc,twice,1}}
{trace,<0.2.0>,call,{tc,add_self,1}}
{trace,<0.1.0>,call,{tc,twice,1}}
{trace,<0.1.0>,call,{tc,add_self,1}}
WANT
# Processes only, no patterns.
expect --flags procs <<'WANT'
{trace,<0.1.0>,spawned,<0.0.0>,{tc,main,[]}}
{trace,<0.1.0>,spawn,<0.2.0>,{tc,worker,[5]}}
{trace,<0.2.0>,spawned,<0.1.0>,{tc,worker,[5]}}
{trace,<0.2.0>,exit,normal}
{trace,<0.1.0>,exit,normal}
WANT
# A global pattern on a function that is not exported matches nothing.
expect --trace tc:add_self/1 <<'WANT'
tracevm run: warning: --trace tc:add_self/1 matches no function (without --local, exported ones only)
WANT

# The three timestamp flags, as BEAM's: trace_ts with the stamp last;
# monotonic_timestamp the monotonic ns, not decreasing; timestamp the
# system time {MegaSecs,Secs,MicroSecs}, within the run's wall-clock
# seconds; strict_monotonic_timestamp {Ns,Unique}, both increasing
# (Unique strictly); timestamp wins over the other two, strict over
# monotonic.
cat >"$tmp/tswant" <<'WANT'
{trace_ts,<0.1.0>,spawned,<0.0.0>,{tc,main,[]},TS}
{trace_ts,<0.1.0>,call,{tc,main,[]},TS}
{trace_ts,<0.1.0>,spawn,<0.2.0>,{tc,worker,[5]},TS}
{trace_ts,<0.2.0>,spawned,<0.1.0>,{tc,worker,[5]},TS}
{trace_ts,<0.2.0>,call,{tc,worker,[5]},TS}
{trace_ts,<0.2.0>,call,{tc,twice,[5]},TS}
{trace_ts,<0.2.0>,exit,normal,TS}
{trace_ts,<0.1.0>,exit,normal,TS}
WANT
run --trace 'tc:_/_' --flags call,procs,monotonic_timestamp
sed -E 's/,[0-9]+}$/,TS}/' "$tmp/err" | diff -u "$tmp/tswant" - || fail "monotonic_timestamp trace differs"
sed -E 's/.*,([0-9]+)}$/\1/' "$tmp/err" | sort -n -c || fail "timestamps decrease: $(cat "$tmp/err")"
t0=$(date +%s)
run --trace 'tc:_/_' --flags call,procs,timestamp,strict_monotonic_timestamp,monotonic_timestamp
t1=$(date +%s)
sed -E 's/,\{[0-9]+,[0-9]+,[0-9]+\}}$/,TS}/' "$tmp/err" | diff -u "$tmp/tswant" - ||
    fail "timestamp trace differs"
sed -E 's/.*,\{([0-9]+),([0-9]+),([0-9]+)\}}$/\1 \2 \3/' "$tmp/err" | while read -r mega sec micro; do
    ((mega * 1000000 + sec >= t0 && mega * 1000000 + sec <= t1 && micro < 1000000)) ||
        fail "timestamp {$mega,$sec,$micro} is not within $t0..$t1"
done || exit 1
run --trace 'tc:_/_' --flags call,procs,strict_monotonic_timestamp,monotonic_timestamp
sed -E 's/,\{[0-9]+,-?[0-9]+\}}$/,TS}/' "$tmp/err" | diff -u "$tmp/tswant" - ||
    fail "strict_monotonic_timestamp trace differs"
sed -E 's/.*,\{([0-9]+),-?[0-9]+\}}$/\1/' "$tmp/err" | sort -n -c || fail "strict ns decrease"
sed -E 's/.*,\{[0-9]+,(-?[0-9]+)\}}$/\1/' "$tmp/err" | sort -n -u -c || fail "strict unique integers not increasing"

# Every scheduler: the same events (their order across processes is free).
"$TRACEVM" run "$P" -S 2 --trace 'tc:_/_' --local --flags call,procs >"$tmp/out" 2>"$tmp/err" ||
    fail "-S 2 exited $?"
sort "$tmp/err" | diff -u <(sort "$tmp/local") - || fail "events on two schedulers differ"

# --out FILE (text): the file holds the trace, stderr nothing.
run --trace tc:main/0 --out "$tmp/t.txt"
[[ ! -s $tmp/err && $(cat "$tmp/t.txt") == '{trace,<0.1.0>,call,{tc,main,[]}}' ]] ||
    fail "--out text: $(cat "$tmp/t.txt") / $(cat "$tmp/err")"

# JSON lines: each line parses; kinds, pids and functions in order.
run --trace 'tc:_/_' --flags call,procs --format jsonl
python3 - "$tmp/err" <<'PY' || fail "jsonl"
import json, sys
got = []
for line in open(sys.argv[1]):
    o = json.loads(line)
    assert list(o)[:4] == ["ts", "sched", "pid", "kind"], o
    # (the first process's spawned event is written by the thread that
    # spawned it, the command's, into the shared ring: -1)
    assert o["sched"] == (-1 if (o["pid"], o["kind"]) == (1, "spawned") else 0), o
    got.append((o["pid"], o["kind"], o.get("fun"), o.get("args") or o.get("reason")))
want = [(1, "spawned", "main", "[]"), (1, "call", "main", "[]"), (1, "spawn", "worker", "[5]"),
        (2, "spawned", "worker", "[5]"), (2, "call", "worker", "[5]"),
        (2, "call", "twice", "[5]"), (2, "exit", None, "normal"), (1, "exit", None, "normal")]
assert got == want, got
PY

# Chrome JSON: valid JSON, one lane per process, the calls as instants.
run --trace 'tc:_/_' --flags call,procs --format chrome --out "$tmp/c.json"
python3 - "$tmp/c.json" <<'PY' || fail "chrome"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
lanes = {e["tid"]: e["args"]["name"] for e in ev if e["name"] == "thread_name"}
assert lanes == {1: "<0.1.0>", 2: "<0.2.0>"}, lanes
got = [(e["tid"], e["cat"], e["name"]) for e in ev if e["ph"] == "i"]
want = [(1, "spawned", "spawned"), (1, "call", "tc:main/0"), (1, "spawn", "spawn"),
        (2, "spawned", "spawned"), (2, "call", "tc:worker/1"),
        (2, "call", "tc:twice/1"), (2, "exit", "exit"), (1, "exit", "exit")]
assert got == want, got
assert d["otherData"]["lost_events"] == 0
PY

# Usage errors: exit 2 and a message naming the option.
usage_error() { # message args...
    local msg=$1; shift
    "$TRACEVM" run "$P" "$@" >"$tmp/out" 2>"$tmp/err"
    local st=$?
    [[ $st == 2 ]] || fail "$* exited $st, expected 2: $(cat "$tmp/err")"
    grep -qF -- "$msg" "$tmp/err" || fail "$*: expected '$msg', got: $(cat "$tmp/err")"
    [[ ! -s $tmp/out ]] || fail "$*: the program ran"
}
usage_error "--format: unknown format 'xml' (expected text, jsonl, chrome, ctf or ctf-raw)" --trace tc:main/0 --format xml
usage_error "--flags: unknown flag 'sends' (expected a comma-separated list of call, arity, timestamp, procs, return_to, silent, running, send, receive, set_on_spawn, set_on_first_spawn, garbage_collection, set_on_link, set_on_first_link, exiting, monotonic_timestamp, strict_monotonic_timestamp or all)" --flags call,sends
usage_error "--policy: unknown policy 'lossy' (expected drop or lossless)" --flags call --policy lossy
usage_error "--policy needs --trace or --flags" --policy lossless
usage_error "--flags: unknown flag ''" --flags call,
usage_error "--format chrome needs --out FILE" --trace tc:main/0 --format chrome
usage_error "--format ctf needs --out DIR" --trace tc:main/0 --format ctf
usage_error "--local needs --trace or --flags" --local
usage_error "--out needs --trace or --flags" --out "$tmp/x"
usage_error "--trace needs a pattern" --trace
usage_error "--trace _:f/1: bad pattern" --trace _:f/1
usage_error "--out $tmp/no/such/dir/t.txt: cannot open" --trace tc:main/0 --out "$tmp/no/such/dir/t.txt"

# An output that fails (a full disk) is an error at the end: the result
# is still printed, the exit status is 1 and stderr says so, with the
# format and the OS's reason.  It exited 0 with an empty trace; then it
# said only "failed: events are missing from it".
if [[ -w /dev/full ]]; then
    for fmt in text jsonl chrome; do
        "$TRACEVM" run "$P" -S 1 --trace 'tc:_/_' --format $fmt --out /dev/full \
            >"$tmp/out" 2>"$tmp/err"
        code=$?
        [[ $code == 1 && $(cat "$tmp/out") == 6 ]] || fail "$fmt to /dev/full: exit $code"
        [[ "$(cat "$tmp/err")" == "tracevm run: writing the trace to /dev/full ($fmt) failed: No space left on device; events from then on are missing" ]] ||
            fail "$fmt to /dev/full: $(cat "$tmp/err")"
    done
fi

# CTF: babeltrace2 prints the events (timestamps left out).
need babeltrace2 "the CTF part"
run --trace 'tc:_/_' --flags call,procs --format ctf --out "$tmp/ctf"
babeltrace2 "$tmp/ctf" 2>"$tmp/bterr" | sed -E 's/^\[[^]]*\] \([^)]*\) //' | diff -u - <(cat <<'WANT'
spawned: { sched_id = -1 }, { pid = 1, module = "tc", function = "main", arity = 0, parent = "<0.0.0>", args = "[]" }
call: { sched_id = 0 }, { pid = 1, module = "tc", function = "main", arity = 0, args = "[]", message = "", backtrace = "" }
spawn: { sched_id = 0 }, { pid = 1, module = "tc", function = "worker", arity = 1, child = "<0.2.0>", args = "[5]" }
spawned: { sched_id = 0 }, { pid = 2, module = "tc", function = "worker", arity = 1, parent = "<0.1.0>", args = "[5]" }
call: { sched_id = 0 }, { pid = 2, module = "tc", function = "worker", arity = 1, args = "[5]", message = "", backtrace = "" }
call: { sched_id = 0 }, { pid = 2, module = "tc", function = "twice", arity = 1, args = "[5]", message = "", backtrace = "" }
exit: { sched_id = 0 }, { pid = 2, module = "", function = "", arity = 0, reason = "normal" }
exit: { sched_id = 0 }, { pid = 1, module = "", function = "", arity = 0, reason = "normal" }
WANT
) || fail "babeltrace2 output differs: $(cat "$tmp/bterr")"
# A CTF directory that is not empty is refused.
usage_error "--out $tmp/ctf:" --trace tc:main/0 --format ctf --out "$tmp/ctf"
exit 0
