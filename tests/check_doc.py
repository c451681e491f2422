#!/usr/bin/env python3
"""tests/check_doc.py - compiles and runs the code of a guide.

    tests/check_doc.py [DOC]          (default: docs/embedding.md)

With PKG_CONFIG_PATH pointing at an installation of tracevm (the test
suite's scratch install: tests/sh/embedding_doc.sh), in a scratch
directory outside the tree:

  * every ```c and ```cpp block is one of three kinds, and each is checked:
      - a program: its first comment names it, `/* NAME.c - ...` (or
        ` * NAME.c - ...` on the second line); it is written to the
        scratch directory as NAME (its base name) and must be built by a
        run block below.  When NAME is a file of the tree
        (examples/embed.c) the block must be that file, byte for byte;
      - a header excerpt, marked `<!-- doc-test: header -->` on the line
        before the block: each of its declarations and #defines, comments
        and spacing aside, must be in include/tracevm.h (so a struct
        shows the header's fields in the header's order);
      - a fragment, marked `<!-- doc-test: fragment -->`: statements,
        compiled (not run) in a block inside main() where `vm`, `env`,
        `pid` and `path` are declared;
  * a ```tasm block whose first line is `; NAME.tasm - ...` is written as
    NAME (examples/NAME, if there is one, must match it, as for
    programs); and every examples/*.tasm is there too;
  * a block marked `<!-- doc-test: run -->` is a console session: each
    `$ COMMAND` line is run by bash, in order, in the scratch directory,
    and what it prints (stdout and stderr) must be the lines that follow
    it up to the next `$ ` line, exactly.  A compiler command (cc, gcc,
    g++, c++) must succeed and what it prints is not compared (the static
    link prints libdw's warning about dlopen).  With DOC_NO_STATIC=1 (a
    sanitized build, whose runtime cannot be linked statically) `-static`
    is dropped and the static archive named instead of -ltracevm;
  * a command line of a compiler anywhere else in the guide is an error:
    every link line shown is one the test runs.

The compilers are CC and CXX when set (a cross build's suite sets them
to the cross compilers, tests/runner.py), standing for the guide's `cc`
and `g++`; with TRACEVM_RUN set (the emulator of that suite) a command
that runs a program built, `./NAME ...`, runs it under the emulator.  The
guide's commands are otherwise run as written.

Prints one line per failure and exits 1; prints `ok: ...` and exits 0.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPILERS = re.compile(r'^\$ (cc|gcc|g\+\+|c\+\+|clang)(?=\s)')
MARK = re.compile(r'^<!-- doc-test: (header|fragment|run) -->$')
PROGRAM = re.compile(r'^(?:/\*| \*|//) (\S+\.(?:c|cpp)) - ')
TASM = re.compile(r'^; (\S+\.tasm) - ')

# The guide's compiler (COMPILERS) -> the variable that may name another.
COMPILER_VARS = {'cc': 'CC', 'gcc': 'CC', 'clang': 'CC', 'g++': 'CXX', 'c++': 'CXX'}

FRAGMENT_PRELUDE = '''#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tracevm.h>

int main(void)
{
    tvm_vm *vm = tvm_new(NULL);
    tvm_env *env = tvm_env_new(vm);
    tvm_pid pid = 1;
    const char *path = "fib.tasm";
    (void)env, (void)pid, (void)path;
    {
'''
FRAGMENT_END = '''
    }
    return 0;
}
'''


def blocks(text):
    """(line number, fence language, marker or None, block lines) of each
    fenced block."""
    lines = text.split('\n')
    out, i = [], 0
    while i < len(lines):
        m = re.match(r'^(\s*)```(\w*)\s*$', lines[i])
        if not m:
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2)
        prev = lines[i - 1].strip() if i else ''
        mark = MARK.match(prev)
        body, j = [], i + 1
        while j < len(lines) and not re.match(r'^\s*```\s*$', lines[j]):
            body.append(lines[j][indent:])
            j += 1
        out.append((i + 1, lang, mark.group(1) if mark else None, body))
        i = j + 1
    return out


def normalize(code):
    code = re.sub(r'/\*.*?\*/', ' ', code, flags=re.S)
    code = re.sub(r'//[^\n]*', ' ', code)
    code = re.sub(r'^\s*#.*$', ' ', code, flags=re.M)
    return ' '.join(code.split())


def defines(code):
    """The #define lines of code, spacing normalized."""
    return [' '.join(m.split()) for m in re.findall(r'^\s*#\s*define\b.*$', code, re.M)]


def declarations(code):
    """Top-level declarations of normalized code, split at ';' outside braces."""
    out, depth, cur = [], 0, ''
    for ch in code:
        cur += ch
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        elif ch == ';' and depth == 0:
            out.append(cur.strip())
            cur = ''
    if cur.strip():
        out.append(cur.strip())
    return out


def session(body):
    """[(command, expected output lines)] of a console block."""
    steps = []
    for line in body:
        if line.startswith('$ '):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError('output before the first command: %r' % line)
    return steps


