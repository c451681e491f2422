"""tests/runner.py -- runs the whole test suite for `scons test`.

Kinds of tests:
  * unit tests: Criterion programs built from tests/unit/*/test_*.c; every
    Criterion test case counts once (read from the program's JSON report).
    A case that cannot run in this build calls cr_skip_test and counts as
    skipped, by name.
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
    (exit 0 passes).
  * shell tests: tests/sh/*.sh, run with TRACEVM, EMBED, TRACEVM_MODE,
    TRACEVM_TEST_SKIP, CC and CXX in the environment; exit 0 passes,
    exit 77 means skipped (the last line of stdout says why), anything
    else fails.

Tools a test needs (babeltrace2, gdb, spin) must be installed: a missing
one fails the test unless the run names it in `skip=` (scons variable, a
comma-separated list), and then the test is skipped (tests/sh/lib.sh).

Under ThreadSanitizer every program runs with halt_on_error=1, so a race
report ends the program (and a Criterion case reports a crash) instead
of being printed by a program that then passes.

A cross build (scons ARCH=aarch64) runs every program of the build under
qemu-user: the runner puts the emulator (SConstruct's RUN_PREFIX) before
each command it runs, names it in TRACEVM_RUN (its absolute path) for the
programs and scripts, and gives the shell tests a tree of launchers in
place of the build's programs ($BUILD/qemu-run, the build's layout, each
program a script that runs it under the emulator; every other file a
link), so that "$TRACEVM", $EMBED and the programs beside them run as
they are.  The shell tests that build programs against the scratch
install (install.sh, symbols.sh, embedding_doc.sh) get the cross
compilers in CC and CXX and a pkg-config that reads the target's .pc
files (PKG_CONFIG_LIBDIR; natively CC=cc, CXX=g++ and the host's
pkg-config), and run what they build under TRACEVM_RUN.  A shell test
that cannot work under user-mode emulation skips itself by name with
the reason (tests/sh/lib.sh: not_emulated).
The programs run as many at a time as scons -j says (TEST_JOBS), all
kinds queued at once; their results are printed in order, so the log
reads the same whatever finished first.  One at a time the emulated
suite kept 2 vCPUs half busy for 10 minutes, and most native programs
use one thread too (the debug suite on 2 vCPUs: 181 s one at a time).
No test may depend on running alone: none asserts a time, and each works
in its own temporary directory.

Time limits: a program is killed after TIMEOUT seconds, or after TIMEOUT
plus the largest `.timeout = N` a Criterion program declares (Criterion
enforces a case's own limit; the runner's must never be the shorter one).

The last line printed is "N passed, N failed, N skipped"; a filter= that
matches no test is an error.  Before it, the suite's wall time, the sum
of each kind's programs' times (with a pool they overlap, so these add up
to more than the wall time), their CPU time and the five slowest
programs, so that the cost of a CI mode can be read off its log.
"""
import concurrent.futures
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = 300
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SANITIZER_REPORT = re.compile(r'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|'
                              r'ERROR: LeakSanitizer|runtime error: ')


TIMES = []  # (seconds, CPU seconds, program) of every run()
PREFIX = []  # the emulator a cross build's programs run under (main())
POOL = []    # [executor] when programs run several at a time (main())


class Timed(subprocess.Popen):
    """A Popen that keeps the CPU time (user + system) of its process and
    of every descendant the process waited for (a Criterion program's
    workers, a shell test's commands): reaped by wait4 instead of
    waitpid.  Wall time alone misleads on a shared machine: a program
    waiting for a CPU looks slow; its CPU time says what it costs.
    _try_wait is where CPython's Popen reaps its child (3.3 on); were it
    renamed, the CPU times would read 0 and nothing else would change."""
    cpu = 0.0

    def _try_wait(self, wait_flags):
        try:
            pid, sts, use = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return self.pid, 0
        if pid:
            self.cpu = use.ru_utime + use.ru_stime
        return pid, sts


def run(cmd, timeout=TIMEOUT, **kw):
    start = time.monotonic()
    p = Timed(([] if cmd[0] == 'bash' else PREFIX) + cmd, stdout=subprocess.PIPE,
              stderr=subprocess.PIPE, cwd=ROOT, **kw)
    try:
        with p:
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                return None
            return subprocess.CompletedProcess(p.args, p.returncode, out, err)
    finally:
        # a shell script, a .tasm file run or checked by tracevm, or a program
        prog = (cmd[1] if cmd[0] == 'bash' else
                cmd[2] if os.path.basename(cmd[0]) == 'tracevm' else cmd[0])
        TIMES.append((time.monotonic() - start, p.cpu, os.path.relpath(prog, ROOT)))


