%% bench/tracing.erl - the tracing benchmarks' scenarios on BEAM, run in
%% the same `bench/run` invocation as tracevm's, so the ratios printed
%% beside each figure come from one machine at one time.
%%
%%   erlc -o DIR bench/tracing.erl
%%   erl -noshell +S 2 -pa DIR -run tracing overhead [runs R] [fib N]
%%   erl -noshell +S 2 -pa DIR -run tracing pausefree [runs R] [fns N]
%%   erl -noshell +S 2 +P 1048576 -pa DIR -run tracing flags_all [procs N]
%%
%% (Options without dashes, as in interp.erl: erl takes words starting
%% with '-' as its own flags.)  Every figure is printed as a key=value
%% line, named as bench_overhead, bench_pausefree and bench_events name
%% theirs, so bench/run pairs them up.
%%
%% overhead: fib(N) (default 27) with local calls, timed in the traced
%% process with erlang:monotonic_time/1, R runs (default 7) after a
%% warm-up, each scenario's median minus the untraced median, per call:
%%   armed        trace_pattern({tracing,fib,1}, true, [local]), the
%%                process not traced
%%   call_count   trace_pattern(..., true, [call_count])
%%   call_event   armed, and the process traced [call] with a tracer
%%                process ({tracer, Pid}) that receives and drops every
%%                message; the tracee's time (the tracer runs on the other
%%                scheduler), per event
%%   return_pair  the same with the match spec [{'_',[],[{return_trace}]}]:
%%                a call and a return_from per call
%%   call_time    trace_pattern(..., true, [call_time]), the process
%%                traced [call] (no call pattern: no messages)
%% Before each timed run the tracer has drained every earlier message
%% (erlang:trace_delivered/1), as bench_overhead drains its rings.
%%
%% pausefree: a module of N functions (default 5,000) fK(X) -> X + K and
%% work/1 (20 nested local calls) is compiled at run time; one worker per
%% scheduler runs work/1 in a loop and records the largest gap between
%% two iterations; a controller times 20 pairs of trace_pattern on and
%% off over every function of the module ([local]).  The same window with
%% no trace_pattern is the baseline.
%%
%% flags_all: N processes (default 300,000) wait in receive while a worker
%% per scheduler records its largest gap; erlang:trace(all, true, [call])
%% and then false are timed, R rounds.  BEAM stops every scheduler for
%% the walk: the gap shows it.
-module(tracing).
-export([main/0, main/1, fib/1, tracer/0, worker/2, waiter/0]).
-compile([no_inline]).

now_ns() -> erlang:monotonic_time(nanosecond).

