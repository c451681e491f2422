#!/usr/bin/env bash
# libtracevm.so exports exactly the functions include/tracevm.h declares,
# as the compiler reads the header (gcc -aux-info), and nothing else: no
# function of a layer, no data (-fvisibility=hidden, the header's
# visibility pragma, api/libtracevm.map).  Its SONAME is libtracevm.so.N
# with N the header's TVM_ABI, it resolves every symbol it needs from the
# libraries it names, and a C++ program links with every function.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
build=$(dirname "$(dirname "$TRACEVM")")
so=$build/lib/libtracevm.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

gcc -fsyntax-only -aux-info "$tmp/aux" -x c include/tracevm.h || fail "the header does not compile"
sed -n 's|^/\* include/tracevm.h:[0-9]*:NC \*/ extern .*[ *]\(tvm_[a-z0-9_]*\) (.*|\1|p' "$tmp/aux" |
    sort > "$tmp/declared"
(( $(wc -l < "$tmp/declared") >= 60 )) || fail "read only $(wc -l < "$tmp/declared") declarations"
[[ $(grep -c 'include/tracevm.h' "$tmp/aux") == $(wc -l < "$tmp/declared") ]] ||
    fail "a declaration the test cannot read: $(grep 'include/tracevm.h' "$tmp/aux" | grep -v ' (')"

nm -D --defined-only "$so" > "$tmp/nm" || fail "nm $so"
awk '{print $3}' "$tmp/nm" | sort > "$tmp/exported"
diff -u "$tmp/declared" "$tmp/exported" > "$tmp/diff" ||
    fail "exported symbols differ from the header's functions (- declared only, + exported only):
$(tail -n +3 "$tmp/diff")"
others=$(awk '$2 != "T"' "$tmp/nm")
[[ -z "$others" ]] || fail "exported symbols that are not functions:
$others"

abi=$(sed -n 's/^#define TVM_ABI \([0-9]*\)$/\1/p' include/tracevm.h)
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ "$soname" == "libtracevm.so.$abi" ]] || fail "SONAME '$soname', expected libtracevm.so.$abi"
[[ "$(readlink "$build/lib/libtracevm.so.$abi")" == libtracevm.so.* ]] ||
    fail "no $build/lib/libtracevm.so.$abi link"

# The static archive defines the same API (and every layer's functions,
# hidden, which tests and benchmarks link).
nm --defined-only -g "$build/lib/libtracevm.a" 2>/dev/null | awk 'NF == 3 && $3 ~ /^tvm_/ {print $3}' |
    sort > "$tmp/static"
diff -u "$tmp/declared" "$tmp/static" > "$tmp/diff" || fail "libtracevm.a: $(tail -n +3 "$tmp/diff")"

# (A cross build's suite: the target's loader under the emulator, and the
# cross g++, which the runner names in CXX.)
# A sanitized library built by clang is the exception: clang links its
# sanitizer runtimes into programs only, never into a shared library, so
# the program that loads the library brings them (SConstruct drops -z defs
# for it); those symbols alone may stay unresolved there, and the C++
# program below is linked by clang++ with the same sanitizers.
cxx=("${CXX:-g++}")
target_ldd -r "$so" > "$tmp/ldd" 2>&1 || fail "ldd -r: $(cat "$tmp/ldd")"
if [[ "$build" == *-clang && "${TRACEVM_MODE:-}" == @(asan|tsan) ]]; then
    cxx=(clang++ -fsanitize=$([[ $TRACEVM_MODE == asan ]] && echo address,undefined || echo thread))
    grep -v 'undefined symbol: __\(asan\|ubsan\|tsan\|sanitizer\)_' "$tmp/ldd" > "$tmp/ldd.app"
    mv "$tmp/ldd.app" "$tmp/ldd"
fi
! grep -q 'not found\|undefined symbol' "$tmp/ldd" || fail "unresolved: $(cat "$tmp/ldd")"
# A C++ program that takes the address of every function links with the
# shared library: the header declares them all with C linkage (inside its
# extern "C").
{
    echo '#include "include/tracevm.h"'
    echo 'static void (*const fns[])() = {'
    sed 's/.*/    reinterpret_cast<void (*)()>(\&&),/' "$tmp/declared"
    echo '};'
    echo 'int main() { return fns[0] == nullptr; }'
} > "$tmp/all.cpp"
"${cxx[@]}" -I. "$tmp/all.cpp" -L"$build/lib" -ltracevm -o "$tmp/all" 2> "$tmp/g++.err" ||
    fail "a C++ program cannot link every function: $(grep -o 'undefined reference to [^ ]*' "$tmp/g++.err" | sort -u | head -5)"
echo "ok: $(wc -l < "$tmp/declared") functions"
