#!/usr/bin/env python3
"""tests/check_abi.py - checks include/tracevm.h against the recorded ABI.

    tests/check_abi.py [--print] [--record FILE]

The ABI of libtracevm.so.N (N = TVM_ABI in the header) is recorded in
tests/abi/abi-N.txt: every function's prototype as the compiler reads it
(gcc -aux-info), every typedef of a function pointer or number, every
enumerator's value, and the layout of every struct (gdb's `ptype/o` of a
compiled object), each struct with the kind that says how it may change
(docs/embedding.md, "Versions and compatibility"):

  frozen  the host allocates it and the library fills it in, or it is
          passed by value (tvm_term, tvm_error, the *_info arrays,
          tvm_call_time_entry): it never changes within an ABI
  option  the host fills it in and passes it (tvm_config,
          tvm_trace_options, tvm_backtrace_opts, tvm_spawn_opts, the profile
          options): it begins with
          `size_t size`; a later version may add fields only past the
          size it had when recorded (never in its tail padding, which an
          older host need not zero), each with 0 as its default
  event   the library fills it in its own memory and hands it to a host
          callback (tvm_call_event, tvm_trace_event): a later version may
          add fields past the recorded size

Prints one line per difference and exits 1: an incompatible change (a
recorded item changed or removed, a field added where the kind forbids),
which needs TVM_ABI raised and a new record; or an addition that is
compatible but not recorded, printed as the line to add.  --print writes
the header's ABI in the record's format (new structs as kind `?`).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, 'include', 'tracevm.h')


def header_text():
    with open(HEADER, encoding='utf-8') as f:
        return f.read()


def abi_number(text):
    return int(re.search(r'^#define TVM_ABI (\d+)$', text, re.M).group(1))


def enumerators(text):
    """The enumerators of every enum of the header, in order."""
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    names = []
    for body in re.findall(r'\benum\b[^{;]*\{([^}]*)\}', text):
        for item in body.split(','):
            m = re.match(r'\s*(TVM_\w+)', item)
            if m:
                names.append(m.group(1))
    return names


def current():
    """The header's ABI as a list of record lines."""
    text = header_text()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'abi.c')
        with open(src, 'w') as f:
            f.write('#include "include/tracevm.h"\n')
        aux = os.path.join(tmp, 'aux')
        obj = os.path.join(tmp, 'abi.o')
        subprocess.run(['gcc', '-g', '-c', '-I', ROOT, '-fno-eliminate-unused-debug-types',
                        '-aux-info', aux, src, '-o', obj], check=True)
        with open(aux) as f:
            for line in f:
                m = re.match(r'/\* .*include/tracevm\.h:\d+:NC \*/ (.*)$', line.rstrip('\n'))
                if m:
                    lines.append('function ' + m.group(1))
        names = enumerators(text)
        cmds = ['info types ^tvm_']
        for n in names:
            cmds.append('p/d ' + n)
        out = gdb(obj, cmds)
        types, values = out[0], out[1:]
        for n, v in zip(names, values):
            lines.append('enum %s = %s' % (n, v.split('=', 1)[1].strip()))
        structs, typedefs = [], []
        for t in types.splitlines():
            m = re.match(r'\d+:\s+struct (tvm_\w+);$', t.strip())
            if m:
                structs.append(m.group(1))
            m = re.match(r'\d+:\s+typedef (?!struct )(.*) (tvm_\w+);$', t.strip())
            if m:
                typedefs.append(m.group(2))
        out = gdb(obj, ['whatis ' + t for t in typedefs] +
                  ['ptype/o struct ' + s for s in structs])
        for t, o in zip(typedefs, out):
            lines.append('typedef %s = %s' % (t, o.split('=', 1)[1].strip()))
        for s, o in zip(structs, out[len(typedefs):]):
            size = re.search(r'total size \(bytes\):\s*(\d+)', o).group(1)
            lines.append('struct %s ? %s' % (s, size))
            for f in re.finditer(r'/\*\s*(\d+)\s*\|\s*(\d+) \*/\s+(.*);', o):
                lines.append('field %s %s %s %s' % (s, f.group(1), f.group(2), f.group(3)))
    return lines