def ahead(jobs):
    """Starts each (key, fn) of jobs and returns an iterator of (key,
    fn()) in order.  With a pool (scons -j2 or more) the calls are
    submitted now and run several at a time, results still reported in
    order; else each runs when the iterator reaches it."""
    if not POOL:
        return ((key, fn()) for key, fn in jobs)
    futures = [(key, POOL[0].submit(fn)) for key, fn in jobs]
    return ((key, f.result()) for key, f in futures)


class Tally:
    def __init__(self, flt):
        self.passed = 0
        self.failed = 0
        self.skipped = []
        self.matched = 0
        self.filter = flt

    def wanted(self, name):
        if self.filter and self.filter not in name:
            return False
        self.matched += 1
        return True

    def ok(self, name):
        self.passed += 1
        print('[ OK ]   ' + name)

    def fail(self, name, why):
        self.failed += 1
        print('[FAIL]   %s: %s' % (name, why))

    def skip(self, name, why):
        self.skipped.append(name)
        print('[SKIP]   %s: %s' % (name, why))


def diff_text(want, got):
    wl, gl = want.splitlines(), got.splitlines()
    for i in range(max(len(wl), len(gl))):
        w = wl[i] if i < len(wl) else '<missing>'
        g = gl[i] if i < len(gl) else '<missing>'
        if w != g:
            return 'line %d: expected %r, got %r' % (i + 1, w, g)
    return 'output differs'


def declared_timeout(prog):
    """The largest `.timeout = N` in the program's Criterion source."""
    name = os.path.basename(prog)
    most = 0
    for src in glob.glob(os.path.join(ROOT, 'tests/unit/*', name + '.c')):
        with open(src, encoding='utf-8') as f:
            for m in re.finditer(r'\.timeout\s*=\s*(\d+)', f.read()):
                most = max(most, int(m.group(1)))
    return most


def unit_run(prog, env):
    """One Criterion program: (its run, its JSON report)."""
    with tempfile.NamedTemporaryFile(suffix='.json') as rep:
        r = run([prog, '--jobs=1', '--short-filename', '--json=' + rep.name], env=env,
                timeout=TIMEOUT + declared_timeout(prog))
        return r, open(rep.name, encoding='utf-8', errors='replace').read()


def unit_tests(t, progs, env):
    jobs = [(p, lambda p=p: unit_run(p, env)) for p in progs if t.wanted(os.path.basename(p))]
    results = ahead(jobs)
    yield
    for prog, (r, text) in results:
        name = os.path.basename(prog)
        if r is None:
            t.fail(name, 'timeout')
            continue
        out = r.stdout.decode(errors='replace') + r.stderr.decode(errors='replace')
        try:
            report = json.loads(text)
        except ValueError:
            t.fail(name, 'no Criterion report (exit %d)\n%s' % (r.returncode, out[-2000:]))
            continue
        passing = tested = 0
        for suite in report['test_suites']:
            for case in suite['tests']:
                cname = '%s: %s::%s' % (name, suite['name'], case['name'])
                msgs = '; '.join(case.get('messages', []))
                if case['status'] == 'PASSED':
                    passing += 1
                elif case['status'] == 'SKIPPED':
                    t.skip(cname, msgs)
                    continue
                else:
                    t.fail(cname, '%s: %s' % (case['status'].lower(), msgs))
                tested += 1
        t.passed += passing
        report = SANITIZER_REPORT.search(out)
        if report or (passing == tested and r.returncode != 0):
            # A sanitizer report, or a bad exit, that no case showed.
            t.fail(name, 'exit %d\n%s' % (r.returncode, excerpt(out)))
        good = passing == tested and r.returncode == 0 and not report
        print('[%s]   %s (%d/%d cases)' % (' OK ' if good else 'FAIL', name, passing, tested))


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


def e2e_tests(t, tracevm, env):
    jobs = []
    for path in sorted(glob.glob(os.path.join(ROOT, 'tests/e2e/*.tasm'))):
        if t.wanted('e2e/' + os.path.basename(path)):
            cmd = [tracevm, 'run', os.path.relpath(path, ROOT)] + parse_annotations(path)[0]
            jobs.append((path, lambda cmd=cmd: run(cmd, env=env)))
    results = ahead(jobs)
    yield
    for path, r in results:
        name = 'e2e/' + os.path.basename(path)
        _, want_exit, want_out, want_err = parse_annotations(path)
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


def bad_tests(t, tracevm, env):
    paths = [p for p in sorted(glob.glob(os.path.join(ROOT, 'tests/bad/*.tasm')))
             if t.wanted('bad/' + os.path.basename(p))]
    jobs = [(p, lambda p=p: run([tracevm, 'check', os.path.relpath(p, ROOT)], env=env))
            for p in paths]
    results = ahead(jobs)
    yield
    for path, r in results:
        name = 'bad/' + os.path.basename(path)
        try:
            with open(path[:-len('.tasm')] + '.expect', encoding='utf-8') as f:
                want = f.read()
        except OSError as e:
            t.fail(name, 'cannot read the expected output: %s' % e)
            continue
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


