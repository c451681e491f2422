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
# another process, and off again, without a pause.  busy.tasm's two
# workers call busy:tick/2 as fast as they can and print the calls per
# second every 500 ms (the "busy:" lines): before, while and after attach
# traces busy:batch/2 (called once every 65,536 ticks) for a second into
# a file, in a session of its own that is gone when it ends; then the hot
# function itself for 5 events (tracing a call costs its event, nothing
# else pauses); then the processes' mixed stacks, grouped.
tmp=$(mktemp -d)
echo "\$ $tv run -S 2 examples/busy.tasm -e busy:main 4500 &"
"$tv" run -q -S 2 examples/busy.tasm -e busy:main 4500 &
busy=$!
for _ in $(seq 100); do
    "$tv" attach $busy info >/dev/null 2>&1 && break
    sleep 0.05
done
sleep 1.1
echo "\$ $tv attach $busy trace busy:batch/2 --duration 1 --out batch.txt   # on, 1 s, off"
"$tv" attach $busy trace busy:batch/2 --duration 1 --out "$tmp/batch.txt"
echo "\$ head -2 batch.txt; tail -1 batch.txt"
head -2 "$tmp/batch.txt"
tail -1 "$tmp/batch.txt"
sleep 1.2
run "$tv" attach $busy trace busy:tick/2 --max-events 5
run "$tv" attach $busy stacks --group
wait $busy
rm -rf "$tmp"
exit 0
