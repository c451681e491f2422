#!/usr/bin/env bash
# The one-way stack of folders (docs/architecture.md): tests/check_layers.py
# passes on the tree, and fails, naming file:line and the rule, on a tree
# planted with one breach of each rule.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
check=tests/check_layers.py

out=$(python3 "$check") || fail "the tree breaks a layer rule:
$out"
[[ -z "$out" ]] || fail "output on a clean tree: $out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{vm,loader,trace,breakpoints,tools,tests/unit/trace,bench}
cat > "$tmp/vm/hook.h" <<'C'
/* ==== trace/: events ==== */
void vm_hook_spawn(int x);
/* ==== stacks/: raises ==== */
void vm_hook_note_raise(int x);
C
cat > "$tmp/vm/core.c" <<'C'
#include "vm/hook.h"
#include "trace/tr.h"

int vm_helper(int x);
static int inner(int x);
int vm_core(void);
int vm_core(void)
{
    return inner(1);
}
C
cat > "$tmp/trace/tr.h" <<'C'
#include "vm/hook.h"
C
cat > "$tmp/trace/tr_internal.h" <<'C'
C
cat > "$tmp/trace/tr.c" <<'C'
#include "trace/tr_internal.h"
#include "breakpoints/bp.h"

void vm_hook_spawn(int x)
{
    (void)x;
}
C
cat > "$tmp/loader/ld.c" <<'C'
#include "trace/tr_internal.h"

int vm_core(void);
void vm_hook_spawn(int x)
{
    (void)x;
}
C
cat > "$tmp/tools/cli.c" <<'C'
#include "include/tracevm.h"
#include "vm/hook.h"
#include "tools/cli.h"
C
cat > "$tmp/tests/unit/trace/test_tr.c" <<'C'
#include "trace/tr_internal.h"
C
cat > "$tmp/bench/b.c" <<'C'
#include "trace/tr_internal.h"
C

python3 "$check" --root "$tmp" > "$tmp/out"
rc=$?
[[ $rc == 1 ]] || fail "exit $rc on a planted tree, expected 1"
want="bench/b.c:1: private: includes \"trace/tr_internal.h\", a private header of trace/
loader/ld.c:1: private: includes \"trace/tr_internal.h\", a private header of trace/
loader/ld.c:3: declaration: vm_core() is declared in a .c file that does not define it; declare it in a header
tools/cli.c:2: embedder: tools/ includes \"vm/hook.h\"; the CLI and the examples use only include/tracevm.h
tools/cli.c:3: embedder: tools/ includes \"tools/cli.h\"; the CLI and the examples use only include/tracevm.h
trace/tr.c:2: upward: trace/ includes \"breakpoints/bp.h\" from breakpoints/, a layer above it
vm/core.c:2: upward: vm/ includes \"trace/tr.h\" from trace/, a layer above it
vm/core.c:4: declaration: vm_helper() is declared in a .c file that does not define it; declare it in a header
vm/core.c:6: declaration: vm_core() is declared in its .c file but used by loader/ld.c; declare it in a header
vm/hook.h: hook: vm_hook_note_raise is defined in no file; it must be defined once, in stacks/
vm/hook.h: hook: vm_hook_spawn is defined in loader/ld.c, trace/tr.c; it must be defined once, in trace/"
got=$(cat "$tmp/out")
[[ "$got" == "$want" ]] || fail "planted tree: got
$got
expected
$want"
echo ok
