#!/usr/bin/env bash
# The header's ABI matches its record, tests/abi/abi-N.txt
# (tests/check_abi.py); and the check finds each kind of change: a changed
# prototype, enumerator and field, a field added inside an option
# struct's recorded size or to a frozen struct, and (as a compatible
# addition to record) a field added past an option struct's size.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
check=tests/check_abi.py
out=$(python3 "$check") || fail "the header differs from its ABI record:
$out"
[[ -z "$out" ]] || fail "output on a matching header: $out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rec=tests/abi/abi-$(sed -n 's/^#define TVM_ABI \([0-9]*\)$/\1/p' include/tracevm.h).txt
# A record edited as if the header had been changed (the header cannot be
# planted: the check reads the one in the tree).
sed -e 's/^function extern tvm_vm \*tvm_new (const tvm_config \*);$/function extern tvm_vm *tvm_new (tvm_config *);/' \
    -e 's/^enum TVM_ERR_BUSY = 9$/enum TVM_ERR_BUSY = 10/' \
    -e 's/^field tvm_config 32 4 int schedulers$/field tvm_config 32 8 long schedulers/' \
    -e '/^field tvm_config 51 1 _Bool stop_the_world_tracing$/d' \
    -e 's/^struct tvm_config option 56$/struct tvm_config option 52/' \
    -e '/^field tvm_error 4 4096 char message\[4096\]$/d' \
    -e '/^field tvm_trace_options 56 8 void \*callback_data$/d' \
    -e 's/^struct tvm_trace_options option 64$/struct tvm_trace_options option 56/' \
    -e '/^enum TVM_TRACE_LOSSLESS = 1$/d' \
    "$rec" > "$tmp/rec"
python3 "$check" --record "$tmp/rec" > "$tmp/out"
rc=$?
[[ $rc == 1 ]] || fail "exit $rc on a changed record, expected 1"
r=$tmp/rec
want="$r: incompatible: function tvm_new: was 'extern tvm_vm *tvm_new (tvm_config *);', is 'extern tvm_vm *tvm_new (const tvm_config *);'
$r: incompatible: enum TVM_ERR_BUSY: was '10', is '9'
$r: incompatible: struct tvm_config: field long schedulers at 32 (8 bytes) changed or removed
$r: incompatible: struct tvm_config (option): new field int schedulers at 32, inside the recorded 52 bytes
$r: incompatible: struct tvm_config (option): new field _Bool stop_the_world_tracing at 51, inside the recorded 52 bytes
$r: incompatible: struct tvm_error (frozen): new field char message[4096]
$r: an incompatible change needs TVM_ABI raised (a new SONAME) and a new record
$r: not recorded: enum TVM_TRACE_LOSSLESS = 1
$r: not recorded: field tvm_trace_options 56 8 void *callback_data
$r: compatible additions: add the lines above to the record"
got=$(cat "$tmp/out")
[[ "$got" == "$want" ]] || fail "changed record: got
$got
expected
$want"
echo ok
