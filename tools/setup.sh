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
#   tools/setup.sh --cross aarch64  also the aarch64 cross build and its
#                            tests: the cross compilers (C, and C++ for
#                            the tests that build host programs against
#                            the install), qemu-user, and the
#                            arm64 builds of the libraries (multiarch: this
#                            adds dpkg's arm64 architecture).  Criterion's
#                            arm64 library cannot be installed beside the
#                            amd64 one (libnanomsg5 is not Multi-Arch:
#                            same): it and libnanomsg5 are unpacked into
#                            $CROSS_ROOT (/usr/local/lib/tracevm-cross/
#                            aarch64), which the cross build links from.
#                            Headers are the host's (atomic_ops.h and
#                            Criterion's are the same for every
#                            architecture).
#
# Idempotent and quick: it asks dpkg what is missing and runs apt-get only
# for that.  Needs root (or sudo) only when something is missing.
set -euo pipefail

pkgs=(
    gcc g++ clang python3 pkg-config scons  # toolchains (CI builds with gcc and clang; g++: the C++ host test)
    libclang-rt-dev                   # libFuzzer (-fsanitize=fuzzer) for scons fuzz
    lld                               # links the test programs (SConstruct: RUN_LINKFLAGS)
    libatomic-ops-dev liburcu-dev     # atomics wrapper, QSBR thread progress
    libunwind-dev libelf-dev libdw-dev  # stack capture and symbolization
    libbz2-dev                        # libdw's static link (tests/outside: cc -static)
    libcriterion-dev                  # unit tests
    spin babeltrace2                  # protocol model, CTF checks
    gdb                               # fiber unwinding tests, the ABI check
    man-db                            # the man pages test (man -l)
    libexpat1                         # a library the symbolizer tests dlopen
    zlib1g-dev                        # gzip for the profiler's pprof output
)
cross=""
while (($#)); do
    opt=$1; shift
    case "$opt" in
    --cross)
        cross=${1:-}; shift || true
        [[ "$cross" == aarch64 ]] || { echo "$0: --cross takes aarch64 (the one port)" >&2; exit 2; }
        # The libraries' arm64 builds, for the cross link and for qemu-aarch64
        # (libc6:arm64 puts the arm64 dynamic loader where the binaries name
        # it, so qemu runs them without -L); gdb-multiarch reads aarch64 cores;
        # g++ and libstdc++6:arm64 (which runs what it builds): tests/outside's
        # C++ host and symbols.sh's C++ link; libbz2-dev: tests/outside's
        # static link.
        pkgs+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user gdb-multiarch libc6:arm64
               liburcu-dev:arm64 libunwind-dev:arm64 libelf-dev:arm64
               libdw-dev:arm64 zlib1g-dev:arm64 libbz2-dev:arm64 libstdc++6:arm64
               libexpat1:arm64 libgit2-1.5:arm64 libffi8:arm64) ;;
    --bench) pkgs+=(lua5.4 luajit erlang-base valgrind hyperfine) ;;
    --viewers) pkgs+=(chromium); command -v npm >/dev/null || pkgs+=(npm) ;;
    --profile-tools) pkgs+=(golang-go) ;;
    --package) pkgs+=(dpkg-dev debhelper fakeroot lintian) ;;
    *) echo "usage: $0 [--bench] [--viewers] [--package] [--profile-tools] [--cross aarch64]" >&2
       exit 2 ;;
    esac
done

# Criterion for arm64, unpacked beside the system (see --cross above).
CROSS_ROOT=${CROSS_ROOT:-/usr/local/lib/tracevm-cross/aarch64}
cross_side() {
    local lib=$CROSS_ROOT/usr/lib/aarch64-linux-gnu
    [[ -e $lib/libcriterion.so && -e $lib/libnanomsg.so.5 ]] && return 0
    echo "setup: unpacking libcriterion3:arm64 and libnanomsg5:arm64 into $CROSS_ROOT"
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && chmod 755 . && apt-get download -qq libcriterion3:arm64 libnanomsg5:arm64)
    $sudo mkdir -p "$CROSS_ROOT"
    for deb in "$tmp"/*.deb; do
        $sudo dpkg-deb -x "$deb" "$CROSS_ROOT"
    done
    rm -rf "$tmp"
    $sudo ln -sf libcriterion.so.3 "$lib/libcriterion.so"
}

# A name without an architecture means the native one: once arm64 is
# added, a bare name of a Multi-Arch: same package matches both.
native=$(dpkg --print-architecture)
missing=()
for p in "${pkgs[@]}"; do
    q=$p
    [[ $p == *:* ]] || q="$p:$native"
    status=$(dpkg-query -W -f='${Status}' "$q" 2>/dev/null ||
             dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
sudo=""
if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
fi
if ((${#missing[@]} == 0)); then
    if [[ -n "$cross" ]]; then cross_side; fi
    exit 0
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if [[ -n "$cross" ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
fi
$sudo apt-get update -qq
# --no-remove: an arm64 package that is not Multi-Arch: same would replace
# the host's (libcriterion-dev did, and every native build broke): never.
$sudo apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}" >/dev/null
if [[ -n "$cross" ]]; then cross_side; fi
