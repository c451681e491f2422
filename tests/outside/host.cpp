// tests/outside/host.cpp - a C++ host of tracevm, built outside the tree
// with g++ and nothing but pkg-config (tests/outside/run.sh): the header
// compiles as C++, and a native written in C++ is called from VM code.
#include <cstring>
#include <iostream>
#include <string>
#include <tracevm.h>

namespace {

const std::string twice_src =
    "module twice\n"
    "export run/1\n"
    "function run/1 regs 1\n"
    "    callx r0, r0, host:greet/1\n"
    "    ret r0\n"
    "end\n";

// host:greet(Name) -> <<"hello, Name">>
tvm_status greet(tvm_env *env, int, const tvm_term *argv, tvm_term *result, void *)
{
    char name[64];
    if (tvm_get_atom(env, argv[0], name, sizeof name) != TVM_OK)
        return tvm_raise_badarg(env);
    return tvm_make_string(env, (std::string("hello, ") + name).c_str(), result);
}

}  // namespace

int main()
{
    tvm_config cfg = {};
    cfg.size = sizeof cfg;
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm || tvm_register_native(vm, "host", "greet", 1, greet, nullptr, &err) != TVM_OK ||
        tvm_load_string(vm, "twice.tasm", twice_src.data(), twice_src.size(), &err) != TVM_OK) {
        std::cerr << (vm ? err.message : "tvm_new failed") << '\n';
        return 1;
    }
    tvm_env *env = tvm_env_new(vm);
    tvm_term arg, result;
    tvm_make_atom(env, "cpp", &arg);
    tvm_status st = tvm_call(env, "twice", "run", 1, &arg, &result);
    char buf[128];
    tvm_format_term(env, result, buf, sizeof buf);
    std::cout << tvm_status_name(st) << ' ' << buf << '\n';
    tvm_env_free(env);
    tvm_destroy(vm);
    return st == TVM_OK ? 0 : 1;
}
