-- bench/interp.lua - the interpreter benchmark's workloads in Lua, for
-- comparison with bench/interp.tasm (run by bench/bench_interp.c): run by
-- Lua 5.4 and by LuaJIT with its JIT off (-joff: its interpreter), so the
-- file keeps to what both accept.
--
--   lua5.4 bench/interp.lua [--runs R] [--fib N] [--calls M] [--list L]
--   luajit -joff bench/interp.lua [...]
--
-- Times with os.clock() (process CPU time) in-process; every workload runs
-- once to warm up, then R times, and the medians are printed as the same
-- key=value lines as bench_interp.  A list cell is a two-slot table
-- {head, tail} and the empty list is nil (Lua has no cons cells).

local clock = os.clock

local runs, fib_n, ncalls, nlist = 7, 30, 10000000, 1000000
do
  local i = 1
  while i <= #arg do
    local k, v = arg[i], tonumber(arg[i + 1])
    if not v then error("usage: interp.lua [--runs R] [--fib N] [--calls M] [--list L]") end
    if k == "--runs" then runs = v
    elseif k == "--fib" then fib_n = v
    elseif k == "--calls" then ncalls = v
    elseif k == "--list" then nlist = v
    else error("unknown option " .. k) end
    i = i + 2
  end
end

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function empty() end

local function calls(n)
  for _ = 1, n do empty() end
end

local function loop(n)
  for _ = 1, n do end
end

-- build(N) = [1, 2, ..., N], consed from the back
local function build(n)
  local acc = nil
  for i = n, 1, -1 do acc = { i, acc } end
  return acc
end

local function rev(l)
  local acc = nil
  while l do
    acc = { l[1], acc }
    l = l[2]
  end
  return acc
end

local function median(t)
  table.sort(t)
  local n = #t
  -- math.floor, not //: the same file runs on LuaJIT (Lua 5.1 syntax).
  if n % 2 == 1 then return t[math.floor((n + 1) / 2)] end
  return (t[math.floor(n / 2)] + t[math.floor(n / 2) + 1]) / 2
end

local f0, f1 = 0, 1
for _ = 1, fib_n do f0, f1 = f1, f0 + f1 end
local fib_expect, fib_calls = f0, 2 * f1 - 1

local fib_t, call_t, loop_t, build_t, rev_t, both_t = {}, {}, {}, {}, {}, {}
for r = 0, runs do -- r = 0: warm-up
  local t0 = clock()
  local v = fib(fib_n)
  local t1 = clock()
  assert(v == fib_expect, "fib returned a wrong value")
  calls(ncalls)
  local t2 = clock()
  loop(ncalls)
  local t3 = clock()
  if r > 0 then
    fib_t[r] = (t1 - t0) * 1e9
    call_t[r] = (t2 - t1) * 1e9
    loop_t[r] = (t3 - t2) * 1e9
  end
end

for r = 0, runs do
  collectgarbage("collect") -- start each run from a clean heap
  local t0 = clock()
  local list = build(nlist)
  local t1 = clock()
  local rl = rev(list)
  local t2 = clock()
  assert(list[1] == 1 and rl[1] == nlist, "build/rev returned a wrong list")
  list, rl = nil, nil
  if r > 0 then
    build_t[r] = (t1 - t0) * 1e9
    rev_t[r] = (t2 - t1) * 1e9
    both_t[r] = (t2 - t0) * 1e9
  end
end

local call_loop_ns = median(call_t) / ncalls
local loop_ns = median(loop_t) / ncalls
local out = {
  { "runs", runs }, { "fib_n", fib_n }, { "fib_calls", fib_calls },
  { "fib" .. fib_n .. "_ns", median(fib_t) / fib_calls },
  { "calls", ncalls },
  { "call_loop_ns", call_loop_ns }, { "loop_ns", loop_ns },
  { "empty_call_ns", call_loop_ns - loop_ns },
  { "list_n", nlist },
  { "list_build_ns", median(build_t) / nlist },
  { "list_rev_ns", median(rev_t) / nlist },
  { "list_ns", median(both_t) / nlist },
}
for _, kv in ipairs(out) do
  local k, v = kv[1], kv[2]
  if v == math.floor(v) and (k == "runs" or k == "fib_n" or k == "fib_calls" or
                             k == "calls" or k == "list_n") then
    print(string.format("%s=%d", k, v))
  else
    print(string.format("%s=%.2f", k, v))
  end
end
