#!/usr/bin/env bash
# Nothing public goes untested: every tvm_ function include/tracevm.h
# declares is called by at least one test (tests/**/*.c), and every
# opcode of vm/opcodes.def is written by at least one test program (a
# .tasm file under tests/ or examples/, or assembly text in a C test).
# The VM's internal opcodes are never written in assembly; each is run
# by a feature, and some test must use that feature (the table below).
# Fails naming whatever is missing.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
python3 - <<'PY' || exit 1
import glob, re, sys

def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()

missing = []

# -- API functions: declarations start a line (a return type, the name, "(")
header = read("include/tracevm.h")
api = sorted(set(re.findall(r"^[A-Za-z_][\w \t]*?\**[ \t]*\b(tvm_\w+)\(", header, re.M)))
tests_c = {p: read(p) for p in glob.glob("tests/**/*.c", recursive=True)}
for fn in api:
    if not any(re.search(r"\b%s\s*\(" % fn, text) for text in tests_c.values()):
        missing.append("API function %s is called by no test" % fn)

# -- opcodes: X(NAME, "mnemonic", "FMT", RULE, FLAGS)
opdef = read("vm/opcodes.def")
ops = re.findall(r'^X\(\s*\w+\s*,\s*"(\w+)"\s*,\s*"[^"]*"\s*,\s*\w+\s*,\s*([^)]*)\)', opdef, re.M)
if len(ops) < 50:
    sys.exit("vm/opcodes.def: found only %d opcodes; has its format changed?" % len(ops))

def instructions(text):
    """Mnemonics of the instruction lines in assembly text."""
    seen = set()
    for line in text.splitlines():
        line = line.split(";", 1)[0].strip()
        if not line or line.endswith(":"):
            continue
        word = line.split()[0]
        if word not in ("module", "export", "function", "end"):
            seen.add(word)
    return seen

written = set()
for path in glob.glob("tests/**/*.tasm", recursive=True) + glob.glob("examples/**/*.tasm",
                                                                        recursive=True):
    written |= instructions(read(path))
for text in tests_c.values():
    # the assembly inside C string literals: each literal's \n-separated lines
    for lit in re.findall(r'"((?:[^"\\\n]|\\.)*)"', text):
        written |= instructions(lit.replace("\\n", "\n").replace('\\"', '"'))

# Internal opcodes: what a test must use for the VM to run each.
internal = {
    "enter": (r"\bfunction\s+\w+/\d+", "any function (code[0] of every function)"),
    "native": (r"tvm_register_native\s*\(", "a call of a native function"),
    "undef": (r"\bundef\b", "a call of an undefined function (error:undef)"),
    "stop": (r"\btvm_call\s*\(", "tvm_call (the end of an activation)"),
    "breakpoint": (r"TVM_TP_LOCAL|--local", "a local trace pattern"),
    "breakpoint_tramp": (r"TVM_TP_GLOBAL|erlang:trace_pattern", "a global trace pattern"),
    "return_trace": (r"return_trace", "a {return_trace} match spec"),
}
everything = "\n".join(list(tests_c.values()) +
                       [read(p) for p in glob.glob("tests/**/*.tasm", recursive=True)] +
                       [read(p) for p in glob.glob("tests/sh/*.sh")])
for mnemonic, flags in ops:
    if "OPF_INTERNAL" in flags:
        if mnemonic not in internal:
            missing.append("internal opcode %s: no feature listed in tests/sh/api_coverage.sh"
                           % mnemonic)
        elif not re.search(internal[mnemonic][0], everything):
            missing.append("internal opcode %s: no test uses %s" % (mnemonic, internal[mnemonic][1]))
    elif mnemonic not in written:
        missing.append("opcode %s is written by no test program" % mnemonic)

for m in missing:
    print("missing: " + m)
print("%d API functions, %d opcodes checked" % (len(api), len(ops)))
sys.exit(1 if missing else 0)
PY
