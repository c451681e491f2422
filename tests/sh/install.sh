#!/usr/bin/env bash
# `scons install` as the suite stages it in $BUILD/stage (the prefix is
# that directory; SConstruct): exactly the files of an installation, the
# header and man pages as in the tree, tracevm.pc's answers, the installed
# command running with the installed library (by its RUNPATH), and an
# embedding program outside the tree built with nothing but pkg-config,
# shared, static and from C++ (tests/outside/run.sh).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
build=$(dirname "$(dirname "$TRACEVM")")
stage=$(cd "$build/stage" && pwd -P) || fail "no $build/stage"
version=$(sed -n 's/^#define TVM_VERSION_STRING "\(.*\)"$/\1/p' include/tracevm.h)
abi=$(sed -n 's/^#define TVM_ABI \([0-9]*\)$/\1/p' include/tracevm.h)

want="bin/tracevm
include/tracevm.h
lib/libtracevm.a
lib/libtracevm.so -> libtracevm.so.$version
lib/libtracevm.so.$abi -> libtracevm.so.$version
lib/libtracevm.so.$version
lib/pkgconfig/tracevm.pc
share/man/man1/tracevm-attach.1
share/man/man1/tracevm-check.1
share/man/man1/tracevm-dis.1
share/man/man1/tracevm-run.1
share/man/man1/tracevm.1"
got=$(cd "$stage" && find . ! -type d | sed 's|^\./||' | LC_ALL=C sort |
      while read -r f; do [[ -L $f ]] && echo "$f -> $(readlink "$f")" || echo "$f"; done)
[[ "$got" == "$want" ]] || fail "installed files:
$got
expected
$want"
cmp -s include/tracevm.h "$stage/include/tracevm.h" || fail "installed header differs"
for m in tools/man/*.1; do
    cmp -s "$m" "$stage/share/man/man1/$(basename "$m")" || fail "installed $m differs"
done

export PKG_CONFIG_PATH=$stage/lib/pkgconfig
[[ "$(pkg-config --modversion tracevm)" == "$version" ]] || fail "pkg-config --modversion"
# (then the flags of the libraries it needs, Requires.private: pkg-config
# gives their -I too)
[[ "$(pkg-config --cflags tracevm)" == "-I$stage/include"* ]] ||
    fail "pkg-config --cflags: $(pkg-config --cflags tracevm)"
[[ "$(pkg-config --libs tracevm)" == "-L$stage/lib -ltracevm"* ]] ||
    fail "pkg-config --libs: $(pkg-config --libs tracevm)"
static=" $(pkg-config --static --libs tracevm) "
for l in -ltracevm -lurcu-qsbr -lurcu-common -lunwind -ldw -lelf -pthread -lm; do
    [[ "$static" == *" $l "* ]] || fail "pkg-config --static --libs lacks $l: $static"
done

# (Under emulation the installed command runs under the emulator too.)
installed() { env -u LD_LIBRARY_PATH ${TRACEVM_RUN:+"$TRACEVM_RUN"} "$stage/bin/tracevm" "$@"; }
out=$(installed --version) || fail "installed tracevm --version"
[[ "$out" == "tracevm $version" ]] || fail "installed tracevm --version: $out"
out=$(installed run examples/fib.tasm -e fib:fib 20 2>&1)
[[ "$out" == 6765 ]] || fail "installed tracevm run: $out"
deps=$(target_ldd "$stage/bin/tracevm")
[[ "$deps" == *"libtracevm.so.$abi => $stage/lib/libtracevm.so.$abi "* ]] ||
    fail "installed tracevm does not use the installed library: $deps"

# (A cross build's suite builds with the cross compilers and runs the
# programs under the emulator: tests/runner.py sets CC, CXX, TRACEVM_RUN
# and the pkg-config path.)
bash tests/outside/run.sh
