#!/usr/bin/env bash
# tracevm run --flags running,send,receive: the exact in/out, send and
# 'receive' events of tests/sh/data/trace_calls.tasm (a 'DOWN' message)
# and of tests/sh/data/trace_msgs.tasm (messages both ways), on one scheduler, in
# text, under both policies (same events); JSON lines and Chrome JSON
# parsed by python3; CTF read by babeltrace2 (tests/sh/lib.sh: need).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
P=tests/sh/data/trace_calls.tasm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect RESULT ARGS... <<WANT: tracevm run ARGS on one scheduler prints
# RESULT and exactly the trace WANT on stderr.
expect() {
    local want=$1; shift
    "$TRACEVM" run -S 1 "$@" >"$tmp/out" 2>"$tmp/err" || fail "exit $? for $*: $(cat "$tmp/err")"
    [[ $(cat "$tmp/out") == "$want" ]] || fail "result for $*: $(cat "$tmp/out")"
    diff -u - "$tmp/err" || fail "trace of $* differs"
}

cat >"$tmp/down" <<'WANT'
{trace,<0.1.0>,spawned,<0.0.0>,{tc,main,[]}}
{trace,<0.1.0>,in,{tc,main,0}}
{trace,<0.1.0>,spawn,<0.2.0>,{tc,worker,[5]}}
{trace,<0.2.0>,spawned,<0.1.0>,{tc,worker,[5]}}
{trace,<0.1.0>,out,{tc,main,0}}
{trace,<0.2.0>,in,{tc,worker,1}}
{trace,<0.2.0>,exit,normal}
{trace,<0.2.0>,out_exited,0}
{trace,<0.1.0>,in,{tc,main,0}}
{trace,<0.1.0>,'receive',{'DOWN',1,process,<0.2.0>,normal}}
{trace,<0.1.0>,exit,normal}
{trace,<0.1.0>,out_exited,0}
WANT
expect 6 "$P" --flags running,send,receive,procs,exiting <"$tmp/down"
expect 6 "$P" --flags running,send,receive,procs,exiting --policy lossless <"$tmp/down"
# Without receive: the same minus the 'receive' line.
grep -vF "'receive'" "$tmp/down" >"$tmp/down_nr"
expect 6 "$P" --flags running,procs,exiting --policy drop <"$tmp/down_nr"
# Without exiting, as BEAM: no event at all for the exit's switch out
# (running writes no out for a process that exited).
grep -vF "out_exited" "$tmp/down" >"$tmp/down_ne"
expect 6 "$P" --flags running,send,receive,procs <"$tmp/down_ne"
# exiting alone: out_exited only.
grep -F "out_exited" "$tmp/down" >"$tmp/down_x"
expect 6 "$P" --flags exiting <"$tmp/down_x"

# Messages both ways (tests/sh/data/trace_msgs.tasm): main sends {ping,
# Main}, echo replies {pong, Echo} and exits; main gets the pong and the
# 'DOWN'.
M=tests/sh/data/trace_msgs.tasm
cat >"$tmp/msgs" <<'WANT'
{trace,<0.1.0>,send,{ping,<0.1.0>},<0.2.0>}
{trace,<0.2.0>,'receive',{ping,<0.1.0>}}
{trace,<0.2.0>,send,{pong,<0.2.0>},<0.1.0>}
{trace,<0.1.0>,'receive',{pong,<0.2.0>}}
{trace,<0.1.0>,'receive',{'DOWN',1,process,<0.2.0>,normal}}
WANT
expect 6 "$M" --flags send,receive <"$tmp/msgs"
expect 6 "$M" --flags send,receive --policy lossless <"$tmp/msgs"
expect 6 "$M" --flags send <<'WANT'
{trace,<0.1.0>,send,{ping,<0.1.0>},<0.2.0>}
{trace,<0.2.0>,send,{pong,<0.2.0>},<0.1.0>}
WANT
# JSON lines: the same events, parsed.
"$TRACEVM" run -S 1 "$P" --flags running,receive,exiting --format jsonl >"$tmp/out" 2>"$tmp/j" ||
    fail "jsonl run: $(cat "$tmp/j")"
python3 - "$tmp/j" <<'PY' || fail "jsonl differs"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [("in", 1, "main"), ("out", 1, "main"), ("in", 2, "worker"), ("out_exited", 2, None),
        ("in", 1, "main"), ("receive", 1, None), ("out_exited", 1, None)]
have = [(e["kind"], e["pid"], e.get("fun")) for e in got]
assert have == want, have
assert got[5]["msg"] == "{'DOWN',1,process,<0.2.0>,normal}", got[5]
PY

# Chrome JSON: parses; in/out are instants on the process's lane, and
# each run (in to out, or to the scheduler's next in for a process that
# exited: no out then) is a complete slice on the scheduler's lane, and
# no two overlap.
"$TRACEVM" run -S 1 "$P" --flags running,receive --format chrome --out "$tmp/c.json" \
    >"$tmp/out" 2>"$tmp/err" || fail "chrome run: $(cat "$tmp/err")"
