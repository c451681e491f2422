#!/usr/bin/env bash
# No file of the repository cites a document outside it: the notes the
# project was started from (a `shared` folder beside the repository, with
# its `reference` and `seeds` documents) are not part of what is
# published, so a fact taken from them is stated where it is used, or
# cites its public source (an OTP file and function, a paper).  This test
# fails, naming file:line, on any path into them.  The pattern is built
# from pieces so that this file does not match itself.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
dir='shared'
docs='(beam|stacks|deps|peers|style)'
pattern="(\.\./${dir}/|refer""ence/${docs}\.md|${dir}/seeds/)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files -z --cached --others --exclude-standard | xargs -0 grep -I -l -E "$pattern" 2>/dev/null)
else
    files=$(grep -r -I -l -E "$pattern" --exclude-dir=build --exclude-dir=.git . 2>/dev/null)
fi
[[ -z "$files" ]] || fail "files citing documents outside the repository:
$(grep -H -n -E "$pattern" $files | head -20)"
# The pattern itself must catch each kind of citation.
for cite in "../$dir/design.md" "refer""ence/beam.md Part 2" "$dir/seeds/004.txt"; do
    grep -q -E "$pattern" <<<"see $cite" || fail "the pattern misses: $cite"
done
echo "no citation of documents outside the repository"
