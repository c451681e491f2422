#!/usr/bin/env bash
# tools/package.sh [OUTDIR] - builds the Debian packages (libtracevm0,
# libtracevm-dev, tracevm; debian/) from the tree's files as they are in
# the work tree (tracked and new ones, not ignored ones) in a scratch copy,
# with `dpkg-buildpackage -us -uc -b`; checks them with lintian, whose
# errors fail the build (its other findings are printed); and copies the
# .debs and the build's log into OUTDIR (default build/deb).  A copy, so that the packages are
# built from the sources alone and the tree's build/ is left alone.
# `tools/setup.sh --package` installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/deb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/tracevm
mkdir -p "$src" "$out"
git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
    [[ -e "$f" ]] && cp --parents -P "$f" "$src/"
done
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)") > "$tmp/build.log" 2>&1 || {
    tail -60 "$tmp/build.log"
    echo "package: dpkg-buildpackage failed (log above)" >&2
    exit 1
}
lintian --fail-on error --display-info "$tmp"/*.changes || {
    echo "package: lintian found errors" >&2
    exit 1
}
rm -f "$out"/*.deb
cp "$tmp"/*.deb "$tmp/build.log" "$out"/
ls "$out"
