#!/usr/bin/env bash
# Stacks on request: SIGUSR1 to a running `tracevm run` prints the stack
# of every live process (VM frames with lines, native frames by name, the
# fiber's bottom frame last), and the program goes on to its result; with
# --crash-stacks a crash report adds the stack of the raise.
#
# tests/sh/data/stacks.tasm keeps a waiter and a sleeper blocked for good
# and ends when SIGUSR2 switches its --trace pattern on.  Nothing waits for
# a time: SIGUSR1 is sent until a dump shows both blocked (a dump is
# complete once the next one begins: one thread prints them in turn), and
# that dump must hold their exact stacks.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$TRACEVM" "$tmp" <<'PY' || exit 1
import os, re, signal, subprocess, sys, time

tracevm, tmp = sys.argv[1], sys.argv[2]
errpath = os.path.join(tmp, "err")
with open(errpath, "w") as err:
    p = subprocess.Popen([tracevm, "run", "-S", "2", "tests/sh/data/stacks.tasm",
                          "--trace", "stacks:go/0", "--trace-off"],
                         stdout=subprocess.PIPE, stderr=err, text=True)

def fail(why):
    p.kill()
    sys.exit("FAIL: %s\n--- stderr:\n%s" % (why, open(errpath).read()))

def dumps():
    return open(errpath).read().split("=BACKTRACES==== ")[1:]

def wait_for(cond, what):
    # A hang guard (a minute), not a measurement.
    for _ in range(6000):
        if cond():
            return
        if p.poll() is not None:
            fail("tracevm exited (%d) before %s" % (p.returncode, what))
        time.sleep(0.01)
    fail("no %s after a minute" % what)

def block(dump, pid, name=""):
    """(state, frames) of <0.pid.0> in a dump, its heading naming it " name"
    (a registered name as it prints, or nothing); native frames other than
    the fiber's bottom one vary with the build (inlining): dropped."""
    m = re.search(r"^<0\.%d\.0>%s \((\w+)\):\n((?:  .*\n)*)" % (pid, re.escape(name)),
                  dump, re.M)
    if not m:
        return None, None
    frames = []
    for line in m.group(2).splitlines():
        line = re.sub(r"\+0x[0-9a-f]* \(tracevm\)$", "", line)
        if line.startswith("  [c] ") and line != "  [c] vm_fiber_entry":
            continue
        frames.append(line)
    return m.group(1), "\n".join(frames)

# The lines of the instructions the two wait in, and of the calls below.
src = open("tests/sh/data/stacks.tasm").read().splitlines()
def line_of(instr, nth=0):
    return [i + 1 for i, l in enumerate(src) if l.strip() == instr][nth]
F = "tests/sh/data/stacks.tasm"
want_waiter = """  stacks:waiter/0 (%s:%d)
  [c] vm_fiber_entry""" % (F, line_of("wait r1, wake"))
want_sleeper = """  timer:sleep/1 (native)
  stacks:deep/1 (%s:%d)
  stacks:deep/1 (%s:%d)
  stacks:deep/1 (%s:%d)
  stacks:sleeper/0 (%s:%d)
  [c] vm_fiber_entry""" % (F, line_of("callx r0, r0, timer:sleep/1"),
                          F, line_of("call r0, r0, deep/1"), F, line_of("call r0, r0, deep/1"),
                          F, line_of("call r0, r0, deep/1", 1))

# tracevm takes the signals once it runs the program: main says "ready".
if p.stdout.readline() != "ready\n":
    fail("main did not print ready")
good = None
for k in range(1, 200):
    p.send_signal(signal.SIGUSR1)
    wait_for(lambda: len(dumps()) >= k, "dump %d" % k)
    if k < 2:
        continue
    dump = dumps()[k - 2]   # complete: dump k has begun
    if not dump.startswith("3 processes\n"):
        fail("dump %d: %s" % (k - 1, dump.splitlines()[0]))
    if block(dump, 2)[0] == "waiting" and block(dump, 3, " 'the sleeper'")[0] == "waiting":
        good = dump
        break
if good is None:
    fail("the waiter and the sleeper never both showed as waiting")
if block(good, 1)[0] is None:
    fail("no block for main")
for pid, name, want in ((2, "", want_waiter), (3, " 'the sleeper'", want_sleeper)):
    got = block(good, pid, name)[1]
    if got != want:
        fail("process %d:\n%s\nexpected:\n%s" % (pid, got, want))
# The program goes on: SIGUSR2 switches the pattern on, and main returns.
p.send_signal(signal.SIGUSR2)
out, _ = p.communicate(timeout=60)
if p.returncode != 0 or out != "done\n":
    fail("exit %d, stdout %r" % (p.returncode, out))
last = open(errpath).read().splitlines()[-1]
if last != "tracevm run: SIGUSR2: --trace stacks:go/0 on, matched 1":
    fail("the last line of stderr: %r" % last)
PY

# Crash reports with --crash-stacks: the stack where the exception was
# raised follows the exception's own trace.
out=$tmp/out err=$tmp/err2
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