def excerpt(text, n=3000):
    """The end of a failed program's output, and its beginning too when
    there is more: the line that says what failed comes first, and a
    sanitizer's leak report after it (what an early return leaves) can
    run to many kilobytes."""
    if len(text) <= n:
        return text
    return '%s\n[... %d bytes ...]\n%s' % (text[:n // 3], len(text) - n, text[-(2 * n // 3):])


def stress_tests(t, progs, env):
    jobs = [(p, lambda p=p: run([p], env=env)) for p in progs
            if t.wanted('stress/' + os.path.basename(p))]
    results = ahead(jobs)
    yield
    for prog, r in results:
        name = 'stress/' + os.path.basename(prog)
        if r is None:
            t.fail(name, 'timeout')
        elif r.returncode != 0:
            t.fail(name, 'exit %d\n%s' % (r.returncode, excerpt(r.stderr.decode(errors='replace'))))
        else:
            t.ok(name)


# Files of tests/sh/ that the tests source, not tests themselves.
SHELL_LIBRARIES = ('lib.sh',)


def shell_tests(t, env):
    jobs = [(p, lambda p=p: run(['bash', p], env=env))
            for p in sorted(glob.glob(os.path.join(ROOT, 'tests/sh/*.sh')))
            if os.path.basename(p) not in SHELL_LIBRARIES and t.wanted('sh/' + os.path.basename(p))]
    results = ahead(jobs)
    yield
    for path, r in results:
        name = 'sh/' + os.path.basename(path)
        out = r.stdout.decode(errors='replace') if r else ''
        if r is None:
            t.fail(name, 'timeout')
        elif r.returncode == 77:
            lines = out.strip().splitlines()
            t.skip(name, lines[-1] if lines else 'no reason given')
        elif r.returncode != 0:
            t.fail(name, 'exit %d\n%s%s' % (r.returncode, out[-2000:],
                                            r.stderr.decode(errors='replace')[-2000:]))
        else:
            t.ok(name)


def kind_of(prog):
    """The kind of test a program of TIMES (a path relative to ROOT) is."""
    if prog.startswith('tests/sh/'):
        return 'shell'
    if prog.startswith('tests/e2e/'):
        return 'e2e'
    if prog.startswith('tests/bad/'):
        return 'bad'
    return 'stress' if os.path.basename(prog).startswith('stress_') else 'unit'


# The order in which the kinds' programs are queued (main()): the stress
# programs and shell tests hold the suite's longest runs, the e2e and bad
# inputs are many short ones.
SUBMIT_ORDER = ('stress', 'shell', 'unit', 'e2e', 'bad')


# The folders of a build whose programs the shell tests run by path.
PROGRAM_DIRS = ('tools', 'tests', 'examples', 'fuzz', 'bench')


def launchers(build, emu):
    """$BUILD/qemu-run: the build's tree, each program of PROGRAM_DIRS a
    script `exec EMU PROGRAM "$@"` (tests/sh/lib.sh reads it back), every
    other file and folder a link to the build's."""
    top = os.path.join(build, 'qemu-run')
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    for name in os.listdir(build):
        src, dst = os.path.join(build, name), os.path.join(top, name)
        if name == 'qemu-run':
            continue
        if name not in PROGRAM_DIRS or not os.path.isdir(src):
            os.symlink(src, dst)
            continue
        os.makedirs(dst)
        for f in os.listdir(src):
            s, d = os.path.join(src, f), os.path.join(dst, f)
            if os.path.isfile(s) and not os.path.islink(s) and os.access(s, os.X_OK):
                with open(s, 'rb') as fh:
                    elf = fh.read(4) == b'\x7fELF'
                if elf:
                    with open(d, 'w') as fh:
                        fh.write('#!/bin/sh\nexec %s %s "$@"\n' % (emu, s))
                    os.chmod(d, 0o755)
                    continue
            os.symlink(s, d)
    return top


def cross_tools(env):
    """What the shell tests that build programs against the scratch
    install use in a cross build: the cross compilers (CC, CXX; natively
    cc and g++) and a pkg-config that reads the target's .pc files (its
    multiarch directory, Debian's layout, and the architecture-independent
    one) in place of the host's; the tests add the install's."""
    triplet = env['CROSS'].rstrip('-')
    return {'CC': env['CC'], 'CXX': env['CROSS'] + 'g++',
            'PKG_CONFIG_LIBDIR': '/usr/lib/%s/pkgconfig:/usr/share/pkgconfig' % triplet}


def own_python(build):
    """A directory whose python3 is the interpreter running this file,
    for the front of the tests' PATH.  The suite starts python3 about 140
    times (the shell tests' checks); where python3 on PATH is a version
    manager's shim (pyenv's is a shell script that runs pyenv, which then
    execs the interpreter) every start costs 0.4 s of CPU instead of 0.04,
    a tenth of the debug suite's time.  This interpreter is the one the
    build runs under (scons's), which is the system's and sees the
    system's Python packages."""
    if not sys.executable:
        return ''
    bin_dir = os.path.join(build, 'tests', 'python-bin')
    link = os.path.join(bin_dir, 'python3')
    os.makedirs(bin_dir, exist_ok=True)
    if not os.path.islink(link) or os.readlink(link) != sys.executable:
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(sys.executable, link)
    return bin_dir


def main(env, units, stress, tracevm, embed):
    t = Tally(env['filter'])
    build = os.path.dirname(os.path.dirname(tracevm))
    penv = dict(os.environ, TRACEVM=tracevm, EMBED=embed, TRACEVM_MODE=env['mode'],
                TRACEVM_TEST_SKIP=env['skip'],
                PATH=os.pathsep.join(filter(None, [own_python(build), os.environ.get('PATH')])))
    if env['mode'] == 'tsan':
        # atexit_sleep_ms=0: ThreadSanitizer otherwise sleeps a second in
        # every program's exit, to catch threads racing with it; the VM
        # joins its threads before it returns, and the suite starts a few
        # hundred programs (that second was most of the e2e tests' time).
        # Set before the shell tests' environment is copied from penv.
        penv['TSAN_OPTIONS'] = ('halt_on_error=1 atexit_sleep_ms=0 ' +
                                os.environ.get('TSAN_OPTIONS', '')).strip()
    if env['TEST_JOBS'] > 1:
        POOL.append(concurrent.futures.ThreadPoolExecutor(env['TEST_JOBS']))
    if env['RUN_PREFIX']:
        emu = shutil.which(env['RUN_PREFIX'][0])
        if not emu:
            print('%s not found: tools/setup.sh --cross %s installs it' %
                  (env['RUN_PREFIX'][0], env['ARCH']))
            return 1
        PREFIX[:] = [emu] + env['RUN_PREFIX'][1:]
        penv['TRACEVM_RUN'] = emu
        top = launchers(build, emu)
        shell_env = dict(penv, TRACEVM=os.path.join(top, os.path.relpath(tracevm, build)),
                         EMBED=os.path.join(top, os.path.relpath(embed, build)),
                         **cross_tools(env))
        if not shutil.which(shell_env['CXX']):
            print('%s not found: tools/setup.sh --cross %s installs it' %
                  (shell_env['CXX'], env['ARCH']))
            return 1
    else:
        shell_env = dict(penv, CC='cc', CXX='g++')
    # Each kind is a generator: its first step starts its programs, the
    # rest reports them.  With a pool every kind's programs are queued
    # before any is reported, the kinds with the longest programs first
    # (SUBMIT_ORDER), so that the many short ones fill the end of the run
    # instead of one long program running alone; the log still reads
    # unit, stress, e2e, bad, shell.
    steps = [('unit', unit_tests(t, units, penv)), ('stress', stress_tests(t, stress, penv)),
             ('e2e', e2e_tests(t, tracevm, penv)), ('bad', bad_tests(t, tracevm, penv)),
             ('shell', shell_tests(t, shell_env))]
    for kind in SUBMIT_ORDER:
        next(dict(steps)[kind])
    start = time.monotonic()
    for kind, step in steps:
        for _ in step:
            pass
    wall = time.monotonic() - start
    if POOL:
        POOL.pop().shutdown()
    print('time: %.0f s; programs: %s; CPU %.0f s; slowest: %s' % (
        wall, ', '.join('%s %.0f s' % (k, sum(s for s, _, p in TIMES if kind_of(p) == k))
                        for k, _ in steps),
        sum(c for _, c, _ in TIMES),
        ', '.join('%s %.0f s' % (p, s) for s, _, p in sorted(TIMES, reverse=True)[:5])))
    # Every program's wall and CPU time, slowest first, when TEST_TIMES
    # names a file.
    if os.environ.get('TEST_TIMES'):
        with open(os.environ['TEST_TIMES'], 'w') as f:
            for s, c, p in sorted(TIMES, reverse=True):
                f.write('%.1f %.1f %s\n' % (s, c, p))
    if t.filter and not t.matched:
        print('filter=%s matches no test' % t.filter)
        t.failed += 1
    if t.skipped:
        print('skipped: ' + ', '.join(t.skipped))
    print('%d passed, %d failed, %d skipped' % (t.passed, t.failed, len(t.skipped)))
    return 1 if t.failed else 0