def main():
    doc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'docs', 'embedding.md')
    rel = os.path.relpath(doc, ROOT)
    with open(doc, encoding='utf-8') as f:
        text = f.read()
    with open(os.path.join(ROOT, 'include', 'tracevm.h'), encoding='utf-8') as f:
        header_text = f.read()
    header = normalize(header_text)
    header_defines = set(defines(header_text))
    failures = []

    def fail(line, why):
        failures.append('%s:%d: %s' % (rel, line, why))

    tmp = tempfile.mkdtemp(prefix='doc.')
    try:
        for t in glob.glob(os.path.join(ROOT, 'examples', '*.tasm')):
            shutil.copy(t, tmp)
        cflags = subprocess.run(['pkg-config', '--cflags', 'tracevm'], capture_output=True,
                                text=True).stdout.split()
        programs, sessions, counts = {}, [], {'program': 0, 'header': 0, 'fragment': 0,
                                                'run': 0, 'tasm': 0}
        for line, lang, mark, body in blocks(text):
            code = '\n'.join(body) + '\n'
            if mark == 'run':
                try:
                    sessions.append((line, session(body)))
                except ValueError as e:
                    fail(line, str(e))
                continue
            for k, b in enumerate(body):
                if COMPILERS.match(b):
                    fail(line + 1 + k, 'a compiler command outside a doc-test run block: ' + b)
            if lang == 'tasm':
                m = TASM.match(body[0]) if body else None
                if m:
                    counts['tasm'] += 1
                    write(tmp, m.group(1), code, line, fail)
                continue
            if lang not in ('c', 'cpp'):
                continue
            name = next((m.group(1) for m in map(PROGRAM.match, body[:2]) if m), None)
            if mark == 'header':
                counts['header'] += 1
                for d in declarations(normalize(code)):
                    if d not in header:
                        fail(line, 'not in include/tracevm.h: ' + d)
                for d in defines(code):
                    if d not in header_defines:
                        fail(line, 'not in include/tracevm.h: ' + d)
            elif mark == 'fragment':
                counts['fragment'] += 1
                src = os.path.join(tmp, 'fragment_%d.c' % line)
                with open(src, 'w') as f:
                    f.write(FRAGMENT_PRELUDE + code + FRAGMENT_END)
                r = subprocess.run([os.environ.get('CC', 'cc'), '-std=gnu11', '-Wall', '-Wextra',
                                    '-Werror', '-Wno-unused', '-fsyntax-only'] + cflags + [src],
                                   capture_output=True, text=True)
                if r.returncode:
                    fail(line, 'the fragment does not compile:\n' + r.stderr)
            elif name:
                counts['program'] += 1
                programs[os.path.basename(name)] = line
                write(tmp, name, code, line, fail)
            else:
                fail(line, 'a %s block that is neither a program (/* NAME.c - ...), nor marked '
                     '<!-- doc-test: header --> or <!-- doc-test: fragment -->' % lang)

        commands = ' '.join(c for _, steps in sessions for c, _ in steps)
        for name, line in programs.items():
            if not re.search(r'(^|\s)%s(\s|$)' % re.escape(name), commands):
                fail(line, 'program %s is not built by any doc-test run block' % name)
        env = dict(os.environ)
        libdir = subprocess.run(['pkg-config', '--variable=libdir', 'tracevm'],
                                capture_output=True, text=True).stdout.strip()
        env['LD_LIBRARY_PATH'] = libdir
        for line, steps in sessions:
            counts['run'] += 1
            for k, (cmd, want) in enumerate(steps):
                run_cmd = as_built_here(cmd)
                if os.environ.get('DOC_NO_STATIC') and ' -static ' in cmd:
                    run_cmd = cmd.replace(' -static ', ' ').replace(
                        '--libs tracevm)', "--libs tracevm | sed 's/-ltracevm/-l:libtracevm.a/')")
                r = subprocess.run(['bash', '-c', run_cmd], cwd=tmp, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
                got = r.stdout.rstrip('\n').split('\n') if r.stdout else []
                while want and not want[-1].strip():
                    want = want[:-1]
                if COMPILERS.match('$ ' + cmd):
                    if r.returncode:
                        fail(line, '`%s` failed:\n%s' % (cmd, r.stdout))
                elif got != want:
                    fail(line, '`%s` printed (exit %d):\n%s\nthe guide shows:\n%s' %
                         (cmd, r.returncode, '\n'.join(got), '\n'.join(want)))
        if failures:
            print('\n'.join(failures))
            return 1
        print('ok: %d programs, %d header excerpts, %d fragments, %d .tasm files, %d sessions' %
              (counts['program'], counts['header'], counts['fragment'], counts['tasm'],
               counts['run']))
        return 0
    finally:
        shutil.rmtree(tmp)


def as_built_here(cmd):
    """cmd with the compiler CC or CXX names, and a program of the
    scratch directory run under TRACEVM_RUN (the module's docstring)."""
    m = COMPILERS.match('$ ' + cmd)
    if m and os.environ.get(COMPILER_VARS[m.group(1)]):
        return shlex.quote(os.environ[COMPILER_VARS[m.group(1)]]) + cmd[len(m.group(1)):]
    if cmd.startswith('./') and os.environ.get('TRACEVM_RUN'):
        return shlex.quote(os.environ['TRACEVM_RUN']) + ' ' + cmd
    return cmd


def write(tmp, name, code, line, fail):
    """Writes a block as tmp/basename(name); a file of the tree must match
    (a name with a directory, or an example's name)."""
    path = os.path.join(ROOT, name if '/' in name else os.path.join('examples', name))
    if os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            if f.read() != code:
                fail(line, 'the block differs from %s' % name)
    with open(os.path.join(tmp, os.path.basename(name)), 'w') as f:
        f.write(code)


if __name__ == '__main__':
    sys.exit(main())
