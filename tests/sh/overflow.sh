#!/usr/bin/env bash
# A native stack overflow ends the process that overflowed (vm/overflow.c)
# and nothing else: tests/progs/overflow runs, twice over, a process that
# calls a native recursing without end.  Each dies with
# error:{system_limit, native_stack} (the 'DOWN' reasons, on stdout) and
# prints a crash report with the mixed stack of the fault: the native
# frames from the faulting one up (as many as a capture keeps, 128), then
# the VM frames, and "... truncated" (the walk stopped before the
# bottom).  The scheduler went on: the first process collected both.
# (tests/unit/vm/test_overflow.c checks that parked neighbours survive.)
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
prog=$(dirname "$TRACEVM")/../tests/overflow
[[ -x $prog ]] || fail "no $prog"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$prog" >"$tmp/out" 2>"$tmp/err" || fail "exit $?: $(head -c 2000 "$tmp/err")"
reason='{{system_limit,native_stack},[{ovn,deep,1,[]},{ov,attacker,0,[{file,<<"ov">>},{line,5}]}]}'
[[ "$(cat "$tmp/out")" == "{$reason,$reason}" ]] || fail "stdout: $(cat "$tmp/out")"
python3 - "$tmp/err" <<'PY' || exit 1
import re, sys
lines = open(sys.argv[1]).read().splitlines()
want_head = ['=CRASH REPORT==== process <0.%d.0> crashed: exception error: {system_limit,native_stack}',
             '  in ovn:deep/1 (native)', '  in ov:attacker/0 (ov:5)', '  stack at the raise:']
want_tail = ['  ovn:deep/1 (native)', '  ov:attacker/0 (ov:5)', '  ... truncated']
native = re.compile(r'  \[c\] overflow_recurse\+0x[0-9a-f]+ \(overflow\)$')
i = 0
for pid in (2, 3):
    head = [want_head[0] % pid] + want_head[1:]
    if lines[i:i + 4] != head:
        sys.exit('FAIL: report of <0.%d.0> starts %r' % (pid, lines[i:i + 4]))
    i += 4
    n = 0
    while i < len(lines) and native.match(lines[i]):
        n += 1
        i += 1
    if n != 128:
        sys.exit('FAIL: <0.%d.0>: %d native frames, then %r' % (pid, n, lines[i:i + 1]))
    if lines[i:i + 3] != want_tail:
        sys.exit('FAIL: report of <0.%d.0> ends %r' % (pid, lines[i:i + 3]))
    i += 3
if i != len(lines):
    sys.exit('FAIL: more on stderr: %r' % lines[i:i + 3])
PY
echo ok