median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth(N div 2 + 1, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

p99(L) ->
    S = lists:sort(L),
    lists:nth(max(1, round(0.99 * length(S))), S).

opts([], Acc) -> Acc;
opts([K, V | Rest], Acc) when is_map_key(K, Acc) ->
    opts(Rest, Acc#{K := list_to_integer(V)});
opts(_, _) -> erlang:error(usage).

main() -> main(["overhead"]).

main([Which | Args]) ->
    Defaults = #{"runs" => 7, "fib" => 27, "fns" => 5000, "procs" => 300000},
    O = opts(Args, Defaults),
    case Which of
        "overhead" -> overhead(O);
        "pausefree" -> pausefree(O);
        "flags_all" -> flags_all(O)
    end,
    halt().

kv(K, V) when is_float(V) -> io:format("~s=~.3f~n", [K, V]);
kv(K, V) -> io:format("~s=~p~n", [K, V]).

%% ---- overhead ----------------------------------------------------------------

fib(N) when N < 2 -> N;
fib(N) -> fib(N - 1) + fib(N - 2).

calls(N) when N < 2 -> 1;
calls(N) -> 1 + calls(N - 1) + calls(N - 2).

tracer() ->
    receive
        {stop, From} -> From ! stopped;
        _ -> tracer()
    end.

%% The median time of R runs of fib(N) in a fresh process set up by Setup
%% (given the process), torn down by Teardown.
timed(O, Setup, Teardown) ->
    #{"runs" := R, "fib" := N} = O,
    Self = self(),
    Pid = spawn(fun() ->
                        receive go -> ok end,
                        Ts = [begin
                                  erlang:trace_delivered(self()),
                                  receive {trace_delivered, _, _} -> ok end,
                                  T0 = now_ns(),
                                  fib(N),
                                  now_ns() - T0
                              end || _ <- lists:seq(0, R)],
                        Self ! {times, tl(Ts)}
                end),
    Setup(Pid),
    Pid ! go,
    Times = receive {times, T} -> T end,
    Teardown(),
    median(Times).

pattern(How, Flags) -> erlang:trace_pattern({tracing, fib, 1}, How, Flags).

overhead(O) ->
    #{"fib" := N} = O,
    Calls = calls(N),
    None = fun(_) -> ok end,
    Off = fun() -> pattern(false, [local, call_count, call_time]) end,
    Untraced = timed(O, None, Off),
    Armed = timed(O, fun(_) -> pattern(true, [local]) end, Off),
    Count = timed(O, fun(_) -> pattern(true, [call_count]) end, Off),
    Tracer = spawn(tracing, tracer, []),
    Traced = fun(Spec) ->
                     fun(P) ->
                             pattern(Spec, [local]),
                             erlang:trace(P, true, [call, {tracer, Tracer}])
                     end
             end,
    Event = timed(O, Traced(true), Off),
    Pair = timed(O, Traced([{'_', [], [{return_trace}]}]), Off),
    Time = timed(O, fun(P) ->
                            pattern(true, [call_time]),
                            erlang:trace(P, true, [call, {tracer, Tracer}])
                    end, Off),
    Tracer ! {stop, self()},
    receive stopped -> ok end,
    Per = fun(T) -> (T - Untraced) / Calls end,
    kv("fib_calls", Calls),
    kv("untraced_ns_per_call", Untraced / Calls),
    kv("armed_ns", Per(Armed)),
    kv("call_count_ns", Per(Count)),
    kv("call_event_ns", Per(Event)),
    kv("return_pair_ns", Per(Pair)),
    kv("call_time_ns", Per(Time)).

%% ---- pausefree -------------------------------------------------------------------

%% A module `genmod` of Fns functions and work/1, compiled from text.
genmod(Fns) ->
    Funs = [io_lib:format("f~b(X) -> X + ~b.~n", [K, K]) || K <- lists:seq(1, Fns)],
    Step = max(1, Fns div 20),
    Nest = lists:foldl(fun(K, Acc) -> io_lib:format("f~b(~s)", [K, Acc]) end, "X",
                       lists:seq(Step, Step * 20, Step)),
    Src = ["-module(genmod).\n-export([work/1]).\n-compile([nowarn_unused_function]).\n",
           "work(X) -> ", Nest, ".\n" | Funs],
    {ok, Toks, _} = erl_scan:string(lists:flatten(Src)),
    Forms = split_forms(Toks, [], []),
    {ok, genmod, Bin} = compile:forms(Forms, []),
    {module, genmod} = code:load_binary(genmod, "genmod.erl", Bin),
    ok.

split_forms([], [], Acc) -> lists:reverse(Acc);
split_forms([{dot, _} = D | Rest], Cur, Acc) ->
    {ok, F} = erl_parse:parse_form(lists:reverse([D | Cur])),
    split_forms(Rest, [], [F | Acc]);
split_forms([T | Rest], Cur, Acc) -> split_forms(Rest, [T | Cur], Acc).

%% Loops genmod:work/1 until told to stop; answers with its largest gap
%% between two iterations (us) and its iterations.
worker(Parent, _) ->
    worker_loop(Parent, now_ns(), 0, 0).

worker_loop(Parent, Last, Max, N) ->
    genmod:work(N),
    Now = now_ns(),
    Gap = Now - Last,
    receive
        {stop, From} -> From ! {gap, self(), max(Max, Gap), N + 1}
    after 0 -> worker_loop(Parent, Now, max(Max, Gap), N + 1)
    end.

%% Runs Action in a window while a worker per scheduler loops; the
%% workers' largest gap (ms) and the action's latencies (ms).
window(Action) ->
    Scheds = erlang:system_info(schedulers_online),
    Ws = [spawn_opt(tracing, worker, [self(), I], [{scheduler, I}]) || I <- lists:seq(1, Scheds)],
    timer:sleep(50),
    Lat = Action(),
    [W ! {stop, self()} || W <- Ws],
    Gaps = [receive {gap, W, G, _} -> G end || W <- Ws],
    {lists:max(Gaps) / 1.0e6, Lat}.

pausefree(O) ->
    #{"fns" := Fns, "runs" := R} = O,
    genmod(Fns),
    Toggle = fun() ->
                     lists:append([begin
                                       T0 = now_ns(),
                                       erlang:trace_pattern({genmod, '_', '_'}, true, [local]),
                                       T1 = now_ns(),
                                       erlang:trace_pattern({genmod, '_', '_'}, false, [local]),
                                       T2 = now_ns(),
                                       timer:sleep(5),
                                       [(T1 - T0) / 1.0e6, (T2 - T1) / 1.0e6]
                                   end || _ <- lists:seq(1, 20)])
             end,
    Idle = fun() -> timer:sleep(200), [] end,
    Rounds = [{window(Idle), window(Toggle)} || _ <- lists:seq(1, R)],
    NoneGaps = [G || {{G, _}, _} <- Rounds],
    NbGaps = [G || {_, {G, _}} <- Rounds],
    Lats = lists:append([L || {_, {_, L}} <- Rounds]),
    kv("fns", Fns + 1),
    kv("none_gap_max_ms", median(NoneGaps)),
    kv("nb_gap_max_ms", median(NbGaps)),
    kv("gap_max_ratio", median([B / max(A, 1.0e-3) || {{A, _}, {B, _}} <- Rounds])),
    kv("latency_median_ms", median(Lats)),
    kv("latency_p99_ms", p99(Lats)).

%% ---- flags_all -------------------------------------------------------------------

waiter() -> receive stop -> ok end.

flags_all(O) ->
    #{"procs" := N, "runs" := R} = O,
    genmod(100),   % the workers' loop
    Ps = [spawn(tracing, waiter, []) || _ <- lists:seq(1, N)],
    Tracer = spawn(tracing, tracer, []),
    Round = fun() ->
                    window(fun() ->
                                   T0 = now_ns(),
                                   erlang:trace(all, true, [call, {tracer, Tracer}]),
                                   T1 = now_ns(),
                                   erlang:trace(all, false, [call]),
                                   [(T1 - T0) / 1.0e6]
                           end)
            end,
    Rounds = [Round() || _ <- lists:seq(1, max(R, 2))],
    [P ! stop || P <- Ps],
    kv("procs", N),
    kv("flags_all_ms", median(lists:append([L || {_, L} <- Rounds]))),
    kv("flags_all_gap_max_ms", median([G || {G, _} <- Rounds])).
