#!/usr/bin/env bash
# tools/setup.sh -- install the Debian packages tracevm needs.
#
#   tools/setup.sh           build and test dependencies
#   tools/setup.sh --bench   also the peers the benchmarks compare against
#                            (Lua 5.4, LuaJIT, Erlang/OTP) and valgrind
#   tools/setup.sh --viewers also Chromium (and npm if absent), for
#                            tools/check_speedscope.sh and tools/check_profile.sh
#   tools/setup.sh --profile-tools  also Go, whose `go tool pprof` reads the
#                            profiler's pprof files (tools/check_profile.sh)
#   tools/setup.sh --package also what building the Debian packages
#                            needs (dpkg-buildpackage, debhelper, lintian)
#
# Idempotent and quick: it asks dpkg what is missing and runs apt-get only
# for that.  Needs root (or sudo) only when something is missing.
set -euo pipefail

pkgs=(
    gcc g++ clang python3 pkg-config scons  # toolchains (CI builds with gcc and clang; g++: the C++ host test)
    libclang-rt-dev                   # libFuzzer (-fsanitize=fuzzer) for scons fuzz
    libatomic-ops-dev liburcu-dev     # atomics wrapper, QSBR thread progress
    libunwind-dev libelf-dev libdw-dev  # stack capture and symbolization
    libcriterion-dev                  # unit tests
    spin babeltrace2                  # protocol model, CTF checks
    gdb                               # fiber unwinding tests, the ABI check
    man-db                            # the man pages test (man -l)
    libexpat1                         # a library the symbolizer tests dlopen
    zlib1g-dev                        # gzip for the profiler's pprof output
)
for opt in "$@"; do
    case "$opt" in
    --bench) pkgs+=(lua5.4 luajit erlang-base valgrind hyperfine) ;;
    --viewers) pkgs+=(chromium); command -v npm >/dev/null || pkgs+=(npm) ;;
    --profile-tools) pkgs+=(golang-go) ;;
    --package) pkgs+=(dpkg-dev debhelper fakeroot lintian) ;;
    *) echo "usage: $0 [--bench] [--viewers] [--package] [--profile-tools]" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${pkgs[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
