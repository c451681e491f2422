"""bench/hooks.py - the per-event cost of CPython's sys.settrace, the peer
of tracevm's call_event row (bench/run overhead): fib(N) timed with
time.process_time_ns() untraced and with a trace function that counts
'call' events (and returns None, so no line events follow), per call over
untraced.  Medians of R runs after a warm-up.  (sys.monitoring, the
cheaper interface, needs Python 3.12; Debian 12 has 3.11.)

    python3 bench/hooks.py [runs R] [fib N]
"""
import statistics
import sys
import time

runs, n = 7, 27
args = sys.argv[1:]
for k, v in zip(args[::2], args[1::2]):
    if k == 'runs':
        runs = int(v)
    elif k == 'fib':
        n = int(v)
    else:
        sys.exit('usage: hooks.py [runs R] [fib N]')


def fib(k):
    if k < 2:
        return k
    return fib(k - 1) + fib(k - 2)


count = 0


def tracer(frame, event, arg):
    global count
    if event == 'call':
        count += 1
    return None


def timed(traced):
    ts = []
    for r in range(runs + 1):
        if traced:
            sys.settrace(tracer)
        t0 = time.process_time_ns()
        fib(n)
        t = time.process_time_ns() - t0
        sys.settrace(None)
        if r:
            ts.append(t)
    return statistics.median(ts)


untraced = timed(False)
count = 0
traced = timed(True)
calls = count // (runs + 1)
print('fib_calls=%d' % calls)
print('untraced_ns_per_call=%.3f' % (untraced / calls))
print('call_hook_ns=%.3f' % ((traced - untraced) / calls))
