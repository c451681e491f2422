#!/usr/bin/env bash
# The man pages (tools/man/*.1): groff and man render them without a
# warning; each carries the header's version; every command has one; each
# command's page names every option its --help names and no other, and
# tracevm-run(1) every --flags name.
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
    # Every option the help text names is on the page, and every option of
    # the page's OPTIONS section is in the help text.
    sed -n '/^OPTIONS/,/^[A-Z]/p' "$tmp/$name.txt" | options > "$tmp/man"
    [[ $name == tracevm-run ]] && sed -n '/^OPTIONS/,/^SIGNALS/p' "$tmp/$name.txt" | options > "$tmp/man"
    options < "$tmp/$name.txt" > "$tmp/page"
    { echo "$help" | options; echo "--help"; echo "-h"; } | sort -u > "$tmp/help"
    missing=$(comm -23 "$tmp/help" "$tmp/page")
    [[ -z "$missing" ]] || fail "$page does not name what $name's --help names: $missing"
    extra=$(comm -13 "$tmp/help" "$tmp/man")
    [[ -z "$extra" ]] || fail "$page's OPTIONS has what $name's --help lacks: $extra"
done

# A page for every command `tracevm --help` lists.
for c in $("$TRACEVM" --help | sed -n '/^commands:/,/^$/s/^  \([a-z]\+\) .*/\1/p' | sort -u); do
    [[ -f tools/man/tracevm-$c.1 ]] || fail "no man page tools/man/tracevm-$c.1 for tracevm $c"
done

# Every name --flags takes (the lines under it in `tracevm run --help`).
"$TRACEVM" run --help | sed -n 's/^ \{21\}\([a-z_]\+\)  .*/\1/p' > "$tmp/flags"
(( $(wc -l < "$tmp/flags") >= 9 )) || fail "read only $(wc -l < "$tmp/flags") flag names"
while read -r f; do
    grep -q "^\.B $f$" tools/man/tracevm-run.1 || fail "tracevm-run.1 does not describe --flags $f"
done < "$tmp/flags"
echo ok
