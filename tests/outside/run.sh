#!/usr/bin/env bash
# tests/outside/run.sh - builds and runs tests/outside/host.c and host.cpp
# in a scratch directory outside the tree with nothing but what
# `pkg-config tracevm` gives (set PKG_CONFIG_PATH for an install outside
# the system's paths): C linked with the shared library, C linked
# statically (`pkg-config --static`, `cc -static`), and C++ (g++).  Run
# by tests/sh/install.sh on the test suite's scratch install and by
# .ci/run on the installed Debian packages.  Prints the commands it runs;
# exits 1 on the first difference.
#
# CC and CXX name the compilers (default cc and g++), TRACEVM_RUN an
# emulator that runs the programs built (none by default): a cross
# build's suite (tests/runner.py) sets them to the cross compilers and
# qemu, and points pkg-config at the target's .pc files.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/host.c" "$here/host.cpp" "$tmp/"
cd "$tmp" || exit 1

want_c='fib(20) = 6765
fib(3) = 2 in a process, 5 traced calls
exception error: badarith
  in fib:fib/1 (fib.tasm:5)'
want_cpp='TVM_OK <<"hello, cpp">>'

pkg-config --exists tracevm || fail "pkg-config finds no tracevm (PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-})"
libdir=$(pkg-config --variable=libdir tracevm)

# step NAME WANT COMMAND...: compiles with COMMAND, runs ./NAME, compares.
step() {
    local name=$1 want=$2
    shift 2
    echo "\$ $*"
    "$@" > "$tmp/cc.out" 2>&1 || fail "$name does not build:
$(cat "$tmp/cc.out")"
    local got
    got=$(LD_LIBRARY_PATH=$libdir ${TRACEVM_RUN:+"$TRACEVM_RUN"} "./$name" 2>&1) || fail "./$name exited $?: $got"
    [[ "$got" == "$want" ]] || fail "./$name printed
$got
expected
$want"
}

step host "$want_c" "${CC:-cc}" -std=c11 -Wall -Wextra -Werror -pedantic host.c \
    $(pkg-config --cflags --libs tracevm) -o host
[[ "$(readelf -d host)" == *"Shared library: [libtracevm.so."* ]] ||
    fail "host is not linked with libtracevm.so"

if [[ "$(pkg-config --libs tracevm)" == *-fsanitize* ]]; then
    # A sanitizer's runtime cannot be linked statically: the archive alone.
    step host_static "$want_c" "${CC:-cc}" -std=c11 host.c \
        $(pkg-config --static --cflags --libs tracevm | sed 's/-ltracevm/-l:libtracevm.a/') \
        -o host_static
    [[ "$(readelf -d host_static)" != *"[libtracevm.so."* ]] || fail "host_static needs libtracevm.so"
else
    step host_static "$want_c" "${CC:-cc}" -std=c11 -static host.c \
        $(pkg-config --static --cflags --libs tracevm) -o host_static
    [[ "$(readelf -d host_static 2>&1)" != *NEEDED* ]] || fail "host_static is not static"
fi

step host_cpp "$want_cpp" "${CXX:-g++}" -std=c++11 -Wall -Wextra -Werror -pedantic host.cpp \
    $(pkg-config --cflags --libs tracevm) -o host_cpp
echo "ok: shared, static and C++ hosts"
