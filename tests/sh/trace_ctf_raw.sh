#!/usr/bin/env bash
# Raw CTF (--format ctf-raw) read back by babeltrace2: tracevm run on
# tests/sh/data/trace_fib.tasm (two workers and main each compute fib(12):
# 465 calls each, traced with return_trace, on two schedulers) gives
# exactly 2,795 events (1,395 call, 1,395 return_from, 2 spawn, 3 exit),
# every one named through the atom table in the metadata, with exact
# payload bytes (trace/tr_encode.h) for main's first events and its
# result; a pipeline whose rings wrap and overflow (trace_gen) gives every
# event it kept, and its lost events' counts add up to what it dropped;
# lossless through small rings gives every event.
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
# "lost COUNT".
events() {
    babeltrace2 --log-level=ERROR "$1" >"$tmp/bt" 2>"$tmp/bterr" ||
        fail "babeltrace2 exited $?: $(cat "$tmp/bterr")"
    python3 - "$1/metadata" "$tmp/bt" <<'PY'
import re, sys
atoms = dict(re.findall(r'^\tatom_(\d+) = "((?:[^"\\]|\\.)*)";$', open(sys.argv[1]).read(), re.M))
for line in open(sys.argv[2]):
    m = re.match(r'^\[[^]]*\] \([^)]*\) (\w+): \{ sched_id = -?\d+ \}, '
                 r'\{ pid = (\d+), mod = (\d+), fun = (\d+) \}, \{ payload = \[ (.*)\] \}$', line)
    if not m:
        sys.exit('unexpected line: ' + line)
    kind, pid, mod, fun, pay = m.groups()
    if kind == 'lost':
        print('lost', pid)
        continue
    data = ' '.join('%02x' % int(b) for b in re.findall(r'\[\d+\] = (\d+)', pay))
    print(kind, pid, '%s:%s' % (atoms[mod], atoms[fun]) if kind != 'exit' else '-', data)
PY
}

"$TRACEVM" run -S 2 tests/sh/data/trace_fib.tasm --trace 'tf:fib/1' --local \
    --match "[{'_',[],[{return_trace}]}]" --flags call,procs --format ctf-raw \
    --out "$tmp/fib" >"$tmp/out" 2>"$tmp/err" || fail "tracevm run exited $?: $(cat "$tmp/err")"
[[ $(cat "$tmp/out") == 144 ]] || fail "result: $(cat "$tmp/out")"
events "$tmp/fib" >"$tmp/ev" || fail "decoding: $(cat "$tmp/ev")"
[[ $(wc -l <"$tmp/ev") == 2795 ]] || fail "babeltrace2 read $(wc -l <"$tmp/ev") events, not 2795"
awk '{print $1, $3}' "$tmp/ev" | sort | uniq -c | sed 's/^ *//' | diff -u - <(cat <<'WANT'
1395 call tf:fib
3 exit -
1395 return_from tf:fib
2 spawn tf:worker
WANT
) || fail "event kinds differ"
# main (pid 1): two spawns of worker with args [12] (PID 2, PID 3, SMALL
# 12), its own fib(12) call and, last, its return value 144 and its exit
# with reason normal (an ATOM; the name checked through the table).
grep '^[a-z_]* 1 ' "$tmp/ev" | sed -n '1,3p;$p' | diff -u - <(cat <<'WANT'
spawn 1 tf:worker 04 02 01 18
spawn 1 tf:worker 04 03 01 18
call 1 tf:fib 01 18
exit 1 - 02 07
WANT
) || fail "main's events differ"
grep '^[a-z_]* 1 ' "$tmp/ev" | tail -2 | head -1 | grep -qx 'return_from 1 tf:fib 01 a0 02' ||
    fail "main's last return_from is not 144: $(grep '^[a-z_]* 1 ' "$tmp/ev" | tail -2)"
grep -q '^	atom_7 = "normal";$' "$tmp/fib/metadata" || fail "atom 7 is not normal in the metadata"

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
# Lossless through 4 KiB rings: the producer waits for room many times
# while the collector writes; every event arrives (pids 0..29999, each
# once), and nothing is lost.
counts=$("$GEN" lossless-ctf-raw "$tmp/lossless" 30000) || fail "trace_gen lossless-ctf-raw: $counts"
[[ $counts =~ emitted=30000\ waits=[1-9] ]] || fail "expected waits: $counts"
events "$tmp/lossless" >"$tmp/ev" || fail "decoding: $(cat "$tmp/ev")"
[[ $(grep -c '^call [0-9]* fib:fib 01 0e$' "$tmp/ev") == 30000 ]] ||
    fail "babeltrace2 read $(grep -c '^call' "$tmp/ev") calls of 30000 ($(grep -vm1 '^call' "$tmp/ev"))"
awk '{print $2}' "$tmp/ev" | sort -n | awk '$1 != NR - 1 {print "missing pid", NR - 1; exit 1}' ||
    fail "a pid is missing"
# A directory that is not empty is refused.
"$TRACEVM" run tests/sh/data/trace_fib.tasm --trace tf:main/0 --format ctf-raw \
    --out "$tmp/fib" >/dev/null 2>"$tmp/err" && fail "a full directory was accepted"
grep -q "CTF directory $tmp/fib is not empty" "$tmp/err" || fail "message: $(cat "$tmp/err")"
exit 0
