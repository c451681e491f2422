#!/usr/bin/env bash
# Every code block of docs/embedding.md, against the suite's scratch
# install ($BUILD/stage): the programs built with the guide's own commands
# and run, their output as the guide shows it; the header excerpts as in
# the header; the fragments compiled (tests/check_doc.py).  A cross
# build's suite builds them with the cross compilers and runs them under
# the emulator (tests/runner.py sets CC, CXX, TRACEVM_RUN and the
# pkg-config path; check_doc.py uses them).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
build=$(dirname "$(dirname "$TRACEVM")")
stage=$(cd "$build/stage" && pwd -P) || { echo "FAIL: no $build/stage"; exit 1; }
export PKG_CONFIG_PATH=$stage/lib/pkgconfig
# A sanitized library's runtime cannot be linked statically: the guide's
# `cc -static` line then links the static archive alone.
[[ "$(pkg-config --libs tracevm)" == *-fsanitize* ]] && export DOC_NO_STATIC=1
python3 tests/check_doc.py docs/embedding.md
