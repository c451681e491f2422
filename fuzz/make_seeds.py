#!/usr/bin/env python3
"""fuzz/make_seeds.py -- regenerates the seed corpora (fuzz/corpus/*) and
the dictionaries (fuzz/*.dict) from the tree: tests/ and examples/.

  asm, run   every .tasm of tests/e2e, tests/sh/data, examples (and for asm
             the bad-input corpus tests/bad), files over 16 KiB left out
  term       each distinct literal of a `loadk` line in those files
  pattern    "pattern\\nspec\\nargs" from the match specs of the unit tests
             and docs/tracing.md, with a few patterns and argument lists
  ctl        what a control client sends, from a list below: each command of
             docs/control.md with its options, loads good and bad, and the
             malformed requests tests/sh/control.sh checks
  *.dict     the instruction names (vm/opcodes.def), the assembly's
             keywords and punctuation, the match-spec functions, the
             control commands and options

Run from the repository root; it replaces the seeds of the corpora it
writes and keeps their findings (regress-*).
"""
import glob
import hashlib
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX = 16 * 1024


def rel(*p):
    return os.path.join(ROOT, *p)


def write_corpus(name, items):
    d = rel('fuzz', 'corpus', name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        if not old.startswith('regress-'):
            os.remove(os.path.join(d, old))
    seen = set()
    for data in items:
        if isinstance(data, str):
            data = data.encode()
        h = hashlib.sha1(data).hexdigest()[:16]
        if h in seen or len(data) > MAX:
            continue
        seen.add(h)
        with open(os.path.join(d, h), 'wb') as f:
            f.write(data)
    return len(seen)


def tasm_files(bad):
    pats = ['tests/e2e/*.tasm', 'tests/e2e/lib/*.tasm', 'tests/sh/data/*.tasm', 'examples/*.tasm']
    if bad:
        pats.append('tests/bad/*.tasm')
    out = []
    for p in pats:
        out += sorted(glob.glob(rel(p)))
    return out


def read(p):
    with open(p, 'rb') as f:
        return f.read()


def literals():
    lits = []
    for p in tasm_files(False):
        for line in read(p).decode(errors='replace').splitlines():
            m = re.match(r'\s*loadk\s+r\d+\s*,\s*(.*?)\s*(;.*)?$', line)
            if m and m.group(1):
                lits.append(m.group(1))
    return sorted(set(lits))


def specs():
    srcs = glob.glob(rel('tests/unit/trace/*.c')) + glob.glob(rel('tests/unit/bp/*.c'))
    srcs += [rel('docs/tracing.md')] + glob.glob(rel('tests/sh/*.sh'))
    out = set()
    for p in srcs:
        text = read(p).decode(errors='replace')
        for m in re.finditer(r'"(\[\{[^"]*\}\])"', text):
            out.add(m.group(1).replace('\\"', '"'))
    return sorted(out)


def ctl_seeds():
    good = 'module fz2\nexport g/0\nfunction g/0 regs 1\n    loadi r0, 7\n    ret r0\nend\n'
    bad = 'module fz3\nexport f/0\nfunction f/0 regs 1\n    bogus r0\n    ret r9\nend\n'
    requests = [
        'info', 'procs', 'procs --sort pid', 'procs --sort reds --limit 1', 'procs --sort mq',
        'procs --sort heap --limit 5', 'top --interval 10 --count 2 --limit 1',
        'top --interval 10 --count 1 --sort pid', 'stacks', 'stacks --group', 'stacks --running',
        'stacks 1 <0.2.0> 99', 'trace fz:f/1 --local --max-events 3',
        'trace fz:_/_ --local --match "[{\'_\',[],[{return_trace}]}]" --format jsonl --max-events 5',
        'trace fz:f/1 --local --pids 2 --flags call,return_to --format chrome --duration 1',
        'trace fz:f/_ --local --rate 10 --max-events 2 --format text',
        'trace erlang:_/_ --max-events 1', 'trace "fz:f/1" --local --flags procs,send,receive',
        'trace fz:f/1 --local --flags call,set_on_spawn,set_on_first_spawn --max-events 2',
        'trace_info fz:f/1', 'trace_info fz:f/1 all', 'trace_info fz:f/1 call_count',
        'count fz:_/_ --duration 0.1', 'count fz:f/1 fz:idle/0 --duration 0.1 --limit 1',
        'time fz:_/_ --duration 0.1 --limit 2', 'time _:_/_ --duration 0.05',
        'frobnicate', '', 'info  ', 'info ', 'procs "--sort', 'procs "a\\q"', 'procs "a\\x00"',
        'procs "a"b', 'procs a\\b', 'procs --sort', 'procs --sort size', 'procs --limit 0',
        'procs --verbose', 'info now', 'stacks 12x', 'load x.tasm 99999999999',
        'trace fz:f/1 --format ctf', 'trace fz:f/1 --out /tmp/x', 'count fz:_/_',
        'time fz:_/_ --duration 0', 'trace_info fz:f', 'procs "\\x70ids"',
        # profile: its files only in the harness's directory (fuzz_ctl.c)
        'profile --duration 0.05 --out /tmp/tvm-fuzz-ctl-out/p.svg',
        'profile --duration 0.01 --kind off --hz 500 --out /tmp/tvm-fuzz-ctl-out/p.folded',
        'profile --duration 0.01 --kind alloc --alloc-interval 4 --format pprof '
        '--out "/tmp/tvm-fuzz-ctl-out/p"',
        'profile --duration 0.02 --merge --lines --out /tmp/tvm-fuzz-ctl-out/p.json',
        'profile --duration 0 --out /tmp/tvm-fuzz-ctl-out/p.svg', 'profile --duration 1',
        'profile --duration 1 --out /tmp/tvm-fuzz-ctl-out/p.txt', 'profile --kind cpu --hz',
    ]
    items = [r + '\n' for r in requests]
    items.append('load fz2.tasm %d\n%sinfo\n' % (len(good), good))
    items.append('load fz3.tasm %d\n%sinfo\n' % (len(bad), bad))
    items.append('load fz2.tasm 10\nmodule')
    items.append('info\nprocs --sort pid\nstacks --group\ntrace_info fz:f/1\n')
    items.append('info')
    return items


def main():
    n = write_corpus('asm', [read(p) for p in tasm_files(True)])
    print('asm: %d seeds' % n)
    n = write_corpus('run', [read(p) for p in tasm_files(False)])
    print('run: %d seeds' % n)
    n = write_corpus('term', literals())
    print('term: %d seeds' % n)
    patterns = ['m:f/1', 'm:f/_', 'm:_/_', '_:_/_', 'on_load', 'm:g/3', 'erlang:send/2']
    args = ['[1]', '[a, {b, c}]', '[[1,2,3], <<>>]', '[]', '[1, 2, 3]']
    items = []
    for i, s in enumerate(specs()):
        items.append('%s\n%s\n%s\n' % (patterns[i % len(patterns)], s, args[i % len(args)]))
    n = write_corpus('pattern', items)
    print('pattern: %d seeds' % n)
    n = write_corpus('ctl', ctl_seeds())
    print('ctl: %d seeds' % n)

    ops = re.findall(r'^X\(\w+,\s*"([a-z_]+)"', read(rel('vm/opcodes.def')).decode(), re.M)
    # Plain strings: '\n' is a newline, '\\n' the two characters of an escape.
    asm = ops + ['module ', 'export ', 'function ', ' regs ', 'end', 'fun ', 'r0', 'r1', 'r255',
                 '/', ',', ':', '[', ']', '{', '}', '|', '"', "'", ';', '\n', '\\n', '\\x',
                 'infinity', 'erlang:spawn/3', 'erlang:send/2', 'erlang:monitor/2',
                 'erlang:trace_pattern/3', 'erlang:apply/2', 'erlang:display/1', 'lists:seq/2',
                 'io:format/2', 'erlang:binary_to_atom/1', 'erlang:trace/3', 'erlang:monotonic_time/0',
                 'erlang:convert_time_unit/3', 'erlang:unique_integer/1', 'erlang:now/0',
                 'set_on_spawn', 'set_on_first_spawn', 'garbage_collection', 'set_on_link',
                 'set_on_first_link', 'exiting', 'out_exited', 'monotonic_timestamp',
                 'strict_monotonic_timestamp', 'erlang:link/1', 'erlang:unlink/1',
                 'erlang:spawn_link/3', 'erlang:exit/2', 'erlang:process_flag/2', 'trap_exit',
                 'kill', 'erlang:register/2', 'erlang:unregister/1', 'erlang:whereis/1',
                 'erlang:registered/0', 'erlang:demonitor/1', 'erlang:demonitor/2', 'flush',
                 'info', 'erlang:node/0', 'nonode@nohost', 'erlang:process_info/2',
                 'erlang:processes/0', 'status', 'message_queue_len', 'registered_name',
                 'links', 'monitored_by', 'erlang:garbage_collect/0', 'heap_size', 'current_function',
                 'current_stacktrace', 'erlang:process_info/1', 'initial_call', 'messages',
                 'monitors', 'erlang:put/2', 'erlang:get/1', 'erlang:get/0',
                 'erlang:get_keys/0', 'erlang:get_keys/1', 'erlang:erase/1', 'erlang:erase/0',
                 'dictionary', 'total_heap_size', 'stack_size', 'memory', 'priority', 'erlang:system_info/1',
                 'schedulers', 'process_count', 'atom_count', 'wordsize',
                 'seq_trace:set_token/1', 'seq_trace:set_token/2',
                 'seq_trace:get_token/0', 'seq_trace:get_token/1', 'seq_trace:print/1',
                 'seq_trace:print/2', 'seq_trace:reset_trace/0',
                 'seq_trace:set_system_tracer/1', 'seq_trace:get_system_tracer/0', 'label',
                 'serial', 'sequential_trace_token', 'print', "'receive'",
                 'erlang:system_monitor/0', 'erlang:system_monitor/1',
                 'erlang:system_monitor/2', 'long_gc', 'long_schedule', 'large_heap', 'busy_port',
                 'busy_dist_port']
    terms = ['[', ']', '{', '}', '|', ',', '"', "'", 'fun ', ':', '/', '-', '[]', '{}',
             '\\n', '\\x41', '\\\\', 'ok', "'$1'", "'_'"]
    fns = re.findall(r'\{ "([^"]+)", -?\d+, F_', read(rel('trace/tr_ms_compile.c')).decode())
    pat = terms + ["'%s'" % f for f in fns] + ["'$_'", "'$$'", 'const', 'on_load', '_:_/_', '\n']
    ctl = ['info', 'procs', 'top', 'stacks', 'trace', 'trace_info', 'count', 'time', 'load',
           '--sort', '--limit', '--interval', '--count', '--running', '--group', '--match',
           '--local', '--flags', '--pids', '--max-events', '--duration', '--rate', '--format',
           'pid', 'reds', 'mq', 'heap', 'text', 'jsonl', 'chrome', 'call', 'return_to', 'procs',
           'send', 'receive', 'set_on_spawn', 'set_on_first_spawn', 'garbage_collection',
           'set_on_link', 'set_on_first_link', 'exiting', 'monotonic_timestamp',
           'strict_monotonic_timestamp', 'fz:f/1', 'fz:_/_', '_', ':', '/', ' ', '"', '\\', '\\x',
           '\\n', '\n', '<0.2.0>', 'all', 'call_count', 'call_time', '0.05', '1', '10',
           'profile', '--kind', 'cpu', 'off', 'alloc', '--hz', '--alloc-interval', '--merge',
           '--lines', '--out', '/tmp/tvm-fuzz-ctl-out/', '.svg', '.folded', '.json', '.pb.gz',
           'folded', 'speedscope', 'pprof', 'svg']
    for name, words in (('asm', asm), ('run', asm), ('term', terms), ('pattern', pat),
                        ('ctl', ctl)):
        with open(rel('fuzz', name + '.dict'), 'w') as f:
            f.write('# fuzz/%s.dict -- made by fuzz/make_seeds.py\n' % name)
            for w in sorted(set(words)):
                enc = ''.join('\\\\' if c == '\\' else '\\"' if c == '"'
                              else c if 32 <= ord(c) < 127 else '\\x%02x' % ord(c) for c in w)
                f.write('"%s"\n' % enc)
    print('dictionaries written')


if __name__ == '__main__':
    main()
