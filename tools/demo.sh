#!/usr/bin/env bash
# tools/demo.sh BUILD_DIR -- the README's demo: runs the example programs
# with the tracevm command and the embedding example.
set -uo pipefail
b=${1:-build/debug}
tv="$b/tools/tracevm"
run() {
    echo "\$ $*"
    "$@"
    echo
}
run "$tv" run examples/fib.tasm -e fib:fib 25
[[ -f examples/lists.tasm ]] && run "$tv" run examples/lists.tasm
[[ -f examples/exceptions.tasm ]] && run "$tv" run examples/exceptions.tasm
[[ -f examples/exceptions.tasm ]] && run "$tv" run examples/exceptions.tasm -e exceptions:crash
run "$b/examples/embed" examples/native_callback.tasm
run "$tv" dis examples/fib.tasm
exit 0
