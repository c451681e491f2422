"""tests/runner.py -- runs the whole test suite for `scons test`.

Kinds of tests:
  * unit tests: Criterion programs built from tests/unit/test_*.c; every
    Criterion test case counts once.
  * end-to-end programs: tests/e2e/*.tasm, run with `tracevm run`, with
    inline annotations (each on its own comment line):
        ; args: -e mod:fun 1 2     command-line arguments after the file
        ; exit: 1                  expected exit status (default 0)
        ; expect: TEXT             next expected line of stdout
        ; expect-stderr: TEXT      next expected line of stderr
    stdout and stderr must match exactly (all lines, in order).
  * bad inputs: tests/bad/NAME.tasm with NAME.expect holding the exact
    stderr of `tracevm check`; the exit status must be 1.
  * stress programs: tests/stress/stress_*.c, plain programs with threads
    (exit 0 passes); they are what `mode=tsan` is for.
  * shell tests: tests/sh/*.sh, run with TRACEVM and EMBED in the
    environment; exit status 0 passes.

The last line printed is "N passed, N failed".
"""
import glob
import os
import re
import shlex
import subprocess
import sys

TIMEOUT = 300
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, cwd=ROOT, **kw)
    except subprocess.TimeoutExpired:
        return None


class Tally:
    def __init__(self, flt):
        self.passed = 0
        self.failed = 0
        self.filter = flt

    def wanted(self, name):
        return not self.filter or self.filter in name

    def ok(self, name):
        self.passed += 1
        print('[ OK ]   ' + name)

    def fail(self, name, why):
        self.failed += 1
        print('[FAIL]   %s: %s' % (name, why))


def diff_text(want, got):
    wl, gl = want.splitlines(), got.splitlines()
    for i in range(max(len(wl), len(gl))):
        w = wl[i] if i < len(wl) else '<missing>'
        g = gl[i] if i < len(gl) else '<missing>'
        if w != g:
            return 'line %d: expected %r, got %r' % (i + 1, w, g)
    return 'output differs'


def unit_tests(t, progs, mode):
    if mode == 'tsan':
        # Criterion cannot set up its shared arena under ThreadSanitizer
        # ("Could not initialize inheritable arena"); the threaded code is
        # covered in tsan mode by the stress programs instead.
        print('[SKIP]   unit tests (Criterion does not start under ThreadSanitizer)')
        return
    for prog in progs:
        name = os.path.basename(prog)
        if not t.wanted(name):
            continue
        r = run([prog, '--jobs=1', '--short-filename'])
        if r is None:
            t.fail(name, 'timeout')
            continue
        out = r.stdout.decode(errors='replace') + r.stderr.decode(errors='replace')
        m = re.search(r'Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)', out)
        if not m:
            t.fail(name, 'no Criterion summary (exit %d)\n%s' % (r.returncode, out[-2000:]))
            continue
        tested, passing = int(m.group(1)), int(m.group(2))
        for line in out.splitlines():
            if '[FAIL]' in line or 'CRASH' in line or '[----]' in line:
                print('         ' + line)
        t.passed += passing
        t.failed += tested - passing
        status = 'OK' if tested == passing and r.returncode == 0 else 'FAIL'
        if status == 'FAIL' and tested == passing:
            t.failed += 1
        print('[%s]   %s (%d/%d cases)' % (' OK ' if status == 'OK' else 'FAIL', name,
                                         passing, tested))


def parse_annotations(path):
    args, exitcode, out, err = [], 0, [], []
    with open(path, encoding='utf-8') as f:
        for line in f:
            s = line.strip()
            if s.startswith('; args:'):
                args = shlex.split(s[len('; args:'):])
            elif s.startswith('; exit:'):
                exitcode = int(s[len('; exit:'):])
            elif s.startswith('; expect-stderr:'):
                err.append(line.split('; expect-stderr:', 1)[1].rstrip('\n')[1:])
            elif s.startswith('; expect:'):
                out.append(line.split('; expect:', 1)[1].rstrip('\n')[1:])
    return args, exitcode, out, err


def e2e_tests(t, tracevm):
    for path in sorted(glob.glob(os.path.join(ROOT, 'tests/e2e/*.tasm'))):
        name = 'e2e/' + os.path.basename(path)
        if not t.wanted(name):
            continue
        args, want_exit, want_out, want_err = parse_annotations(path)
        rel = os.path.relpath(path, ROOT)
        r = run([tracevm, 'run', rel] + args)
        if r is None:
            t.fail(name, 'timeout')
            continue
        out = r.stdout.decode(errors='replace')
        err = r.stderr.decode(errors='replace')
        if r.returncode != want_exit:
            t.fail(name, 'exit %d, expected %d\nstdout: %s\nstderr: %s' %
                   (r.returncode, want_exit, out[-1500:], err[-1500:]))
        elif out.splitlines() != want_out:
            t.fail(name, 'stdout ' + diff_text('\n'.join(want_out), out))
        elif err.splitlines() != want_err:
            t.fail(name, 'stderr ' + diff_text('\n'.join(want_err), err))
        else:
            t.ok(name)


def bad_tests(t, tracevm):
    for path in sorted(glob.glob(os.path.join(ROOT, 'tests/bad/*.tasm'))):
        name = 'bad/' + os.path.basename(path)
        if not t.wanted(name):
            continue
        try:
            with open(path[:-len('.tasm')] + '.expect', encoding='utf-8') as f:
                want = f.read()
        except OSError as e:
            t.fail(name, 'cannot read the expected output: %s' % e)
            continue
        rel = os.path.relpath(path, ROOT)
        r = run([tracevm, 'check', rel])
        if r is None:
            t.fail(name, 'timeout')
            continue
        err = r.stderr.decode(errors='replace')
        if r.returncode != 1:
            t.fail(name, 'exit %d, expected 1' % r.returncode)
        elif err != want:
            t.fail(name, diff_text(want, err))
        else:
            t.ok(name)


def stress_tests(t, progs):
    for prog in progs:
        name = 'stress/' + os.path.basename(prog)
        if not t.wanted(name):
            continue
        r = run([prog])
        if r is None:
            t.fail(name, 'timeout')
        elif r.returncode != 0:
            t.fail(name, 'exit %d\n%s' % (r.returncode, r.stderr.decode(errors='replace')[-3000:]))
        else:
            t.ok(name)


def shell_tests(t, tracevm, embed):
    env = dict(os.environ, TRACEVM=tracevm, EMBED=embed)
    for path in sorted(glob.glob(os.path.join(ROOT, 'tests/sh/*.sh'))):
        name = 'sh/' + os.path.basename(path)
        if not t.wanted(name):
            continue
        r = run(['bash', path], env=env)
        if r is None:
            t.fail(name, 'timeout')
        elif r.returncode != 0:
            t.fail(name, 'exit %d\n%s%s' % (r.returncode, r.stdout.decode(errors='replace')[-2000:],
                                            r.stderr.decode(errors='replace')[-2000:]))
        else:
            t.ok(name)


def main(env, units, stress, tracevm, embed):
    t = Tally(env['filter'])
    unit_tests(t, units, env['mode'])
    stress_tests(t, stress)
    e2e_tests(t, tracevm)
    bad_tests(t, tracevm)
    shell_tests(t, tracevm, embed)
    print('%d passed, %d failed' % (t.passed, t.failed))
    return 1 if t.failed else 0
