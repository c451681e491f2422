%% bench/interp.erl - the interpreter benchmark's workloads in Erlang, for
%% comparison with bench/interp.tasm (run by bench/bench_interp.c).
%%
%%   erlc -o DIR bench/interp.erl
%%   erl -noshell +S 1 -pa DIR -run interp main [runs R] [fib N] [calls M] [list L]
%%
%% (erl takes words starting with '-' as its own flags, so the options are
%% written without the dashes that bench_interp and interp.lua use.)
%%
%% Times with erlang:monotonic_time/1 in-process; every workload runs once
%% to warm up, then R times, and the medians are printed as the same
%% key=value lines as bench_interp.  Each list run happens in a fresh
%% process (a fresh heap), as bench_interp uses a fresh env per run.
-module(interp).
-export([main/0, main/1]).
%% Keep the compiler from inlining or dropping anything.
-compile([no_inline]).

fib(N) when N < 2 -> N;
fib(N) -> fib(N - 1) + fib(N - 2).

empty() -> ok.

calls(0) -> ok;
calls(N) -> empty(), calls(N - 1).

loop(0) -> ok;
loop(N) -> loop(N - 1).

%% build(N) = [1, 2, ..., N], consed from the back
build(N) -> build(N, []).
build(0, Acc) -> Acc;
build(N, Acc) -> build(N - 1, [N | Acc]).

%% reverse in Erlang code (lists:reverse/1 is a BIF written in C)
rev(L) -> rev(L, []).
rev([H | T], Acc) -> rev(T, [H | Acc]);
rev([], Acc) -> Acc.

now_ns() -> erlang:monotonic_time(nanosecond).

time(F) ->
    T0 = now_ns(),
    V = F(),
    {now_ns() - T0, V}.

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

fibs(N) -> fibs(N, 0, 1).
fibs(0, A, B) -> {A, B};
fibs(N, A, B) -> fibs(N - 1, B, A + B).

main() -> main([]).

main(Args) ->
    O = opts(Args, #{"runs" => 7, "fib" => 30, "calls" => 10000000, "list" => 1000000}),
    #{"runs" := Runs, "fib" := FibN, "calls" := NCalls, "list" := NList} = O,
    {FibExpect, F1} = fibs(FibN),
    FibCalls = 2 * F1 - 1,
    Core = [begin
                {TF, FibExpect} = time(fun() -> fib(FibN) end),
                {TC, ok} = time(fun() -> calls(NCalls) end),
                {TL, ok} = time(fun() -> loop(NCalls) end),
                {TF, TC, TL}
            end || _ <- lists:seq(0, Runs)],
    [_ | CoreRuns] = Core, % drop the warm-up
    Lists = [list_run(NList) || _ <- lists:seq(0, Runs)],
    [_ | ListRuns] = Lists,
    CallLoop = median([C || {_, C, _} <- CoreRuns]) / NCalls,
    Loop = median([L || {_, _, L} <- CoreRuns]) / NCalls,
    Out = [{"runs", Runs}, {"fib_n", FibN}, {"fib_calls", FibCalls},
           {"fib" ++ integer_to_list(FibN) ++ "_ns",
            median([F || {F, _, _} <- CoreRuns]) / FibCalls},
           {"calls", NCalls},
           {"call_loop_ns", CallLoop}, {"loop_ns", Loop},
           {"empty_call_ns", CallLoop - Loop},
           {"list_n", NList},
           {"list_build_ns", median([B || {B, _, _, _} <- ListRuns]) / NList},
           {"list_rev_ns", median([R || {_, R, _, _} <- ListRuns]) / NList},
           {"list_ns", median([B + R || {B, R, _, _} <- ListRuns]) / NList},
           {"list_rev_native_ns", median([N || {_, _, _, N} <- ListRuns]) / NList}],
    [case V of
         _ when is_integer(V) -> io:format("~s=~b~n", [K, V]);
         _ -> io:format("~s=~.2f~n", [K, float(V)])
     end || {K, V} <- Out],
    halt(0).

%% One list run in a fresh process: {Build, Rev, _, NativeRev} in ns.
list_run(NList) ->
    Self = self(),
    Pid = spawn(fun() ->
                        {TB, L} = time(fun() -> build(NList) end),
                        {TR, R} = time(fun() -> rev(L) end),
                        {TN, R2} = time(fun() -> lists:reverse(L) end),
                        1 = hd(L),
                        NList = hd(R),
                        NList = hd(R2),
                        Self ! {self(), {TB, TR, TB + TR, TN}}
                end),
    receive {Pid, Res} -> Res end.
