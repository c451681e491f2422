#!/usr/bin/env bash
# SIGUSR2 switches tracevm run's --trace patterns off and on while the
# program runs.  tests/sh/data/trace_toggle.tasm main(K, N) calls
# tt:work(I) for I = 1..K, prints ready, waits until it sees (trace_info)
# that the pattern was switched, calls the next N, prints did, waits until
# the pattern is back, and calls N more.  The test sends each SIGUSR2 only
# after the line that says the program is there, so the traced calls are
# exact: with --trace-off (off, on, off) work(K+1..K+N); from on (on, off,
# on) work(1..K) and work(K+N+1..K+2N).  Each switch is reported on stderr,
# and so is a signal with no pattern to switch; --trace-off alone traces
# nothing; usage errors.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
P=tests/sh/data/trace_toggle.tasm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --trace-off alone: the pattern is checked and counted, nothing traced.
"$TRACEVM" run "$P" -S 2 --trace 'tt:work/1' --trace-off --out "$tmp/ev" -- 0 0 \
    >"$tmp/out" 2>"$tmp/err" &
pid=$!
# (it waits for a switch that never comes: end it once it is ready)
for _ in $(seq 600); do [[ -s $tmp/out ]] && break; sleep 0.1; done
[[ $(cat "$tmp/out") == ready ]] || fail "--trace-off: $(cat "$tmp/out" "$tmp/err")"
kill $pid
wait $pid
[[ $? == 143 && ! -s $tmp/ev && ! -s $tmp/err ]] ||
    fail "--trace-off without a signal: $(cat "$tmp/out" "$tmp/err" "$tmp/ev")"

# switch_run FIRST SECOND K N [OPTS...]: runs main(K, N) with the events in
# $tmp/ev, sends SIGUSR2 after "ready" and again after "did"; checks the
# stdout and the two reports (FIRST then SECOND: on or off).
python3 - "$TRACEVM" "$P" "$tmp" <<'PY' || exit 1
import re, signal, subprocess, sys

tracevm, prog, tmp = sys.argv[1:4]

def switch_run(first, second, k, n, opts):
    ev = tmp + "/ev"
    with open(tmp + "/err", "w") as err:
        p = subprocess.Popen([tracevm, "run", prog, "-S", "2", "--trace", "tt:work/1", "--out", ev]
                             + opts + ["--", str(k), str(n)],
                             stdout=subprocess.PIPE, stderr=err, text=True)
    def fail(why):
        p.kill()
        sys.exit("FAIL: %s %s: %s\n--- stderr:\n%s" % (first, second, why,
                                                     open(tmp + "/err").read()))
    for line in ("ready", "did"):
        got = p.stdout.readline()
        if got != line + "\n":
            fail("expected %r, got %r" % (line, got))
        p.send_signal(signal.SIGUSR2)
    out, _ = p.communicate(timeout=120)
    if p.returncode != 0 or out != "%d\n" % (k + 2 * n):
        fail("exit %d, result %r" % (p.returncode, out))
    want_err = ["tracevm run: SIGUSR2: --trace tt:work/1 %s, matched 1" % s for s in (first, second)]
    got_err = open(tmp + "/err").read().splitlines()
    if got_err != want_err:
        fail("stderr %r" % got_err)
    calls = []
    for line in open(ev):
        m = re.fullmatch(r"\{trace,<0\.1\.0>,call,\{tt,work,\[(\d+)\]\}\}\n", line)
        if not m:
            fail("unexpected event %r" % line)
        calls.append(int(m.group(1)))
    return calls

K, N = 20, 500
# Off, on, off: exactly the calls made while it was on.
got = switch_run("on", "off", K, N, ["--trace-off"])
if got != list(range(K + 1, K + N + 1)):
    sys.exit("FAIL: off-on-off traced %s ... %s (%d calls)" % (got[:3], got[-3:], len(got)))
# On, off, on: the first K, a gap of N, the last N.
got = switch_run("off", "on", K, N, [])
if got != list(range(1, K + 1)) + list(range(K + N + 1, K + 2 * N + 1)):
    sys.exit("FAIL: on-off-on traced %s ... %s (%d calls)" % (got[:3], got[-3:], len(got)))
PY

# Without --trace there is nothing to switch: said so, and the run goes on
# (it then waits for a switch that cannot come: ended with SIGTERM).
rm -f "$tmp/ev" "$tmp/out"
"$TRACEVM" run "$P" -S 2 --flags arity --out "$tmp/ev" -- 3 5 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 600); do [[ -s $tmp/out ]] && break; sleep 0.1; done
[[ $(cat "$tmp/out") == ready ]] || fail "without --trace: $(cat "$tmp/out" "$tmp/err")"
kill -USR2 $pid
for _ in $(seq 600); do [[ -s $tmp/err ]] && break; sleep 0.1; done
[[ $(cat "$tmp/err") == "tracevm run: SIGUSR2: no --trace patterns to switch" ]] ||
    fail "without --trace: $(cat "$tmp/err")"
kill -0 $pid || fail "tracevm ended after SIGUSR2 without --trace"
kill $pid
wait $pid
[[ $? == 143 && $(cat "$tmp/out") == ready && ! -s $tmp/ev ]] ||
    fail "without --trace: $(cat "$tmp/out" "$tmp/ev")"

# Usage errors.
"$TRACEVM" run "$P" --trace-off 5 >/dev/null 2>"$tmp/err"
[[ $? == 2 && $(cat "$tmp/err") == "tracevm run: --trace-off needs --trace" ]] ||
    fail "--trace-off without --trace: $(cat "$tmp/err")"
"$TRACEVM" run "$P" -e tt:work --trace 'tt:nope/1' --trace-off 5 >"$tmp/out" 2>"$tmp/err"
[[ $? == 0 && $(cat "$tmp/out") == 5 && $(cat "$tmp/err") == "tracevm run: warning: --trace tt:nope/1 matches no function (without --local, exported ones only)" ]] ||
    fail "--trace-off with a pattern that matches nothing: $(cat "$tmp/out" "$tmp/err")"
"$TRACEVM" run "$P" --trace 'tt:work' --trace-off 5 >/dev/null 2>"$tmp/err"
[[ $? == 2 ]] || fail "a bad pattern with --trace-off: exit $?"
grep -q "^tracevm run: --trace tt:work: " "$tmp/err" || fail "bad pattern message: $(cat "$tmp/err")"
exit 0
