#!/usr/bin/env bash
# Raw CTF (--format ctf-raw) read back by babeltrace2, which must print
# no warning (its stderr empty: every record field is in the event
# context, none in the header where babeltrace2 would ignore it) and read
# every record's size as the header and payload length padded to 8:
# tracevm run on tests/sh/data/trace_fib.tasm (two workers and main each
# compute fib(12): 465 calls each, traced with return_trace, on two
# schedulers) gives exactly 2,798 events (1,395 call, 1,395 return_from,
# 2 spawn, 3 spawned, 3 exit), every one named through the atom table in the
# metadata, with exact payload bytes (trace/tr_encode.h) for main's first
# events and its result, and exact flags, arity and nterms per kind; with
# the arity and timestamp flags every call reads back flags 18
# (TR_F_ARITY | TR_F_TIMESTAMP), arity 1 and no terms; a pipeline whose
# rings wrap and overflow (trace_gen) gives every event it kept, and its
# lost events' counts add up to what it dropped; lossless through small
# rings gives every event.
# Needs babeltrace2 and python3 (tests/sh/lib.sh: need).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
need babeltrace2
need python3
GEN="$(dirname "$TRACEVM")/../tests/trace_gen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# events DIR: babeltrace2's events as "kind pid mod:fun payload-bytes",
# atoms named from the metadata's env (atom_N); lost events as
# "lost COUNT" (its stdout is redirected, so its failures go to stderr).
# Each event's "kind flags arity nterms" go to $tmp/hdr.
# babeltrace2 runs at its default log level, which prints warnings: the
# one line allowed on its stderr is its notice of a packet's discarded
# events (events_discarded), whose counts add up into $tmp/discarded.
events() {
    babeltrace2 "$1" >"$tmp/bt" 2>"$tmp/bterr" ||
        fail "babeltrace2 exited $?: $(cat "$tmp/bterr")" >&2
    ! grep -v '^WARNING: Tracer discarded [0-9]* events\? between ' "$tmp/bterr" >"$tmp/warn" ||
        fail "babeltrace2 warned: $(head -3 "$tmp/warn")" >&2
    sed -n 's/^WARNING: Tracer discarded \([0-9]*\) events\? .*/\1/p' "$tmp/bterr" |
        awk '{s += $1} END {print s + 0}' >"$tmp/discarded"
    python3 - "$1/metadata" "$tmp/bt" "$tmp/hdr" <<'PY'
import re, sys
atoms = dict(re.findall(r'^\tatom_(\d+) = "((?:[^"\\]|\\.)*)";$', open(sys.argv[1]).read(), re.M))
hdr = open(sys.argv[3], 'w')
for line in open(sys.argv[2]):
    m = re.match(r'^\[[^]]*\] \([^)]*\) (\w+): \{ sched_id = -?\d+ \}, '
                 r'\{ flags = (\d+), arity = (\d+), nterms = (\d+), size = (\d+), '
                 r'paylen = (\d+), pid = (\d+), mod = (\d+), fun = (\d+) \}, '
                 r'\{ payload = \[ (.*)\] \}$', line)
    if not m:
        sys.exit('unexpected line: ' + line)
    kind, flags, arity, nterms, size, paylen, pid, mod, fun, pay = m.groups()
    payload = re.findall(r'\[\d+\] = (\d+)', pay)
    if len(payload) != int(paylen) or int(size) != (32 + int(paylen) + 3) // 4 * 4:
        sys.exit('size %s, paylen %s, %d payload bytes: %s' % (size, paylen, len(payload), line))
    print(kind, flags, arity, nterms, file=hdr)
    if kind == 'lost':
        print('lost', pid)
        continue
    data = ' '.join('%02x' % int(b) for b in payload)
    print(kind, pid, '%s:%s' % (atoms[mod], atoms[fun]) if kind != 'exit' else '-', data)
PY
}

"$TRACEVM" run -S 2 tests/sh/data/trace_fib.tasm --trace 'tf:fib/1' --local \
    --match "[{'_',[],[{return_trace}]}]" --flags call,procs --format ctf-raw \
    --out "$tmp/fib" >"$tmp/out" 2>"$tmp/err" || fail "tracevm run exited $?: $(cat "$tmp/err")"
[[ $(cat "$tmp/out") == 144 ]] || fail "result: $(cat "$tmp/out")"
events "$tmp/fib" >"$tmp/ev" || fail "decoding: $(cat "$tmp/ev")"
[[ $(wc -l <"$tmp/ev") == 2798 ]] || fail "babeltrace2 read $(wc -l <"$tmp/ev") events, not 2798"
[[ ! -s "$tmp/bterr" ]] || fail "babeltrace2's stderr: $(head -3 "$tmp/bterr")"
awk '{print $1, $3}' "$tmp/ev" | sort | uniq -c | sed 's/^ *//' | diff -u - <(cat <<'WANT'
1395 call tf:fib
3 exit -
1395 return_from tf:fib
2 spawn tf:worker
1 spawned tf:main
2 spawned tf:worker
WANT
) || fail "event kinds differ"
# main (pid 1): spawned by the command's thread (PID 0, no arguments),
# two spawns of worker with args [12] (PID 2, PID 3, SMALL 12), its own
# fib(12) call and, last, its return value 144 and its exit with reason
# normal (an ATOM; the name checked through the table); each worker
# spawned by main (PID 1) with args [12].
grep '^[a-z_]* 1 ' "$tmp/ev" | sed -n '1,4p;$p' | diff -u - <(cat <<'WANT'
spawned 1 tf:main 04 00
spawn 1 tf:worker 04 02 01 18
spawn 1 tf:worker 04 03 01 18
call 1 tf:fib 01 18
exit 1 - 02 07
WANT
) || fail "main's events differ"
[[ $(grep -c '^spawned [23] tf:worker 04 01 01 18$' "$tmp/ev") == 2 ]] ||
    fail "the workers' spawned events: $(grep '^spawned' "$tmp/ev")"
