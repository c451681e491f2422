#!/usr/bin/env bash
# The embedding example (examples/embed.c) runs its module and prints the
# native log line and the result of a VM -> native -> VM round trip.
set -euo pipefail
out=$("$EMBED" examples/native_callback.tasm)
want='host: <<"starting">>
result: {[2,4,6],{negative,-2}}'
if [[ "$out" != "$want" ]]; then
    printf 'expected:\n%s\ngot:\n%s\n' "$want" "$out"
    exit 1
fi
