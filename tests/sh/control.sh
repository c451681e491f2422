#!/usr/bin/env bash
# The control endpoint (docs/control.md): tracevm attach against a running
# multi-process program: --list, info, procs, stacks (grouped too; each
# with the registered names), load
# (a bad module changes nothing, a good one is loaded), two clients at
# once, a client killed in the middle of a stream, a corpus of malformed
# requests each with its exact reply, and (as root) a peer of another
# user refused by its credentials, by the server and by the client, and a
# socket another user planted refused by the client.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
export TRACEVM_CONTROL_DIR=$tmp/ctl
vm=
cleanup() { [[ -n "$vm" ]] && kill "$vm" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
attach() { "$TRACEVM" attach "$@"; }

"$TRACEVM" run -q -S 2 tests/sh/data/control.tasm 60000 >"$tmp/out" 2>"$tmp/err" &
vm=$!
# The endpoint is up once the program's five processes show.
for _ in $(seq 200); do
    [[ "$(attach $vm info 2>/dev/null | grep '^processes:')" == "processes: 5" ]] && break
    sleep 0.05
done
[[ "$(stat -c %a "$TRACEVM_CONTROL_DIR")" == 700 ]] || fail "directory mode"
sock=$TRACEVM_CONTROL_DIR/$vm.0.sock
[[ "$(stat -c %a "$sock")" == 600 ]] || fail "socket mode"

# --list: this VM, its socket and its command line.
attach --list >"$tmp/list" || fail "--list exited $?"
grep -qx "$vm  *$sock  $(command_line "$TRACEVM") run -q -S 2 tests/sh/data/control.tasm 60000" "$tmp/list" ||
    fail "--list: $(cat "$tmp/list")"

# info: every key, the counts exact.
attach $vm info >"$tmp/info" || fail "info exited $?"
[[ "$(cut -d: -f1 "$tmp/info" | tr '\n' ' ')" == "protocol pid schedulers processes modules memory_kib uptime_s clients sessions " ]] ||
    fail "info keys: $(cat "$tmp/info")"
for want in "protocol: 1" "pid: $vm" "schedulers: 2" "processes: 5" "modules: 1" "clients: 1" \
            "sessions: 1"; do
    grep -qx "$want" "$tmp/info" || fail "info lacks '$want': $(cat "$tmp/info")"
done

# procs, by pid: the five processes where the program left them, with
# the names of the two registered ones as atoms print (one line each).
want="PID            NAME             STATE       REDUCTIONS       MQ       HEAP  FUNCTION
<0.1.0>        -                waiting              1        0        128  control:main/1
<0.2.0>        waiter           waiting              1        0        128  control:idle/0
<0.3.0>        'idle\\ntwo'      waiting              1        0        128  control:idle/0
<0.4.0>        -                waiting              1        0        128  control:idle/0
<0.5.0>        -                waiting              3        0        128  timer:sleep/1"
got=$(attach $vm procs --sort pid) || fail "procs exited $?"
[[ "$got" == "$want" ]] || fail "procs:
$got"
got=$(attach $vm procs --sort reds --limit 1)
[[ "$got" == "$(echo "$want" | sed -n '1p;6p')" ]] || fail "procs --sort reds --limit 1: $got"

# stacks: the sleeper's VM frames, then the idle ones folded into a group.
vmframes() { grep -v '^  \[c\]'; }
got=$(attach $vm stacks 5 | vmframes)
[[ "$got" == '<0.5.0>
  timer:sleep/1 (native)
  control:deep/1 (tests/sh/data/control.tasm:28)
  control:deep/1 (tests/sh/data/control.tasm:24)
  control:deep/1 (tests/sh/data/control.tasm:24)' ]] || fail "stacks 5: $got"
got=$(attach $vm stacks --group | grep -v '^  ')
[[ "$got" == "3 processes: <0.2.0> waiter <0.3.0> 'idle\\ntwo' <0.4.0>
1 process: <0.1.0>
1 process: <0.5.0>" ]] || fail "stacks --group: $got"
got=$(attach $vm stacks 2 3 | grep -v '^  ')
[[ "$got" == "<0.2.0> waiter
<0.3.0> 'idle\\ntwo'" ]] || fail "stacks of named processes: $got"
got=$(attach $vm stacks '<0.4.0>' 99 | vmframes)
[[ "$got" == '<0.4.0>
  control:idle/0 (tests/sh/data/control.tasm:15)
<0.99.0>
  (no process 99: no such process)' ]] || fail "stacks of a pid and a missing one: $got"
# Pids on both sides of an option (the option parser once freed a word
# twice here, and the VM aborted).
got=$(attach $vm stacks 4 --group 5 | grep -v '^  ')
[[ "$got" == '1 process: <0.4.0>
1 process: <0.5.0>' ]] || fail "stacks 4 --group 5: $got"

# load: a module with errors changes nothing and says why; a good one loads.
printf 'module extra\nexport f/0\nfunction f/0 regs 1\n    bogus r0\n    ret r9\nend\n' >"$tmp/bad.tasm"
attach $vm load "$tmp/bad.tasm" >"$tmp/o" 2>"$tmp/e" && fail "a bad load succeeded"
[[ "$(cat "$tmp/e")" == "$tmp/bad.tasm:4:5: error: unknown instruction 'bogus'
$tmp/bad.tasm:5:9: error: register r9 out of range: f/0 has 1 registers" ]] ||
    fail "bad load: $(cat "$tmp/e")"
grep -qx 'modules: 1' <(attach $vm info) || fail "the bad load changed the modules"
# A file that cannot be read is an error (a directory was sent as an
# empty text), and one without end is read only past the endpoint's
# bound (/dev/zero was read until memory ran out).
attach $vm load "$tmp" >"$tmp/o" 2>"$tmp/e" && fail "loading a directory succeeded"
[[ "$(cat "$tmp/e")" == "tracevm attach: $tmp: cannot read: Is a directory" ]] ||
    fail "load of a directory: $(cat "$tmp/e")"
attach $vm load /dev/zero >"$tmp/o" 2>"$tmp/e" && fail "loading /dev/zero succeeded"
[[ "$(cat "$tmp/e")" == "tracevm attach: module text of 67108865 bytes; at most 16777216" ]] ||
    fail "load of /dev/zero: $(cat "$tmp/e")"
printf 'module extra\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 7\n    ret r0\nend\n' >"$tmp/good.tasm"
attach $vm load "$tmp/good.tasm" || fail "good load exited $?"
grep -qx 'modules: 2' <(attach $vm info) || fail "the good load is not there"

# Two clients at once, one of them streaming; then one killed mid-stream.
# top is connected once its first table is out; it then stays for 20
# tables (about 2 s), ample time for a second client on a loaded machine.
"$TRACEVM" attach $vm top --interval 100 --count 20 --limit 2 >"$tmp/top" &
topc=$!
for _ in $(seq 200); do
    grep -q '^PID ' "$tmp/top" && break
    sleep 0.05
done
grep -qx 'clients: 2' <(attach $vm info) || fail "a second client while top streams"
wait $topc || fail "top exited $?"
[[ $(grep -c '^PID ' "$tmp/top") == 20 ]] || fail "top tables: $(cat "$tmp/top")"
"$TRACEVM" attach $vm top --interval 100 --count 1000 >/dev/null &
topc=$!
sleep 0.3
kill -9 $topc
wait $topc 2>/dev/null
for _ in $(seq 100); do
    grep -qx 'clients: 1' <(attach $vm info) && break
    sleep 0.05
done
grep -qx 'clients: 1' <(attach $vm info) || fail "the killed client still counts"

# Malformed requests: each gets its exact reply (and the VM goes on).
python3 - "$sock" <<'PY' || fail "malformed requests"
import socket, sys, time
path = sys.argv[1]
def exchange(data, shut=False):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile('rb')
    hello = f.readline()
    assert hello.startswith(b'tracevm-control 1 pid='), hello
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = b''
    while True:
        line = f.readline()
        if not line:
            break
        out += line
        if line == b'.\n':
            break
    s.close()
    return out
cases = [
    (b'frobnicate\n', b'error unknown command \'frobnicate\'\n.\n'),
    (b'\n', b'error empty request\n.\n'),
    (b'info  \n', b'error empty word at column 6\n.\n'),
    (b'info \n', b'error trailing space\n.\n'),
    (b'procs "--sort\n', b'error unterminated string from column 7\n.\n'),
    (b'procs "a\\q"\n', b'error unknown escape \\q at column 9\n.\n'),
    (b'procs "a\\x00"\n', b'error bad \\x escape at column 9\n.\n'),
    (b'procs "a"b\n', b'error no space after the string ending at column 9\n.\n'),
    (b'procs a\\b\n', b'error \'\\\' outside a string at column 8\n.\n'),
    (b'procs \xff\n', b'error request is not UTF-8 text\n.\n'),
    (b'procs \x00\n', b'error request is not UTF-8 text\n.\n'),
    (b'procs --sort\n', b'error procs: --sort needs a value\n.\n'),
    (b'procs --sort size\n', b'error procs: bad value for --sort: \'size\'\n.\n'),
    (b'procs --limit 0\n', b'error procs: bad value for --limit: \'0\'\n.\n'),
    (b'procs --verbose\n', b'error procs: unknown option --verbose\n.\n'),
    (b'procs --sort heap x --limit 5\n', b'error procs: unexpected argument \'x\'\n.\n'),
    (b'info now\n', b'error info: unexpected argument \'now\'\n.\n'),
    (b'stacks 12x\n', b'error stacks: bad pid \'12x\' (N or <0.N.0>)\n.\n'),
    (b'stacks " -5"\n', b'error stacks: bad pid \' -5\' (N or <0.N.0>)\n.\n'),
    (b'stacks " +4"\n', b'error stacks: bad pid \' +4\' (N or <0.N.0>)\n.\n'),
    (b'stacks 99999999999999999999999\n',
     b'error stacks: bad pid \'99999999999999999999999\' (N or <0.N.0>)\n.\n'),
    (b'stacks 9223372036854775808\n',
     b'error stacks: bad pid \'9223372036854775808\' (N or <0.N.0>)\n.\n'),
    (b'stacks <0.4.0>x\n', b'error stacks: bad pid \'<0.4.0>x\' (N or <0.N.0>)\n.\n'),
    (b'info --\n', b'error info: unknown option --\n.\n'),
    (b'top --count 1000000 --interval 3600000\n',
     b'error top: --count 1000000 times --interval 3600000 ms is more than an hour\n.\n'),
    (b'procs "--sort limit" 5\n', b'error procs: unknown option --sort limit\n.\n'),
    (b'stacks "--running group" 5\n', b'error stacks: unknown option --running group\n.\n'),
    (b'procs "\\x1b]0;pwned\\x07\\x1b[31mRED\\xff"\n',
     b'error procs: unexpected argument \'?]0;pwned??[31mRED?\'\n.\n'),
    (b'procs "caf\xc3\xa9\\x07"\n', b'error procs: unexpected argument \'caf\xc3\xa9?\'\n.\n'),
    (b'load x.tasm 99999999999\n', b'error load: expects NAME BYTES (BYTES at most 16777216)\n.\n'),
    (b'info', b'error truncated request\n'),
    (b'x' * 70000, b'error request longer than 65536 bytes\n'),
]
bad = 0
for req, want in cases:
    got = exchange(req, shut=not req.endswith(b'\n'))
    if got != want:
        print('request %r: got %r, want %r' % (req[:40], got, want))
        bad += 1
# After an error that closes, the server drains what the peer sends for a
# second in all, not a second after each byte: a peer dribbling a byte
# every 0.3 s is cut off well before its 20th (before, never).
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.recv(100)
s.sendall(b'x' * 70000)
cut = False
for i in range(20):
    try:
        s.send(b'x')
    except OSError:
        cut = True
        break
    time.sleep(0.3)
if not cut:
    print('a dribbling peer kept its connection for 6 s')
    bad += 1
s.close()
sys.exit(1 if bad else 0)
PY
grep -qx 'processes: 5' <(attach $vm info) || fail "the VM after the malformed requests"

# A peer of another user is refused by its credentials, even when the
# directory and the socket are opened to everyone (the last line of
# defence): by tracevm attach before it sends anything, and by the server
# for a client that does not look (python).  Needs root to act as another
# user.
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
    as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
    chmod 711 "$tmp" "$TRACEVM_CONTROL_DIR"
    chmod 666 "$sock"
    got=$(as_nobody "$TRACEVM" attach "$sock" info 2>&1)
    [[ "$got" == "tracevm attach: $sock is served by uid 0, not by this user ($(id -u nobody))" ]] ||
        fail "another user: $got"
    got=$(as_nobody python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print(s.recv(100).decode(), end="")' "$sock")
    [[ "$got" == "error permission denied" ]] || fail "another user, raw: $got"
    chmod 700 "$TRACEVM_CONTROL_DIR"
    # A socket another user placed: in a directory open to all, a pid is
    # not looked up at all; named by its path, it is refused by its
    # server's uid (except to root, whom the server admits everywhere).
    fake=$tmp/open
    mkdir -m 777 "$fake"
    # It listens until told to go (a file beside it) or for 30 s at most,
    # its output away from ours: a background job that holds the test's
    # output open keeps the runner waiting for it (30 s of every suite).
    as_nobody python3 -c 'import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(4)
end = time.monotonic() + 30
while time.monotonic() < end and not os.path.exists(sys.argv[2]):
    time.sleep(0.05)' "$fake/4242.0.sock" "$fake/done" >/dev/null 2>&1 &
    for _ in $(seq 100); do [[ -S $fake/4242.0.sock ]] && break; sleep 0.05; done
    got=$(TRACEVM_CONTROL_DIR=$fake "$TRACEVM" attach 4242 info 2>&1)
    [[ "$got" == "tracevm attach: tvm_control: $fake is open to other users (mode 777)" ]] ||
        fail "a planted directory: $got"
    got=$(setpriv --reuid=65533 --regid=65533 --clear-groups "$TRACEVM" attach "$fake/4242.0.sock" info 2>&1)
    [[ "$got" == "tracevm attach: $fake/4242.0.sock is served by uid $(id -u nobody), not by this user (65533)" ]] ||
        fail "a planted socket: $got"
    touch "$fake/done"
    wait %% 2>/dev/null
else
    echo "not root: the other-user check did not run"
    exit 77
fi

kill $vm
wait $vm 2>/dev/null
vm=
echo ok
