#!/usr/bin/env bash
# Stacks on request: SIGUSR1 to a running `tracevm run` prints the stack
# of every live process (VM frames with lines, native frames by name, the
# fiber's bottom frame last), and the program goes on to its result; with
# --crash-stacks a crash report adds the stack of the raise.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
out=/tmp/stacks_out.$$ err=/tmp/stacks_err.$$
trap 'rm -f $out $err' EXIT
"$TRACEVM" run -S 2 tests/sh/data/stacks.tasm >$out 2>$err &
pid=$!
sleep 0.5
kill -USR1 $pid || fail "cannot signal tracevm"
wait $pid || fail "tracevm exited $?: $(cat $err)"
[[ "$(cat $out)" == "done" ]] || fail "result: $(cat $out)"
grep -qx '=BACKTRACES==== 2 processes' $err || fail "no header: $(cat $err)"
# Each process: its header, then its frames innermost first; native frames
# other than the fiber's bottom one vary with the build (inlining): dropped.
frames() { # pid
    awk -v h="<0.$1.0> (waiting):" '$0 == h {on = 1; next} /^<0\./ {on = 0} on' $err |
        sed 's/+0x[0-9a-f]* (tracevm)$//' | grep -v '^  \[c\] [^v]' | grep -v '^  \[c\] vm_[^f]'
}
want1='  timer:sleep/1 (native)
  stacks:deep/1 (tests/sh/data/stacks.tasm:26)
  stacks:deep/1 (tests/sh/data/stacks.tasm:22)
  stacks:deep/1 (tests/sh/data/stacks.tasm:22)
  stacks:main/0 (tests/sh/data/stacks.tasm:36)
  [c] vm_fiber_entry'
[[ "$(frames 1)" == "$want1" ]] || fail "process 1: $(frames 1)
--- all:
$(cat $err)"
want2='  stacks:waiter/0 (tests/sh/data/stacks.tasm:13)
  [c] vm_fiber_entry'
[[ "$(frames 2)" == "$want2" ]] || fail "process 2: $(frames 2)
--- all:
$(cat $err)"

# Crash reports with --crash-stacks: the stack where the exception was
# raised follows the exception's own trace.
"$TRACEVM" run --crash-stacks tests/sh/data/crash.tasm >$out 2>$err || fail "crash.tasm exited $?"
want='=CRASH REPORT==== process <0.2.0> crashed: exception error: boom
  in crash:bad/1 (tests/sh/data/crash.tasm:15)
  in crash:bad/1 (tests/sh/data/crash.tasm:10)
  in crash:bad/1 (tests/sh/data/crash.tasm:10)
  stack at the raise:
  crash:bad/1 (tests/sh/data/crash.tasm:15)
  crash:bad/1 (tests/sh/data/crash.tasm:10)
  crash:bad/1 (tests/sh/data/crash.tasm:10)
  [c] vm_fiber_entry'
got=$(sed 's/+0x[0-9a-f]* (tracevm)$//' $err | grep -v '^  \[c\] [^v]' | grep -v '^  \[c\] vm_[^f]')
[[ "$got" == "$want" ]] || fail "crash report: $(cat $err)"
"$TRACEVM" run tests/sh/data/crash.tasm >$out 2>$err || fail "crash.tasm exited $?"
grep -q 'stack at the raise' $err && fail "a stack without --crash-stacks"
echo ok
