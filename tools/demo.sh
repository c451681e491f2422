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
run "$tv" run examples/pingpong.tasm -e pingpong:main 10000
run "$tv" run examples/ring.tasm -e ring:main 1000 100
run "$tv" run examples/parallel.tasm -e parallel:main 8 22
run "$tv" run -S 1 examples/sleep.tasm
run "$tv" run -S 2 examples/callcount.tasm
run "$tv" run -S 2 examples/tracedemo.tasm --flags call
run "$tv" dis examples/fib.tasm

# What tracevm is for: tracing switched on in a running system from
# another process, and off again, without a pause.  The ticker's two
# workers call ticker:tick/2 every 10 ms; attach traces six calls, then
# the session is gone and the program runs on untraced; then its
# processes and their mixed stacks, grouped.
echo "\$ $tv run -S 2 examples/ticker.tasm -e ticker:main 3000 &"
"$tv" run -S 2 examples/ticker.tasm -e ticker:main 3000 &
ticker=$!
for _ in $(seq 100); do
    "$tv" attach $ticker info >/dev/null 2>&1 && break
    sleep 0.05
done
sleep 0.2
run "$tv" attach $ticker trace ticker:tick/2 --max-events 6
run "$tv" attach $ticker procs
run "$tv" attach $ticker stacks --group
wait $ticker
exit 0
