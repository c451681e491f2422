%% bench/procs.erl - the process benchmark's workloads in Erlang, for
%% comparison with bench/procs.tasm (run by bench/bench_procs.c).
%%
%%   erlc -o DIR bench/procs.erl
%%   erl -noshell +S 1 -pa DIR -run procs main [runs R] [switch N] [spawn N]
%%       [rt N] [ringn N] [ringm M] [idle N]
%%   erl -noshell +S 2 -pa DIR -run procs main [runs R] [spawn N] [rt2 N]
%%       [ringn N] [ring2m M]
%%
%% (Options without dashes, as in interp.erl: erl takes words starting
%% with '-' as its own flags.)
%%
%% With one scheduler online it runs the one-scheduler workloads and prints
%% the same keys as bench_procs; with two it runs spawn, round trip and
%% ring and prints the *_s2 keys.  Each workload runs once to warm up, then
%% R times, each run in a fresh process (as bench_procs spawns a process
%% per run); medians are printed as key=value lines.  Timing uses
%% erlang:monotonic_time/1.
%%
%%   switch     two processes call erlang:yield/0 N times each; switch_ns
%%              is (time of the 2N yields) / 2N minus the same loop calling
%%              a local function that does not yield (noop_call_ns).
%%   spawn      a process spawns N processes running noop/0 (spawn/3, as
%%              tracevm's erlang:spawn/3); from that spawn until
%%              erlang:system_info(process_count) is back where it was
%%              (polled between erlang:yield/0 calls), per process.
%%   roundtrip  {ping, Self} / {pong, Self} with a pong process, ns each.
%%   call       the same inside monitor/2 and demonitor(Ref, [flush]), as
%%              gen_server:call does: call_ns, and monitor_demonitor_ns =
%%              call_ns - roundtrip_ns (1 scheduler).
%%   ring       N processes in a ring, a token passed M times around.
%%   idle       N processes waiting in receive: resident memory
%%              (/proc/self/statm, 4 KiB pages) after minus before, per
%%              process (idle_proc_kib: the first run, made before any
%%              other workload; see one/7), and the growth of
%%              erlang:memory(processes) per process (idle_proc_malloc_kib,
%%              what the runtime's allocators hold for the processes).
-module(procs).
-export([main/0, main/1, yielder/1, noop/0, spawner/1, pong/0, node/1, idler/0]).
-compile([no_inline, {no_auto_import, [node/1]}]).

now_ns() -> erlang:monotonic_time(nanosecond).

median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth(N div 2 + 1, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

opts([], Acc) -> Acc;
opts([K, V | Rest], Acc) when is_map_key(K, Acc) ->
    opts(Rest, Acc#{K := list_to_integer(V)});
opts(_, _) -> erlang:error(usage).

%% Runs F() in a fresh process and returns its result once every process
%% it left behind (a yielder's last yield, a pong or ring being stopped)
%% has exited, as bench_procs calls tvm_wait_idle() after each workload.
in_proc(F) ->
    Base = erlang:system_info(process_count),
    Self = self(),
    Pid = spawn(fun() -> Self ! {self(), F()} end),
    receive {Pid, Res} -> wait_count(Base), Res end.

%% Warm-up plus Runs runs of F; the results of the timed runs.
runs(Runs, F) ->
    [_ | Timed] = [in_proc(F) || _ <- lists:seq(0, Runs)],
    Timed.

%% ---- (a) context switch ------------------------------------------------

yielder(0) -> ok;
yielder(N) -> erlang:yield(), yielder(N - 1).

noop_call() -> ok.

noops(0) -> ok;
noops(N) -> noop_call(), noops(N - 1).

%% ns for this process's N yields, a second yielder running alongside.
switch(N) ->
    spawn(procs, yielder, [N]),
    T0 = now_ns(),
    yielder(N),
    now_ns() - T0.

noops_time(N) ->
    T0 = now_ns(),
    noops(N),
    now_ns() - T0.

%% ---- (b) spawn + exit ----------------------------------------------------

noop() -> ok.

spawner(0) -> ok;
spawner(N) -> spawn(procs, noop, []), spawner(N - 1).

%% Waits until no more than Base processes are alive.
wait_count(Base) ->
    case erlang:system_info(process_count) =< Base of
        true -> ok;
        false -> erlang:yield(), wait_count(Base)
    end.

spawn_time(N) ->
    Base = erlang:system_info(process_count),
    T0 = now_ns(),
    spawn(procs, spawner, [N]),
    wait_count(Base),
    now_ns() - T0.

%% ---- (c) round trip --------------------------------------------------------

pong() ->
    receive
        {ping, From} -> From ! {pong, self()}, pong();
        _ -> ok
    end.

rt_loop(0, _) -> ok;
rt_loop(N, Pong) ->
    Pong ! {ping, self()},
    receive _ -> ok end,
    rt_loop(N - 1, Pong).

roundtrip(N) ->
    Pong = spawn(procs, pong, []),
    T0 = now_ns(),
    rt_loop(N, Pong),
    T = now_ns() - T0,
    Pong ! stop,
    T.

call_loop(0, _) -> ok;
call_loop(N, Pong) ->
    Ref = monitor(process, Pong),
    Pong ! {ping, self()},
    receive {pong, _} -> ok end,
    demonitor(Ref, [flush]),
    call_loop(N - 1, Pong).

call(N) ->
    Pong = spawn(procs, pong, []),
    T0 = now_ns(),
    call_loop(N, Pong),
    T = now_ns() - T0,
    Pong ! stop,
    T.

%% ---- (d) ring ----------------------------------------------------------------

node(Next) ->
    receive
        I when is_integer(I) -> Next ! I, node(Next);
        Other -> Next ! Other, Other
    end.

build(1, Next) -> Next;
build(K, Next) -> build(K - 1, spawn(procs, node, [Next])).

relay(M, Next) ->
    receive
        Tok when is_integer(Tok) ->
            case M - 1 of
                0 -> ok;
                M1 -> Next ! Tok, relay(M1, Next)
            end
    end.

%% {BuildNs, HopsNs}: a ring of N (this process closes it), M rounds.
ring(N, M) ->
    T0 = now_ns(),
    Next = build(N, self()),
    T1 = now_ns(),
    Next ! 1,
    relay(M, Next),
    T2 = now_ns(),
    Next ! stop,
    {T1 - T0, T2 - T1}.

%% ---- (e) idle processes ----------------------------------------------------

idler() -> receive _ -> ok end.

rss_kib() ->
    {ok, B} = file:read_file("/proc/self/statm"),
    [_, Res | _] = string:lexemes(binary_to_list(B), " \n"),
    list_to_integer(Res) * 4.

all_waiting(Pids) ->
    case lists:all(fun(P) -> erlang:process_info(P, status) =:= {status, waiting} end, Pids) of
        true -> ok;
        false -> timer:sleep(1), all_waiting(Pids)
    end.

%% {RssKiB, MemKiB} per idle process.
idle(N) ->
    Base = erlang:system_info(process_count),
    erlang:garbage_collect(),
    timer:sleep(10),
    M0 = erlang:memory(processes),
    R0 = rss_kib(),
    Pids = [spawn(procs, idler, []) || _ <- lists:seq(1, N)],
    all_waiting(Pids),
    R1 = rss_kib(),
    M1 = erlang:memory(processes),
    [P ! stop || P <- Pids],
    wait_count(Base),
    {(R1 - R0) / N, (M1 - M0) / 1024 / N}.

%% ---- main ----------------------------------------------------------------------

main() -> main([]).

main(Args) ->
    O = opts(Args, #{"runs" => 7, "switch" => 500000, "spawn" => 20000,
                     "rt" => 200000, "rt2" => 20000, "ringn" => 1000,
                     "ringm" => 200, "ring2m" => 20, "idle" => 10000}),
    #{"runs" := Runs, "switch" := NSw, "spawn" := NSp, "rt" := NRt, "rt2" := NRt2,
      "ringn" := RN, "ringm" := RM, "ring2m" := RM2, "idle" := NIdle} = O,
    Out = case erlang:system_info(schedulers_online) of
              1 -> one(Runs, NSw, NSp, NRt, RN, RM, NIdle);
              _ -> two(Runs, NSp, NRt2, RN, RM2)
          end,
    [case V of
         _ when is_integer(V) -> io:format("~s=~b~n", [K, V]);
         _ -> io:format("~s=~.3f~n", [K, float(V)])
     end || {K, V} <- [{"runs", Runs} | Out]],
    halt(0).

one(Runs, NSw, NSp, NRt, RN, RM, NIdle) ->
    %% First, in a fresh node: the allocators keep the memory of processes
    %% that exited in their carriers and reuse it, so only the first run
    %% shows the resident memory idle processes cost (idle_proc_kib).
    %% erlang:memory(processes) shows it in every run (median of all).
    [{Rss, _} | _] = Idle = [in_proc(fun() -> idle(NIdle) end) || _ <- lists:seq(0, Runs)],
    Sw = median(runs(Runs, fun() -> switch(NSw) end)) / (2 * NSw),
    Noop = median(runs(Runs, fun() -> noops_time(NSw) end)) / NSw,
    Sp = median(runs(Runs, fun() -> spawn_time(NSp) end)) / NSp / 1000,
    Rt = median(runs(Runs, fun() -> roundtrip(NRt) end)) / NRt,
    Call = median(runs(Runs, fun() -> call(NRt) end)) / NRt,
    Rings = runs(Runs, fun() -> ring(RN, RM) end),
    Hop = median([H || {_, H} <- Rings]) / (RN * RM),
    Build = median([B || {B, _} <- Rings]) / (RN - 1) / 1000,
    [{"switch_n", NSw}, {"switch_ns", Sw - Noop}, {"switch_loop_ns", Sw},
     {"noop_call_ns", Noop},
     {"spawn_n", NSp}, {"spawn_us", Sp},
     {"rt_n", NRt}, {"roundtrip_ns", Rt}, {"switch_msg_ns", Rt / 2},
     {"call_ns", Call}, {"monitor_demonitor_ns", Call - Rt},
     {"ring_n", RN}, {"ring_m", RM}, {"ring_hop_ns", Hop}, {"ring_mmsgs", 1000 / Hop},
     {"ring_spawn_us", Build},
     {"idle_n", NIdle}, {"idle_proc_kib", Rss},
     {"idle_proc_malloc_kib", median([M || {_, M} <- Idle])}].

two(Runs, NSp, NRt2, RN, RM2) ->
    Sp = median(runs(Runs, fun() -> spawn_time(NSp) end)) / NSp / 1000,
    Rt = median(runs(Runs, fun() -> roundtrip(NRt2) end)) / NRt2,
    Rings = runs(Runs, fun() -> ring(RN, RM2) end),
    Hop = median([H || {_, H} <- Rings]) / (RN * RM2),
    [{"spawn_s2_us", Sp}, {"rt2_n", NRt2}, {"roundtrip_s2_ns", Rt},
     {"ring2_m", RM2}, {"ring_s2_hop_ns", Hop}, {"ring_s2_mmsgs", 1000 / Hop}].