def gdb(obj, cmds):
    """Runs gdb's commands on obj; the output of each, in order."""
    args = ['gdb', '-nx', '-batch']
    for c in cmds:
        args += ['-ex', 'echo @@@\\n', '-ex', c]
    r = subprocess.run(args + [obj], capture_output=True, text=True, check=True)
    parts = r.stdout.split('@@@\n')[1:]
    if len(parts) != len(cmds):
        sys.exit('check_abi: gdb answered %d of %d questions:\n%s' %
                 (len(parts), len(cmds), r.stderr))
    return [p.strip() for p in parts]


def parse(lines):
    """Record lines -> dicts."""
    rec = {'function': {}, 'enum': {}, 'typedef': {}, 'struct': {}, 'field': {}}
    for line in lines:
        if not line.strip() or line.startswith('#'):
            continue
        kind, rest = line.split(' ', 1)
        if kind == 'function':
            name = re.search(r'(tvm_\w+) \(', rest).group(1)
            rec['function'][name] = rest
        elif kind in ('enum', 'typedef'):
            name, value = rest.split(' = ', 1)
            rec[kind][name] = value
        elif kind == 'struct':
            name, k, size = rest.split()
            rec['struct'][name] = (k, int(size))
        elif kind == 'field':
            s, off, size, decl = rest.split(' ', 3)
            rec['field'].setdefault(s, []).append((int(off), int(size), decl))
    return rec


def compare(old, new):
    """(incompatible changes, unrecorded compatible additions)."""
    bad, added = [], []
    for what in ('function', 'enum', 'typedef'):
        for name, value in old[what].items():
            if name not in new[what]:
                bad.append('%s %s: removed' % (what, name))
            elif new[what][name] != value:
                bad.append('%s %s: was %r, is %r' % (what, name, value, new[what][name]))
        for name, value in new[what].items():
            if name not in old[what]:
                added.append('%s %s' % (what, value) if what == 'function'
                             else '%s %s = %s' % (what, name, value))
    for name, (kind, size) in old['struct'].items():
        if name not in new['struct']:
            bad.append('struct %s: removed' % name)
            continue
        now = new['struct'][name][1]
        fields = old['field'].get(name, [])
        nfields = new['field'].get(name, [])
        for f in fields:
            if f not in nfields:
                bad.append('struct %s: field %s at %d (%d bytes) changed or removed' %
                           (name, f[2], f[0], f[1]))
        extra = [f for f in nfields if f not in fields]
        if kind == 'frozen':
            if now != size:
                bad.append('struct %s (frozen): size %d, recorded %d' % (name, now, size))
            for f in extra:
                bad.append('struct %s (frozen): new field %s' % (name, f[2]))
            continue
        if kind == 'option' and (not nfields or nfields[0] != (0, 8, 'size_t size')):
            bad.append('struct %s (option): does not begin with size_t size' % name)
        for f in extra:
            if f[0] < size:
                bad.append('struct %s (%s): new field %s at %d, inside the recorded %d bytes'
                           % (name, kind, f[2], f[0], size))
            else:
                added.append('field %s %d %d %s' % (name, f[0], f[1], f[2]))
    for name in new['struct']:
        if name not in old['struct']:
            added.append('struct %s KIND %d   (frozen, option or event)' %
                         (name, new['struct'][name][1]))
            for f in new['field'].get(name, []):
                added.append('field %s %d %d %s' % ((name,) + f))
    return bad, added


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--print', action='store_true', help="print the header's ABI")
    ap.add_argument('--record', help='the record (default: tests/abi/abi-N.txt)')
    args = ap.parse_args()
    lines = current()
    if args.print:
        print('\n'.join(lines))
        return 0
    path = args.record or os.path.join(ROOT, 'tests', 'abi', 'abi-%d.txt' % abi_number(header_text()))
    try:
        with open(path, encoding='utf-8') as f:
            old = parse(f.read().splitlines())
    except OSError as e:
        print('%s: %s (a new TVM_ABI needs a new record: tests/check_abi.py --print)' %
              (os.path.relpath(path, ROOT), e.strerror))
        return 1
    bad, added = compare(old, parse(lines))
    rel = args.record or os.path.relpath(path, ROOT)
    for b in bad:
        print('%s: incompatible: %s' % (rel, b))
    if bad:
        print('%s: an incompatible change needs TVM_ABI raised (a new SONAME) and a new record'
              % rel)
    for a in added:
        print('%s: not recorded: %s' % (rel, a))
    if added:
        print('%s: compatible additions: add the lines above to the record' % rel)
    return 1 if bad or added else 0


if __name__ == '__main__':
    sys.exit(main())
