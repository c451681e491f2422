#!/usr/bin/env bash
# tools/check_profile.sh [--expect NAME] FILE... -- open profiles written by
# tracevm (tracevm run --profile, tracevm attach ... profile,
# tvm_profile_write) in the tools they are written for, and say what each
# made of them:
#   .folded, .json, .pb.gz   imported by speedscope 1.25.0 in headless
#                            Chromium: it must announce the right importer
#                            (collapsed stacks, speedscope JSON, pprof) and
#                            print no error;
#   .pb.gz                   also `go tool pprof -top` (Debian's golang-go):
#                            exit 0, and NAME among the functions;
#   .svg                     the flame graph in headless Chromium, driven by
#                            tools/check_profile.html: hovering a frame named
#                            NAME shows its name in the details line, a click
#                            zooms it to the full width and hides what is not
#                            inside it, searching for NAME colours frames and
#                            reports a share, Reset Zoom restores the widths.
# Exit 0 when every file passed, 1 when one did not, 2 when a tool is
# missing (tools/setup.sh --viewers --profile-tools installs Chromium, npm
# and golang-go; speedscope itself is fetched once from the npm registry
# into build/speedscope, as tools/check_speedscope.sh does).
set -uo pipefail
expect=""
if [[ ${1:-} == --expect ]]; then
    expect=$2
    shift 2
fi
[[ $# -ge 1 ]] || { echo "usage: $0 [--expect NAME] FILE..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
for tool in chromium npm python3 go; do
    command -v "$tool" >/dev/null ||
        { echo "$0: $tool missing (tools/setup.sh --viewers --profile-tools)" >&2; exit 2; }
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
export HOME="$tmp" GOCACHE="$tmp/gocache" GOPATH="$tmp/go"   # go tool pprof's own files

browse() {  # browse URL: the DOM after the page ran, console lines in $tmp/console.txt
    timeout 120 chromium --headless --no-sandbox --use-angle=swiftshader --enable-unsafe-swiftshader \
        --disable-quic --no-first-run --disable-background-networking --disable-component-update \
        --disable-sync --user-data-dir="$tmp/profile" --allow-file-access-from-files \
        --enable-logging=stderr --v=0 --window-size=1400,900 --virtual-time-budget=10000 \
        --dump-dom "$1" 2>"$tmp/console.txt"
}

speedscope() {  # speedscope FILE IMPORTER
    python3 - "$1" "$tmp/load.js" <<'EOF'
import base64, json, os, sys
data = base64.b64encode(open(sys.argv[1], 'rb').read()).decode()
with open(sys.argv[2], 'w') as f:
    f.write('speedscope.loadFileFromBase64(%s, %s)'
            % (json.dumps(os.path.basename(sys.argv[1])), json.dumps(data)))
EOF
    browse "file://$index#localProfilePath=$tmp/load.js" >/dev/null
    if ! grep -q "Importing as $2" "$tmp/console.txt"; then
        echo "$1: speedscope did not import it as $2"
        grep CONSOLE "$tmp/console.txt" | head -5
        return 1
    fi
    errors=$(grep CONSOLE "$tmp/console.txt" | grep -iE 'rror|Unexpected|Empty profile|failed')
    if [[ -n "$errors" ]]; then
        echo "$1: speedscope: $errors"
        return 1
    fi
    echo "$1: speedscope imported it as $2"
}

pprof_top() {  # pprof_top FILE
    if ! go tool pprof -top "$1" >"$tmp/top.txt" 2>&1; then
        echo "$1: go tool pprof -top failed:"; head -5 "$tmp/top.txt"; return 1
    fi
    if ! grep -q 'Showing nodes accounting for' "$tmp/top.txt" ||
       { [[ -n "$expect" ]] && ! grep -qF -- "$expect" "$tmp/top.txt"; }; then
        echo "$1: go tool pprof -top does not show ${expect:-the nodes}:"; head -12 "$tmp/top.txt"
        return 1
    fi
    echo "$1: go tool pprof -top: $(grep -c . "$tmp/top.txt") lines, $(grep 'Showing nodes' "$tmp/top.txt" | sed 's/^ *//')"
}

svg() {  # svg FILE
    cp "$1" "$tmp/flame.svg"
    sed "s|@EXPECT@|${expect//|/\\|}|" "$root/tools/check_profile.html" >"$tmp/check.html"
    browse "file://$tmp/check.html" >"$tmp/dom.html"
    result=$(python3 - "$tmp/dom.html" <<'EOF'
import html, re, sys
m = re.search(r'<pre id="result">(.*?)</pre>', open(sys.argv[1]).read(), re.S)
print(html.unescape(m.group(1)) if m else 'no result')
EOF
)
    if ! grep -q '^ok$' <<<"$result"; then
        echo "$1: the flame graph failed in Chromium:"; sed 's/^/  /' <<<"$result"; return 1
    fi
    echo "$1: flame graph in Chromium: $(grep -v '^ok$' <<<"$result" | tr '\n' ' ')"
}

status=0
for f in "$@"; do
    [[ -f "$f" ]] || { echo "$f: no such file"; status=1; continue; }
    case "$f" in
    *.folded|*.txt) speedscope "$f" "collapsed stack format" || status=1 ;;
    *.json) speedscope "$f" "speedscope json file" || status=1 ;;
    *.pb.gz|*.pprof) { speedscope "$f" "protobuf encoded pprof file" && pprof_top "$f"; } || status=1 ;;
    *.svg) svg "$f" || status=1 ;;
    *) echo "$f: unknown extension"; status=1 ;;
    esac
done
exit $status
