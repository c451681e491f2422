-- bench/hooks.lua - the per-event cost of Lua 5.4's call hook, the peer of
-- tracevm's call_event row (bench/run overhead): fib(N) timed with
-- os.clock() untraced and with debug.sethook(f, "c") whose hook only
-- counts, per call over untraced.  Medians of R runs after a warm-up.
--
--   lua5.4 bench/hooks.lua [runs R] [fib N]
local runs, n = 7, 27
for i = 1, #arg, 2 do
  if arg[i] == "runs" then runs = tonumber(arg[i + 1])
  elseif arg[i] == "fib" then n = tonumber(arg[i + 1])
  else error("usage: hooks.lua [runs R] [fib N]") end
end

local function fib(k)
  if k < 2 then return k end
  return fib(k - 1) + fib(k - 2)
end

local function median(t)
  table.sort(t)
  local m = #t
  if m % 2 == 1 then return t[math.floor((m + 1) / 2)] end
  return (t[math.floor(m / 2)] + t[math.floor(m / 2) + 1]) / 2
end

local count = 0
local function hook() count = count + 1 end

local function timed(hooked)
  local ts = {}
  for r = 0, runs do
    if hooked then debug.sethook(hook, "c") end
    local t0 = os.clock()
    fib(n)
    local t = os.clock() - t0
    debug.sethook()
    if r > 0 then ts[#ts + 1] = t end
  end
  return median(ts)
end

local untraced = timed(false)
count = 0
local hooked = timed(true)
local calls = count / (runs + 1)
print(string.format("fib_calls=%d", calls))
print(string.format("untraced_ns_per_call=%.3f", untraced * 1e9 / calls))
print(string.format("call_hook_ns=%.3f", (hooked - untraced) * 1e9 / calls))
