#!/usr/bin/env bash
# debian/ agrees with the tree: the changelog's version is the header's,
# the runtime package is named after the SONAME (libtracevm<TVM_ABI>) and
# installs it, and libtracevm-dev depends on it and on the -dev package of
# every library tracevm.pc requires.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
version=$(sed -n 's/^#define TVM_VERSION_STRING "\(.*\)"$/\1/p' include/tracevm.h)
abi=$(sed -n 's/^#define TVM_ABI \([0-9]*\)$/\1/p' include/tracevm.h)
top=$(head -1 debian/changelog)
[[ "$top" == "tracevm ($version) "* ]] || fail "debian/changelog starts '$top', not version $version"
grep -qx "Package: libtracevm$abi" debian/control || fail "no package libtracevm$abi in debian/control"
[[ "$(cat "debian/libtracevm$abi.install" 2>/dev/null)" == "usr/lib/*/libtracevm.so.*" ]] ||
    fail "debian/libtracevm$abi.install does not install the shared library"
dev=$(sed -n '/^Package: libtracevm-dev$/,/^$/p' debian/control)
[[ "$dev" == *"libtracevm$abi (= \${binary:Version})"* ]] || fail "libtracevm-dev: no libtracevm$abi"
requires=$(sed -n 's/^Requires.private: //p' api/tracevm.pc.in)
[[ -n "$requires" ]] || fail "api/tracevm.pc.in has no Requires.private"
for r in $requires; do
    case $r in
    liburcu-*) p=liburcu-dev ;;
    *) p=$r-dev ;;
    esac
    [[ "$dev" == *" $p,"* || "$dev" == *" $p"$'\n'* ]] || fail "libtracevm-dev does not depend on $p (for $r)"
done
echo ok
