# tests/sh/lib.sh - sourced by the shell tests (. "$(dirname "$0")/lib.sh").
#
# The runner (tests/runner.py) counts exit status 0 as passed, 77 as
# skipped (the last line of stdout says why) and anything else as failed.

fail() { echo "FAIL: $*"; exit 1; }

# need TOOL [WHAT]: the test (or its part WHAT) needs TOOL.  Without it the
# test fails, unless the run was told to skip what needs TOOL (`scons test
# skip=TOOL,...`, which the runner passes on in TRACEVM_TEST_SKIP): then
# it is skipped.  A missing tool never passes silently.
need() {
    command -v "$1" >/dev/null && return 0
    local what=${2:-this test}
    case ",${TRACEVM_TEST_SKIP:-}," in
    *",$1,"*) echo "skipped: $what needs $1, which is not installed (skip=$1)"; exit 77 ;;
    esac
    fail "$what needs $1, which is not installed (tools/setup.sh installs it; skip=$1 skips it)"
}

# not_emulated WHY: the test cannot work when the build's programs run
# under user-mode emulation (a cross build's suite: tests/runner.py sets
# TRACEVM_RUN to the emulator); it is skipped there, saying why.
not_emulated() {
    [[ -z "${TRACEVM_RUN:-}" ]] && return 0
    echo "skipped under $(basename "$TRACEVM_RUN"): $*"
    exit 77
}

# full_scale: true in the build the largest loads run in, the optimised
# native one (release), which users run; the other builds and user-mode
# emulation run smaller ones, each test saying why they still prove its
# claim (tests/unit/helpers.h has the same test: test_full_scale).
full_scale() {
    [[ "${TRACEVM_MODE:-}" == release && -z "${TRACEVM_RUN:-}" ]]
}

# emulated_program PROG: the build's program PROG stands for (under
# emulation "$TRACEVM" and its neighbours are launchers: tests/runner.py),
# or PROG itself.
emulated_program() {
    if [[ -n "${TRACEVM_RUN:-}" ]]; then
        sed -n 's|^exec [^ ]* \(.*\) "\$@"$|\1|p' "$1"
    else
        echo "$1"
    fi
}

# command_line PROG: how the OS shows PROG's command (/proc/PID/cmdline):
# under emulation, the emulator's, which names the program.
command_line() {
    echo "${TRACEVM_RUN:+$TRACEVM_RUN }$(emulated_program "$1")"
}

# target_ldd [-r] FILE: what `ldd [-r] FILE` prints (-r: and the symbols
# nothing defines, "undefined symbol: NAME"), for a program or library of
# the build's architecture.  Under emulation the host's ldd cannot load a
# foreign file: the target's dynamic loader (the one the build's tracevm
# names) does what glibc's ldd does, run by the emulator, with ldd's
# variables given to the emulated loader alone (qemu's -E: in the
# environment they would make the host's loader trace the emulator).
target_ldd() {
    [[ -z "${TRACEVM_RUN:-}" ]] && { ldd "$@"; return; }
    local vars=(-E LD_TRACE_LOADED_OBJECTS=1) interp
    [[ $1 == -r ]] && { vars+=(-E LD_WARN=yes -E LD_BIND_NOW=yes); shift; }
    interp=$(readelf -l "$(emulated_program "$TRACEVM")" |
             sed -n 's/.*Requesting program interpreter: \(.*\)\]$/\1/p')
    [[ -n "$interp" ]] || fail "no program interpreter in $(emulated_program "$TRACEVM")"
    "$TRACEVM_RUN" "${vars[@]}" "$interp" "$1"
}
