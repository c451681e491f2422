#!/usr/bin/env bash
# The man pages (tools/man/*.1): groff and man render them without a
# warning; each carries the header's version; each command's page names
# every option its --help names and no other, and tracevm-run(1) every
# --flags name.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=$(sed -n 's/^#define TVM_VERSION_STRING "\(.*\)"$/\1/p' include/tracevm.h)

# The options a text names: -X and --word tokens.
options() { grep -oE '(^|[^a-zA-Z0-9_-])--?[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^[^-]*//' | sort -u; }

for page in tools/man/*.1; do
    name=$(basename "$page" .1)
    warn=$(groff -man -ww -z "$page" 2>&1; MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [[ -z "$warn" ]] || fail "$page: $warn"
    grep -q "^\.TH [^ ]* 1 [0-9-]* \"tracevm $version\" \"User Commands\"$" "$page" ||
        fail "$page: .TH does not carry version $version"
    MANWIDTH=200 man -l "$page" 2>/dev/null | col -b > "$tmp/$name.txt"
    case $name in
    tracevm) help=$("$TRACEVM" --help | sed -n '1,/^commands:/p'; echo "--version") ;;
    *) help=$("$TRACEVM" "${name#tracevm-}" --help) ;;
    esac
    # The OPTIONS section of the page and the help text name the same options.
    sed -n '/^OPTIONS/,/^[A-Z]/p' "$tmp/$name.txt" | options > "$tmp/man"
    [[ $name == tracevm-run ]] && sed -n '/^OPTIONS/,/^SIGNALS/p' "$tmp/$name.txt" | options > "$tmp/man"
    echo "$help" | options > "$tmp/help"
    grep -qx -- '--help' "$tmp/help" || echo "--help" >> "$tmp/help"
    grep -qx -- '-h' "$tmp/help" || echo "-h" >> "$tmp/help"
    sort -u -o "$tmp/help" "$tmp/help"
    diff "$tmp/help" "$tmp/man" > "$tmp/diff" ||
        fail "$page: options differ from $name's --help (< help only, > page only):
$(cat "$tmp/diff")"
done

# Every name --flags takes (the lines under it in `tracevm run --help`).
"$TRACEVM" run --help | sed -n 's/^ \{21\}\([a-z_]*\)  .*/\1/p' > "$tmp/flags"
(( $(wc -l < "$tmp/flags") >= 9 )) || fail "read only $(wc -l < "$tmp/flags") flag names"
while read -r f; do
    grep -q "^\.B $f$" tools/man/tracevm-run.1 || fail "tracevm-run.1 does not describe --flags $f"
done < "$tmp/flags"
echo ok
