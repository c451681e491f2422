#!/usr/bin/env bash
# The tracevm command: help texts, --version, usage errors (exit 2, the
# exact message on stderr, nothing on stdout), check, and dis's exact text.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect STATUS STDOUT STDERR cmd...: the exact status and both streams.
expect() {
    local status=$1 out=$2 err=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    [[ $got == "$status" ]] || fail "$* exited $got, expected $status: $(cat "$tmp/err")"
    [[ $(cat "$tmp/out") == "$out" ]] || fail "$*: stdout
$(diff <(echo "$out") "$tmp/out")"
    [[ $(cat "$tmp/err") == "$err" ]] || fail "$*: stderr
$(diff <(echo "$err") "$tmp/err")"
}

# Help: on stdout, exit 0; the same text is the usage error's stderr.
help=$("$TRACEVM" --help) || fail "--help exited $?"
[[ $(head -1 <<<"$help") == "usage: tracevm COMMAND [options]" ]] || fail "--help: $help"
expect 2 "" "$help" "$TRACEVM"
expect 2 "" "tracevm: unknown command 'frobnicate'

$help" "$TRACEVM" frobnicate
for c in run check dis; do
    text=$("$TRACEVM" $c --help) || fail "$c --help exited $?"
    first=$(head -1 <<<"$text")
    case $c in
    run) want='usage: tracevm run FILE... [-S N] [-q] [--crash-stacks] [-e MOD:FUN] [TRACING] [PROFILING]' ;;
    *) want="usage: tracevm $c FILE..." ;;
    esac
    [[ $first == "$want" ]] || fail "$c --help begins: $first"
    expect 2 "" "$text" "$TRACEVM" $c
done

# --version: the header's version.
version=$(sed -n 's/^#define TVM_VERSION_STRING "\(.*\)"$/\1/p' include/tracevm.h)
expect 0 "tracevm $version" "" "$TRACEVM" --version

# Usage errors name what is wrong.
expect 2 "" "tracevm run: unknown option --bogus" "$TRACEVM" run examples/fib.tasm --bogus
expect 2 "" "tracevm run: -e expects MOD:FUN, got 'nocolon'" \
    "$TRACEVM" run examples/fib.tasm -e nocolon
expect 2 "" "tracevm run: argument 1 ('{1,'): term:1:4: error: bad literal: expected a literal, got end of file" \
    "$TRACEVM" run examples/fib.tasm -e fib:fib '{1,'
# A long argument is named by its first 64 bytes (all 100,000 before).
long=$(printf '1%.0s' $(seq 100000))
expect 2 "" "tracevm run: argument 1 ('1111111111111111111111111111111111111111111111111111111111111111...'): term:1:1: error: integer literal out of range (integers are 62-bit: -2305843009213693952..2305843009213693951)" \
    "$TRACEVM" run examples/fib.tasm -e fib:fib "$long"
expect 1 "" "/nonexistent.tasm: error: cannot open: No such file or directory" \
    "$TRACEVM" run /nonexistent.tasm
# A file named without .tasm is an ARG: no FILE (the whole usage before).
expect 2 "" "tracevm run: no FILE given (a FILE's name ends in .tasm; 'examples/fib' was taken as an ARG)" \
    "$TRACEVM" run examples/fib -e fib:main

expect 0 "examples/fib.tasm: ok
examples/native_callback.tasm: ok" "" "$TRACEVM" check examples/fib.tasm examples/native_callback.tasm

# dis: word offsets, branch targets, source lines, exactly.
expect 0 "module fib

function fib/1 regs 3  ; exported
     0  enter      3                         ; line 7
     1  jlti       r0, 2, @9                 ; line 8
     2  addi       r1, r0, -1                ; line 9
     3  call       r1, r1, fib/1             ; line 10
     5  addi       r2, r0, -2                ; line 11
     6  call       r2, r2, fib/1             ; line 12
     8  add        r0, r1, r2                ; line 13
     9  ret        r0                        ; line 15
end

function main/0 regs 2  ; exported
     0  enter      2                         ; line 18
     1  loadi      r0, 20                    ; line 19
     2  call       r0, r0, fib/1             ; line 20
     4  ret        r0                        ; line 21
end" "" "$TRACEVM" dis examples/fib.tasm
exit 0
