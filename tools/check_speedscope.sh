#!/usr/bin/env bash
# tools/check_speedscope.sh TRACE.json [SHOT.png] -- load a Chrome trace
# JSON written by tracevm into speedscope, in headless Chromium, and report
# what speedscope made of it: one profile per lane, and every warning its
# importer printed (an E it could not pair with a B, a frame still open at
# the end).  Exit 0 when the trace imported without a warning, 1 when it
# did not import or warned, 2 when Chromium or npm is missing.
#
# Needs `tools/setup.sh --viewers` (chromium, npm).  speedscope itself is
# fetched once from the npm registry into build/speedscope.  SHOT.png, if
# given, gets a screenshot of the first lane.  Not part of `scons test`
# (it needs a browser and the npm registry); tests/sh/trace_chrome.sh
# checks the property speedscope depends on (each E names its B) offline.
set -uo pipefail
[[ $# -ge 1 && -f "$1" ]] || { echo "usage: $0 TRACE.json [SHOT.png]" >&2; exit 2; }
trace=$(realpath "$1")
shot=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
for tool in chromium npm python3; do
    command -v "$tool" >/dev/null || { echo "$0: $tool missing (tools/setup.sh --viewers)" >&2; exit 2; }
done

cache="$root/build/speedscope"
index="$cache/package/dist/release/index.html"
if [[ ! -f "$index" ]]; then
    mkdir -p "$cache"
    (cd "$cache" && npm pack --silent speedscope@1.25.0 >/dev/null && tar xzf speedscope-1.25.0.tgz) ||
        { echo "$0: cannot fetch speedscope from npm" >&2; exit 2; }
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# speedscope's own command-line tool loads a file the same way: a script
# calling speedscope.loadFileFromBase64, named in the URL's hash.
python3 - "$trace" "$tmp/load.js" <<'EOF'
import base64, json, os, sys
data = base64.b64encode(open(sys.argv[1], 'rb').read()).decode()
with open(sys.argv[2], 'w') as f:
    f.write('speedscope.loadFileFromBase64(%s, %s)'
            % (json.dumps(os.path.basename(sys.argv[1])), json.dumps(data)))
EOF

browse() {  # browse MODE-ARGS...: one headless run; console lines on stderr
    timeout 120 chromium --headless --no-sandbox --use-angle=swiftshader --enable-unsafe-swiftshader \
        --disable-quic --no-first-run --disable-background-networking --disable-component-update \
        --disable-sync --user-data-dir="$tmp/profile" --allow-file-access-from-files \
        --enable-logging=stderr --v=0 --window-size=1400,800 --virtual-time-budget=10000 \
        "$@" "file://$index#localProfilePath=$tmp/load.js"
}
browse --dump-dom >"$tmp/dom.html" 2>"$tmp/console.txt"
[[ -n "$shot" ]] && browse --screenshot="$(realpath -m "$shot")" >/dev/null 2>&1

grep -q 'Importing as Trace Event Format' "$tmp/console.txt" ||
    { echo "speedscope did not import $1 as a Chrome trace"; grep CONSOLE "$tmp/console.txt"; exit 1; }
lanes=$(grep -o '([0-9]*/[0-9]*)' "$tmp/dom.html" | head -1 | sed 's|.*/||; s|)||')
warnings=$(grep 'CONSOLE' "$tmp/console.txt" |
           grep -E 'Tried to end|still open|Unexpected|Empty profile|rror' | sed 's/^.*CONSOLE:[0-9]*\] //')
nwarn=$(grep -c . <<<"$warnings")
echo "speedscope 1.25.0: ${lanes:-1} profile(s), $nwarn warning(s)"
[[ $nwarn -eq 0 ]] || { head -20 <<<"$warnings"; exit 1; }
exit 0