python3 - "$tmp/c.json" <<'PY' || fail "chrome differs"
import json, sys
S = 2 ** 52
evs = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
assert names == {1: "<0.1.0>", 2: "<0.2.0>", S: "scheduler 0"}, names
evs = [e for e in evs if e["ph"] != "M"]
have = [(e["name"], e["tid"]) for e in evs]
assert have == [("in", 1), ("<0.1.0>", S), ("out", 1), ("in", 2), ("<0.2.0>", S),
                ("in", 1), ("receive", 1), ("<0.1.0>", S)], have
runs = [e for e in evs if e["ph"] == "X"]
ins = [e["ts"] for e in evs if e["name"] == "in"]
# A run ends at its out; the worker's, which exits without one, at the
# next in on its scheduler; main's last at the trace's end.
ends = [[e["ts"] for e in evs if e["name"] == "out"][0], ins[2],
        [e["ts"] for e in evs if e["name"] == "receive"][0]]
for r, t_in, t_end in zip(runs, ins, ends):
    assert r["ts"] == t_in and abs(r["ts"] + r["dur"] - t_end) < 0.0015, (r, t_in, t_end)
for a, b in zip(runs, runs[1:]):
    assert round(a["ts"] + a["dur"], 3) <= b["ts"], (a, b)
PY

# Registered names (tests/e2e/registered_names.tasm), as BEAM's procs
# and send events: register and unregister are events of the process
# that got or lost the name, whichever process made the change; a name
# goes after the exit event; a send to a name names it.
R=tests/e2e/registered_names.tasm
cat >"$tmp/names" <<'WANT'
{trace,<0.1.0>,spawned,<0.0.0>,{registered_names,main,[]}}
{trace,<0.1.0>,register,me}
{trace,<0.1.0>,unregister,me}
{trace,<0.1.0>,spawn,<0.2.0>,{registered_names,echo,[]}}
{trace,<0.2.0>,spawned,<0.1.0>,{registered_names,echo,[]}}
{trace,<0.2.0>,register,kid}
{trace,<0.1.0>,register,me}
{trace,<0.1.0>,send,{<0.1.0>,hello},kid}
{trace,<0.2.0>,send,{echo,hello},<0.1.0>}
{trace,<0.1.0>,send,bye,<0.2.0>}
{trace,<0.2.0>,exit,normal}
{trace,<0.2.0>,unregister,kid}
{trace,<0.1.0>,unregister,me}
{trace,<0.1.0>,register,kid}
{trace,<0.1.0>,exit,normal}
{trace,<0.1.0>,unregister,kid}
WANT
names_out=$(sed -n 's/^; expect: //p' "$R")
expect "$names_out" "$R" --flags procs,send <"$tmp/names"
expect "$names_out" "$R" --flags procs,send --policy lossless <"$tmp/names"
"$TRACEVM" run -S 1 "$R" --flags procs --format jsonl >"$tmp/out" 2>"$tmp/j" ||
    fail "jsonl run: $(cat "$tmp/j")"
python3 - "$tmp/j" <<'PY' || fail "jsonl of the names differs"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
have = [(e["kind"], e["pid"], e["name"]) for e in got if "register" in e["kind"]]
assert have == [("register", 1, "me"), ("unregister", 1, "me"), ("register", 2, "kid"),
                ("register", 1, "me"), ("unregister", 2, "kid"), ("unregister", 1, "me"),
                ("register", 1, "kid"), ("unregister", 1, "kid")], have
PY

