#!/usr/bin/env bash
# gdb agrees with our walker on a suspended fiber: tests/progs/stacks_gdb
# prints the native frames our context-mode walk found; gdb stops it,
# loads the fiber's saved pc, stack and frame pointer into the registers
# and runs `bt`, which unwinds by the CFI (fiber_<arch>.S annotates the
# switch; vm_fiber_entry ends the chain).  The two lists of names must be
# the same, but for frames gdb shows inlined (optimised builds), which a
# frame-pointer walk cannot see.  Under emulation (the aarch64 suite) the
# program runs under qemu's gdb stub and gdb-multiarch attaches to it.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
prog=$(dirname "$TRACEVM")/../tests/stacks_gdb
[[ -x $prog ]] || fail "no $prog"
out=/tmp/stacks_gdb.$$
trap 'rm -f $out' EXIT
# Until the process has suspended, a capture finds it running and takes
# its stack by signal (SIGRTMIN + 4: 38 with glibc, on both machines), and
# the program captures again; gdb must let that signal through rather
# than stop on it (under qemu the window is long enough to hit).
after=(-ex 'handle SIG38 nostop noprint pass' -ex 'break stacks_gdb_stop')
if [[ -z "${TRACEVM_RUN:-}" ]]; then
    need gdb
    gdb=(gdb --args "$prog") fp=rbp
    after+=(-ex 'set startup-with-shell off' -ex run)
else
    need gdb-multiarch
    real=$(emulated_program "$prog") port=$((20000 + $$ % 20000))
    "$TRACEVM_RUN" -g "$port" "$real" >"$out.prog" 2>&1 &
    stub=$!
    trap 'rm -f $out $out.prog; kill $stub 2>/dev/null' EXIT
    gdb=(gdb-multiarch "$real") fp=x29
    after=(-ex "target remote :$port" "${after[@]}" -ex continue)
fi
"${gdb[0]}" -nx -batch -ex 'set pagination off' -ex 'set confirm off' "${after[@]}" \
    -ex 'set $pc = g_pc' -ex 'set $sp = g_sp' -ex "set \$$fp = g_fp" \
    -ex 'echo BT\n' -ex bt -ex kill "${gdb[@]:1}" >>$out 2>&1 || true
[[ -z "${TRACEVM_RUN:-}" ]] || cat "$out.prog" >>$out
ours=$(sed -n 's/^ours //p' $out)
[[ -n $ours ]] || fail "no walk: $(cat $out)"
# "#3  0x... in name (args) at file:line" or "#0  name (args) ..."
theirs=$(sed -n '/^BT$/,$p' $out | sed -n 's/^#[0-9]* *\(0x[0-9a-f]* in \)\{0,1\}\([A-Za-z_][A-Za-z_0-9.]*\) .*/\2/p')
[[ -n $theirs ]] || fail "no gdb bt: $(cat $out)"
# Every frame of ours appears in gdb's, in order; gdb's extra frames are
# inlined ones only; both end in vm_fiber_entry.
inl=$(sed -n '/^BT$/,$p' $out | grep -c ' \[inlined\]\|^#[0-9]* *[A-Za-z_][A-Za-z_0-9]* (' || true)
[[ $(echo "$ours" | tail -1) == vm_fiber_entry ]] || fail "our walk ends in $(echo "$ours" | tail -1)"
[[ $(echo "$theirs" | tail -1) == vm_fiber_entry ]] || fail "gdb ends in $(echo "$theirs" | tail -1): $(cat $out)"
rest="$theirs"
while read -r f; do
    rest=$(echo "$rest" | sed -n "/^$f\$/,\$p")
    [[ -n $rest ]] || fail "our frame $f is not in gdb's bt in order:
ours:
$ours
gdb:
$theirs"
    rest=$(echo "$rest" | tail -n +2)
done <<< "$ours"
n_ours=$(echo "$ours" | wc -l) n_gdb=$(echo "$theirs" | wc -l)
(( n_gdb >= n_ours )) || fail "gdb has fewer frames ($n_gdb) than ours ($n_ours)"
(( n_gdb - n_ours <= inl )) || fail "gdb has $((n_gdb - n_ours)) frames more than ours, $inl inlined:
ours:
$ours
gdb:
$theirs"
echo "ok: $(echo "$ours" | tr "\n" " ")"