grep '^[a-z_]* 1 ' "$tmp/ev" | tail -2 | head -1 | grep -qx 'return_from 1 tf:fib 01 a0 02' ||
    fail "main's last return_from is not 144: $(grep '^[a-z_]* 1 ' "$tmp/ev" | tail -2)"
grep -q '^	atom_7 = "normal";$' "$tmp/fib/metadata" || fail "atom 7 is not normal in the metadata"
# flags (trace/tr_event.h's TR_F_*): calls have TR_F_RETURNS (4, the
# return_trace), exits TR_F_NO_MFA (8); a spawn's and a spawned's terms
# are the other pid and the argument list.
sort "$tmp/hdr" | uniq -c | sed 's/^ *//' | diff -u - <(cat <<'WANT'
1395 call 4 1 1
3 exit 8 0 1
1395 return_from 0 1 1
2 spawn 0 1 2
1 spawned 0 0 1
2 spawned 0 1 2
WANT
) || fail "flags, arity or nterms differ"
# The arity and timestamp flags: calls with the arity and no terms.
"$TRACEVM" run -S 2 tests/sh/data/trace_fib.tasm --trace 'tf:fib/1' --local \
    --flags call,arity,timestamp --format ctf-raw --out "$tmp/arity" >"$tmp/out" 2>"$tmp/err" ||
    fail "tracevm run exited $?: $(cat "$tmp/err")"
events "$tmp/arity" >"$tmp/ev" || fail "decoding: $(cat "$tmp/ev")"
[[ ! -s "$tmp/bterr" ]] || fail "babeltrace2's stderr: $(head -3 "$tmp/bterr")"
sort "$tmp/hdr" | uniq -c | sed 's/^ *//' | grep -qx '1395 call 18 1 0' ||
    fail "calls with the arity flag: $(sort "$tmp/hdr" | uniq -c | head -3)"
[[ $(grep -c '^call [0-9]* tf:fib $' "$tmp/ev") == 1395 ]] || fail "calls: $(head -2 "$tmp/ev")"

# Through a pipeline whose 4 KiB rings wrap (PAD records left out of the
# packets) and overflow (LOST markers, and drops reported at shutdown).
counts=$("$GEN" pipeline-ctf-raw "$tmp/pipe" 600) || fail "trace_gen pipeline-ctf-raw: $counts"
emitted=$(sed -n 's/.*emitted=\([0-9]*\).*/\1/p' <<<"$counts")
lost=$(sed -n 's/.*lost=\([0-9]*\).*/\1/p' <<<"$counts")
((lost > 0)) || fail "the pipeline run lost nothing: $counts"
events "$tmp/pipe" >"$tmp/ev" || fail "decoding: $(cat "$tmp/ev")"
[[ $(grep -vc '^lost' "$tmp/ev") == "$emitted" ]] ||
    fail "babeltrace2 read $(grep -vc '^lost' "$tmp/ev") events, the pipeline emitted $emitted"
reported=$(awk '$1 == "lost" {s += $2} END {print s + 0}' "$tmp/ev")
[[ $reported == "$lost" ]] || fail "lost events count $reported, the pipeline lost $lost"
[[ $(cat "$tmp/discarded") == "$lost" ]] ||
    fail "babeltrace2 counts $(cat "$tmp/discarded") discarded events, the pipeline lost $lost"
# Lossless through 4 KiB rings: the producer waits for room many times
# while the collector writes; every event arrives (pids 0..29999, each
# once), and nothing is lost.
counts=$("$GEN" lossless-ctf-raw "$tmp/lossless" 30000) || fail "trace_gen lossless-ctf-raw: $counts"
[[ $counts =~ emitted=30000\ waits=[1-9] ]] || fail "expected waits: $counts"
events "$tmp/lossless" >"$tmp/ev" || fail "decoding: $(cat "$tmp/ev")"
[[ ! -s "$tmp/bterr" ]] || fail "babeltrace2's stderr: $(head -3 "$tmp/bterr")"
[[ $(grep -c '^call [0-9]* fib:fib 01 0e$' "$tmp/ev") == 30000 ]] ||
    fail "babeltrace2 read $(grep -c '^call' "$tmp/ev") calls of 30000 ($(grep -vm1 '^call' "$tmp/ev"))"
awk '{print $2}' "$tmp/ev" | sort -n | awk '$1 != NR - 1 {print "missing pid", NR - 1; exit 1}' ||
    fail "a pid is missing"
# A directory that is not empty is refused.
"$TRACEVM" run tests/sh/data/trace_fib.tasm --trace tf:main/0 --format ctf-raw \
    --out "$tmp/fib" >/dev/null 2>"$tmp/err" && fail "a full directory was accepted"
grep -q "CTF directory $tmp/fib is not empty" "$tmp/err" || fail "message: $(cat "$tmp/err")"
exit 0
