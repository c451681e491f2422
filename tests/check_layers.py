#!/usr/bin/env python3
"""tests/check_layers.py - checks the one-way stack of folders.

    tests/check_layers.py [--root DIR]

Reads every #include of every source file under DIR (default: the
repository) and every file-scope declaration in its .c files, and prints
one line per broken rule, `file:line: rule: what`, then exits 1; prints
nothing and exits 0 when every rule holds.  The rules and the layers are
the ones docs/architecture.md describes (the table LAYERS below is their
one source; the document shows the same table):

  upward       a file of a layer includes a header of a layer above it
  private      a file includes another folder's private header
               (*_internal.h); a folder's own unit tests
               (tests/unit/<folder>/) may include its private headers
  embedder     tools/ and examples/ include only include/tracevm.h (not
               even a header of their own folder: an embedder is built
               on the public API alone)
  declaration  a .c file declares a function (a prototype at file scope
               that is not static) that it does not define, or that
               another .c file uses: a function of one file used by
               another is declared in a header, where the compiler checks
               the definition against the one declaration
  hook         a hook of vm/hook.h is not defined exactly once, in the
               folder its section names

Like Chromium's checkdeps, the check reads text, not the compiler's view:
an #include inside a comment or a disabled #if still counts.
"""
import argparse
import os
import re
import sys

# Bottom up: a folder may include its own headers and those of any folder
# listed before it.  include/ (the public header) includes nothing of the
# project; every folder may include it.
LAYERS = ['include', 'vm', 'loader', 'stacks', 'trace', 'breakpoints', 'profile', 'control',
          'api']
# Embedders: the CLI and the examples see only the public header.
EMBEDDERS = ['tools', 'examples']
# Test and benchmark code may include any layer (white-box tests), but not
# another folder's private headers.
CLIENTS = ['tests', 'bench', 'fuzz']
SOURCE = re.compile(r'\.(c|h|S|def)$')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# A file-scope prototype: a line at column 0 that is not static, a
# preprocessor line or a comment, ending with ");".
PROTO = re.compile(r'^(?!static\b|typedef\b|#|/|\*|\s)[A-Za-z_][\w \t\*]*\b(\w+)\s*\([^;{]*\)\s*;\s*$')
HOOK_SECTION = re.compile(r'/\* ==== (\w+)/')
HOOK_DECL = re.compile(r'\b(vm_hook_\w+)\s*\(')


def folder_of(rel):
    return rel.split('/', 1)[0] if '/' in rel else ''


def sources(root):
    for top in LAYERS + EMBEDDERS + CLIENTS:
        base = os.path.join(root, top)
        for d, dirs, files in os.walk(base):
            dirs.sort()
            for f in sorted(files):
                if SOURCE.search(f):
                    p = os.path.join(d, f)
                    yield os.path.relpath(p, root).replace(os.sep, '/')


def joined_lines(text):
    """(line number, logical line) with a prototype's continuation lines
    joined to its first, so a declaration split over lines is seen whole."""
    out, buf, start = [], '', 0
    for i, line in enumerate(text.splitlines(), 1):
        if buf:
            buf += ' ' + line.strip()
        else:
            buf, start = line, i
        opened = buf.count('(') - buf.count(')')
        if opened > 0 and not buf.rstrip().endswith(('{', '}')) and not buf.lstrip().startswith(('#', '/', '*')):
            continue
        out.append((start, buf))
        buf = ''
    if buf:
        out.append((start, buf))
    return out


def check_includes(rel, text, errors):
    me = folder_of(rel)
    for n, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        inc = m.group(1)
        target = folder_of(inc)
        where = '%s:%d' % (rel, n)
        if me in EMBEDDERS:
            if inc != 'include/tracevm.h':
                errors.append('%s: embedder: %s includes "%s"; the CLI and the examples use '
                              'only include/tracevm.h' % (where, me + '/', inc))
            continue
        if os.path.basename(inc).endswith('_internal.h') and target != me:
            own_tests = rel.startswith('tests/unit/%s/' % target)
            if not own_tests:
                errors.append('%s: private: includes "%s", a private header of %s/' %
                              (where, inc, target))
                continue
        if me in LAYERS and target in LAYERS and LAYERS.index(target) > LAYERS.index(me):
            errors.append('%s: upward: %s/ includes "%s" from %s/, a layer above it' %
                          (where, me, inc, target))


def defines(text, name):
    """Whether text holds the definition of function `name`."""
    return re.search(r'^[A-Za-z_][\w \t\*()]*\b%s\s*\([^;{]*\)\s*\{' % re.escape(name),
                     text, re.M)


def check_declarations(texts, errors):
    """A prototype in a .c file is allowed only for a function defined in
    the same file and used by no other (one that needs external linkage
    for a symbol's sake: a native a test looks up by name, a function
    callgrind or gdb stops in)."""
    for rel, text in texts.items():
        if not rel.endswith('.c'):
            continue
        for n, line in joined_lines(text):
            m = PROTO.match(line)
            if not m or line.lstrip().startswith(('return', 'else', 'case')):
                continue
            name = m.group(1)
            where = '%s:%d: declaration: %s()' % (rel, n, name)
            if not defines(text, name):
                errors.append('%s is declared in a .c file that does not define it; declare '
                              'it in a header' % where)
                continue
            word = re.compile(r'\b%s\b' % re.escape(name))
            users = [o for o, t in texts.items()
                     if o != rel and o.endswith('.c') and word.search(t) and not defines(t, name)]
            if users:
                errors.append('%s is declared in its .c file but used by %s; declare it in a '
                              'header' % (where, ', '.join(sorted(users))))


def check_hooks(root, texts, errors):
    hook_h = texts.get('vm/hook.h')
    if hook_h is None:
        return
    owner = {}
    section = None
    for line in hook_h.splitlines():
        s = HOOK_SECTION.search(line)
        if s:
            section = s.group(1)
            continue
        for h in HOOK_DECL.findall(line):
            owner.setdefault(h, section)
    for hook, folder in sorted(owner.items()):
        defs = [rel for rel, text in texts.items() if rel.endswith('.c') and defines(text, hook)]
        if len(defs) != 1 or folder_of(defs[0]) != folder:
            errors.append('vm/hook.h: hook: %s is defined in %s; it must be defined once, in %s/' %
                          (hook, ', '.join(defs) or 'no file', folder))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    opts = ap.parse_args()
    errors = []
    texts = {}
    for rel in sources(opts.root):
        with open(os.path.join(opts.root, rel), encoding='utf-8', errors='replace') as f:
            texts[rel] = f.read()
    for rel, text in texts.items():
        check_includes(rel, text, errors)
    check_declarations(texts, errors)
    check_hooks(opts.root, texts, errors)
    def key(e):
        # By file, then line (hook errors, which have none, after the file's).
        f, _, rest = e.partition(':')
        n = rest.split(':', 1)[0]
        return (f, int(n) if n.isdigit() else 1 << 30, e)
    for e in sorted(errors, key=key):
        print(e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