# Links (tests/e2e/links.tasm), as BEAM's procs events: link for every
# link/1 call (a gone target too) and a spawn_link after its spawn (and
# before the child's spawned and getting_linked, OTP 25's order);
# getting_linked for the other end of a new link only; unlink for every
# unlink/1 call, getting_unlinked for the other end of a link removed and
# for each process linked to one that exits, after its exit event.
L=tests/e2e/links.tasm
cat >"$tmp/links" <<'WANT'
{trace,<0.1.0>,spawned,<0.0.0>,{links,main,[]}}
{trace,<0.1.0>,spawn,<0.2.0>,{links,waiter,[]}}
{trace,<0.2.0>,spawned,<0.1.0>,{links,waiter,[]}}
{trace,<0.1.0>,spawn,<0.3.0>,{links,trapper,[<0.1.0>,<0.2.0>]}}
{trace,<0.3.0>,spawned,<0.1.0>,{links,trapper,[<0.1.0>,<0.2.0>]}}
{trace,<0.3.0>,link,<0.2.0>}
{trace,<0.2.0>,getting_linked,<0.3.0>}
{trace,<0.2.0>,exit,boom}
{trace,<0.3.0>,getting_unlinked,<0.2.0>}
{trace,<0.3.0>,exit,killed}
{trace,<0.1.0>,spawn,<0.4.0>,{links,waiter,[]}}
{trace,<0.4.0>,spawned,<0.1.0>,{links,waiter,[]}}
{trace,<0.4.0>,exit,foo}
{trace,<0.1.0>,spawn,<0.5.0>,{links,nt,[<0.1.0>]}}
{trace,<0.5.0>,spawned,<0.1.0>,{links,nt,[<0.1.0>]}}
{trace,<0.5.0>,spawn,<0.6.0>,{links,waiter,[]}}
{trace,<0.5.0>,link,<0.6.0>}
{trace,<0.6.0>,spawned,<0.5.0>,{links,waiter,[]}}
{trace,<0.6.0>,getting_linked,<0.5.0>}
{trace,<0.6.0>,exit,bad}
{trace,<0.5.0>,getting_unlinked,<0.6.0>}
{trace,<0.5.0>,exit,bad}
{trace,<0.1.0>,spawn,<0.7.0>,{links,selfexit,[false,<0.1.0>]}}
{trace,<0.7.0>,spawned,<0.1.0>,{links,selfexit,[false,<0.1.0>]}}
{trace,<0.7.0>,exit,normal}
{trace,<0.1.0>,spawn,<0.8.0>,{links,selfexit,[true,<0.1.0>]}}
{trace,<0.8.0>,spawned,<0.1.0>,{links,selfexit,[true,<0.1.0>]}}
{trace,<0.8.0>,exit,normal}
{trace,<0.1.0>,link,<0.2.0>}
{trace,<0.1.0>,link,<0.2.0>}
{trace,<0.1.0>,spawn,<0.9.0>,{links,waiter,[]}}
{trace,<0.9.0>,spawned,<0.1.0>,{links,waiter,[]}}
{trace,<0.1.0>,link,<0.9.0>}
{trace,<0.9.0>,getting_linked,<0.1.0>}
{trace,<0.1.0>,unlink,<0.9.0>}
{trace,<0.9.0>,getting_unlinked,<0.1.0>}
{trace,<0.9.0>,exit,foo}
{trace,<0.1.0>,spawn,<0.10.0>,{links,sleeper,[]}}
{trace,<0.10.0>,spawned,<0.1.0>,{links,sleeper,[]}}
{trace,<0.10.0>,exit,zzz}
{trace,<0.1.0>,spawn,<0.11.0>,{links,spinner,[]}}
{trace,<0.11.0>,spawned,<0.1.0>,{links,spinner,[]}}
{trace,<0.11.0>,exit,spin}
{trace,<0.1.0>,unlink,<0.2.0>}
{trace,<0.1.0>,exit,normal}
WANT
links_out=$(sed -n 's/^; expect: //p' "$L")
expect "$links_out" "$L" --flags procs <"$tmp/links"
expect "$links_out" "$L" --flags procs --policy lossless <"$tmp/links"
# JSON lines name the other end "other" (pid is the event's process).
"$TRACEVM" run -S 1 "$L" --flags procs --format jsonl >"$tmp/out" 2>"$tmp/j" ||
    fail "jsonl run: $(cat "$tmp/j")"
python3 - "$tmp/j" <<'PY' || fail "jsonl of the links differs"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
have = [(e["kind"], e["pid"], e["other"]) for e in got if "link" in e["kind"]][:3]
assert have == [("link", 3, "<0.2.0>"), ("getting_linked", 2, "<0.3.0>"),
                ("getting_unlinked", 3, "<0.2.0>")], have
PY

need babeltrace2 "the CTF part"
"$TRACEVM" run -S 1 "$M" --flags running,send,receive,exiting --format ctf \
    --out "$tmp/ctf" >"$tmp/out" 2>"$tmp/err" || fail "ctf run: $(cat "$tmp/err")"
babeltrace2 "$tmp/ctf" 2>"$tmp/bterr" | sed -E 's/^\[[^]]*\] \([^)]*\) //' >"$tmp/bt"
diff -u - "$tmp/bt" <<'WANT' || fail "babeltrace2 output differs: $(cat "$tmp/bterr")"
in: { sched_id = 0 }, { pid = 1, module = "tm", function = "main", arity = 0 }
send: { sched_id = 0 }, { pid = 1, module = "", function = "", arity = 0, msg = "{ping,<0.1.0>}", to = "<0.2.0>" }
out: { sched_id = 0 }, { pid = 1, module = "tm", function = "main", arity = 0 }
in: { sched_id = 0 }, { pid = 2, module = "tm", function = "echo", arity = 0 }
receive: { sched_id = 0 }, { pid = 2, module = "", function = "", arity = 0, msg = "{ping,<0.1.0>}" }
send: { sched_id = 0 }, { pid = 2, module = "", function = "", arity = 0, msg = "{pong,<0.2.0>}", to = "<0.1.0>" }
out_exited: { sched_id = 0 }, { pid = 2, module = "", function = "", arity = 0 }
in: { sched_id = 0 }, { pid = 1, module = "tm", function = "main", arity = 0 }
receive: { sched_id = 0 }, { pid = 1, module = "", function = "", arity = 0, msg = "{pong,<0.2.0>}" }
receive: { sched_id = 0 }, { pid = 1, module = "", function = "", arity = 0, msg = "{\'DOWN\',1,process,<0.2.0>,normal}" }
out_exited: { sched_id = 0 }, { pid = 1, module = "", function = "", arity = 0 }
WANT
exit 0
