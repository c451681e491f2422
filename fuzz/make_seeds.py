#!/usr/bin/env python3
"""fuzz/make_seeds.py -- regenerates the seed corpora (fuzz/corpus/*) and
the dictionaries (fuzz/*.dict) from the tree: tests/ and examples/.

  asm, run   every .tasm of tests/e2e, tests/sh/data, examples (and for asm
             the bad-input corpus tests/bad), files over 16 KiB left out
  term       each distinct literal of a `loadk` line in those files
  pattern    "pattern\\nspec\\nargs" from the match specs of the unit tests
             and docs/tracing.md, with a few patterns and argument lists
  *.dict     the instruction names (vm/opcodes.def), the assembly's
             keywords and punctuation, the match-spec functions

Run from the repository root; it replaces the corpora it writes.
"""
import glob
import hashlib
import os
import re
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX = 16 * 1024


def rel(*p):
    return os.path.join(ROOT, *p)


def write_corpus(name, items):
    d = rel('fuzz', 'corpus', name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
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

    ops = re.findall(r'^X\(\w+,\s*"([a-z_]+)"', read(rel('vm/opcodes.def')).decode(), re.M)
    # Plain strings: '\n' is a newline, '\\n' the two characters of an escape.
    asm = ops + ['module ', 'export ', 'function ', ' regs ', 'end', 'fun ', 'r0', 'r1', 'r255',
                 '/', ',', ':', '[', ']', '{', '}', '|', '"', "'", ';', '\n', '\\n', '\\x',
                 'infinity', 'erlang:spawn/3', 'erlang:send/2', 'erlang:monitor/2',
                 'erlang:trace_pattern/3', 'erlang:apply/2', 'erlang:display/1', 'lists:seq/2',
                 'io:format/2', 'erlang:binary_to_atom/1', 'erlang:trace/3']
    terms = ['[', ']', '{', '}', '|', ',', '"', "'", 'fun ', ':', '/', '-', '[]', '{}',
             '\\n', '\\x41', '\\\\', 'ok', "'$1'", "'_'"]
    fns = re.findall(r'\{ "([^"]+)", -?\d+, F_', read(rel('trace/tr_ms_compile.c')).decode())
    pat = terms + ["'%s'" % f for f in fns] + ["'$_'", "'$$'", 'const', 'on_load', '_:_/_', '\n']
    for name, words in (('asm', asm), ('run', asm), ('term', terms), ('pattern', pat)):
        with open(rel('fuzz', name + '.dict'), 'w') as f:
            f.write('# fuzz/%s.dict -- made by fuzz/make_seeds.py\n' % name)
            for w in sorted(set(words)):
                enc = ''.join('\\\\' if c == '\\' else '\\"' if c == '"'
                              else c if 32 <= ord(c) < 127 else '\\x%02x' % ord(c) for c in w)
                f.write('"%s"\n' % enc)
    print('dictionaries written')


if __name__ == '__main__':
    main()
