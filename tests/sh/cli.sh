#!/usr/bin/env bash
# The tracevm command: help texts, --version, usage errors (exit 2), check, dis.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
expect_status() { # want cmd...
    local want=$1; shift
    "$@" >/tmp/cli_out.$$ 2>/tmp/cli_err.$$
    local got=$?
    [[ $got == "$want" ]] || fail "$* exited $got, expected $want: $(cat /tmp/cli_err.$$)"
}
expect_status 0 "$TRACEVM" --help
grep -q '^usage: tracevm COMMAND' /tmp/cli_out.$$ || fail "--help text"
for c in run check dis; do
    expect_status 0 "$TRACEVM" $c --help
    grep -q "^usage: tracevm $c" /tmp/cli_out.$$ || fail "$c --help text"
done
expect_status 0 "$TRACEVM" --version
version=$(sed -n 's/^#define TVM_VERSION_STRING "\(.*\)"$/\1/p' include/tracevm.h)
[[ "$(cat /tmp/cli_out.$$)" == "tracevm $version" ]] || fail "--version: $(cat /tmp/cli_out.$$)"
expect_status 2 "$TRACEVM"
expect_status 2 "$TRACEVM" frobnicate
grep -q "unknown command 'frobnicate'" /tmp/cli_err.$$ || fail "unknown command message"
expect_status 2 "$TRACEVM" run
expect_status 2 "$TRACEVM" run examples/fib.tasm --bogus
grep -q "unknown option --bogus" /tmp/cli_err.$$ || fail "unknown option message"
expect_status 2 "$TRACEVM" run examples/fib.tasm -e nocolon
grep -q "expects MOD:FUN, got 'nocolon'" /tmp/cli_err.$$ || fail "-e message"
expect_status 2 "$TRACEVM" run examples/fib.tasm -e fib:fib '{1,'
grep -q "argument 1 ('{1,')" /tmp/cli_err.$$ || fail "bad argument message"
expect_status 1 "$TRACEVM" run /nonexistent.tasm
grep -q "^/nonexistent.tasm: error: cannot open: No such file or directory" /tmp/cli_err.$$ || fail "missing file message"
expect_status 0 "$TRACEVM" check examples/fib.tasm examples/native_callback.tasm
[[ "$(cat /tmp/cli_out.$$)" == "examples/fib.tasm: ok
examples/native_callback.tasm: ok" ]] || fail "check output"
expect_status 0 "$TRACEVM" dis examples/fib.tasm
grep -q '^     3  call       r1, r1, fib/1             ; line 10$' /tmp/cli_out.$$ || fail "dis output: $(cat /tmp/cli_out.$$)"
# dis output of a module must be reproducible: same text twice
"$TRACEVM" dis examples/fib.tasm | cmp -s - /tmp/cli_out.$$ || fail "dis not deterministic"
rm -f /tmp/cli_out.$$ /tmp/cli_err.$$
