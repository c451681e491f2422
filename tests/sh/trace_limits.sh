#!/usr/bin/env bash
# tracevm run's limits on its trace (the default session, docs/tracing.md
# "Sessions"): --max-events N writes exactly N events and then the last
# record {trace_stopped,max_events,N,0}; --rate N/WINDOW stops when a
# window holds more (or, with --rate-policy drop, drops the rest and
# counts them); --duration S stops after S seconds; with a limit (or when
# events were lost) one line at exit says what the trace wrote and lost
# and why it stopped; usage errors name the option.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FIB=examples/fib.tasm

# fib(10) makes 177 calls of fib/1 (on one scheduler, in a fixed order).
"$TRACEVM" run -S 1 "$FIB" -e fib:fib 10 --trace fib:fib/1 --local --max-events 4 \
    >"$tmp/out" 2>"$tmp/err" || fail "--max-events: exit $?: $(cat "$tmp/err")"
[[ $(cat "$tmp/out") == 55 ]] || fail "--max-events result: $(cat "$tmp/out")"
diff -u - "$tmp/err" <<'WANT' || fail "--max-events trace"
{trace,<0.1.0>,call,{fib,fib,[10]}}
{trace,<0.1.0>,call,{fib,fib,[9]}}
{trace,<0.1.0>,call,{fib,fib,[8]}}
{trace,<0.1.0>,call,{fib,fib,[7]}}
{trace_stopped,max_events,4,0}
tracevm run: trace session default: 4 events written, 0 lost, stopped: max_events
WANT

# A rate: 3 per 1000 s (one window for the whole run): stop ...
"$TRACEVM" run -S 1 "$FIB" -e fib:fib 10 --trace fib:fib/1 --local --rate 3/1000s \
    >"$tmp/out" 2>"$tmp/err" || fail "--rate: exit $?: $(cat "$tmp/err")"
diff -u - "$tmp/err" <<'WANT' || fail "--rate trace"
{trace,<0.1.0>,call,{fib,fib,[10]}}
{trace,<0.1.0>,call,{fib,fib,[9]}}
{trace,<0.1.0>,call,{fib,fib,[8]}}
{trace_stopped,rate,3,0}
tracevm run: trace session default: 3 events written, 0 lost, stopped: rate
WANT
# ... or drop and count (177 calls: 3 written, 174 dropped).
"$TRACEVM" run -S 1 "$FIB" -e fib:fib 10 --trace fib:fib/1 --local --rate 3/1000s \
    --rate-policy drop --out "$tmp/t.txt" >"$tmp/out" 2>"$tmp/err" ||
    fail "--rate drop: exit $?: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/t.txt") == 3 ]] || fail "--rate drop trace: $(cat "$tmp/t.txt")"
[[ $(cat "$tmp/err") == "tracevm run: trace session default: 3 events written, 174 lost" ]] ||
    fail "--rate drop summary: $(cat "$tmp/err")"

# A duration: the program runs about 300 ms (a call and a 1 ms sleep, 300
# times); the trace stops by itself before it ends (no time is asserted:
# only the reason, and that the last record closes the trace).
cat >"$tmp/slow.tasm" <<'TASM'
module slow
export main/1, f/1
function f/1 regs 1
    ret r0
end
function main/1 regs 3
top:
    jeqi r0, 0, done
    move r1, r0
    callx r1, r1, slow:f/1
    loadi r1, 1
    callx r1, r1, timer:sleep/1
    addi r0, r0, -1
    jump top
done:
    loadk r0, done
    ret r0
end
TASM
"$TRACEVM" run -S 1 "$tmp/slow.tasm" -e slow:main 300 --trace slow:f/1 --duration 0.02 \
    --out "$tmp/t.txt" >"$tmp/out" 2>"$tmp/err" || fail "--duration: exit $?: $(cat "$tmp/err")"
grep -Eq '^tracevm run: trace session default: [0-9]+ events written, 0 lost, stopped: duration$' \
    "$tmp/err" || fail "--duration summary: $(cat "$tmp/err")"
tail -1 "$tmp/t.txt" | grep -Eq '^\{trace_stopped,duration,[0-9]+,0\}$' ||
    fail "--duration last record: $(tail -1 "$tmp/t.txt")"

# Usage errors.
usage_error() {
    local want=$1
    shift
    "$TRACEVM" run -S 1 "$FIB" -e fib:fib 3 "$@" >/dev/null 2>"$tmp/err"
    [[ $? == 2 && $(cat "$tmp/err") == "$want" ]] || fail "$*: $(cat "$tmp/err")"
}
usage_error "tracevm run: --max-events needs a number of events (1 or more, at most 18446744073709551615), got '0'" \
    --trace fib:fib/1 --max-events 0
# Past 64 bits, or signed: strtoull clamped the first to 2^64 - 1 and
# wrapped the second to 2^64 - 5, and both ran as if without a limit.
usage_error "tracevm run: --max-events needs a number of events (1 or more, at most 18446744073709551615), got '18446744073709551616'" \
    --trace fib:fib/1 --max-events 18446744073709551616
usage_error "tracevm run: --max-events needs a number of events (1 or more, at most 18446744073709551615), got '+5'" \
    --trace fib:fib/1 --max-events +5
# A bad count is named once (it was named twice, by --max-events' words
# and then by --rate's); a window K whose K times 1,000 ms passes 64 bits
# wrapped to a window of 384 ms.
usage_error "tracevm run: --rate needs N/s, N/ms, N/Ks or N/Kms (N events per window), got '0/s'" \
    --trace fib:fib/1 --rate 0/s
usage_error "tracevm run: --rate needs N/s, N/ms, N/Ks or N/Kms (N events per window), got '5/18446744073709552s'" \
    --trace fib:fib/1 --rate 5/18446744073709552s
usage_error "tracevm run: --rate needs N/s, N/ms, N/Ks or N/Kms (N events per window), got '5/0ms'" \
    --trace fib:fib/1 --rate 5/0ms
usage_error "tracevm run: --rate needs N/s, N/ms, N/Ks or N/Kms (N events per window), got '3'" \
    --trace fib:fib/1 --rate 3
usage_error "tracevm run: --duration needs seconds (a decimal above 0), got '-1'" \
    --trace fib:fib/1 --duration -1
usage_error "tracevm run: --rate-policy needs --rate" --trace fib:fib/1 --rate-policy drop
usage_error "tracevm run: --rate-policy: unknown policy 'lossy' (expected stop or drop)" \
    --trace fib:fib/1 --rate 3/s --rate-policy lossy
usage_error "tracevm run: --max-events needs --trace or --flags" --max-events 3
exit 0
