/*
 * vm/api_code.c - the public listing of loaded code (tracevm.h,
 * "Loading code"): modules and their functions.
 *
 * Both read the module table under code_lock, which every install takes
 * (vm/module.c), so a listing sees each module whole: one version, all its
 * functions.  Names are copied out; a module's file name lives as long as
 * the VM (replaced versions are kept, vm/module.h).
 */
#include "include/tracevm.h"

#include <string.h>

#include "vm/atom.h"
#include "vm/module.h"

static void copy_name(char *dst, Atom a)
{
    size_t n;
    const char *s = vm_atom_name(a, &n);
    memcpy(dst, s, n);   /* atoms are at most 255 bytes: dst holds 256 */
    dst[n] = '\0';
}

size_t tvm_modules(tvm_vm *vm, tvm_module_info *out, size_t max)
{
    if (!vm)
        return 0;
    pthread_mutex_lock(&vm->code_lock);
    size_t n = 0;
    for (size_t i = 0; i < vm->nmodules; i++) {
        const Module *m = vm->modules[i];
        if (m->deleted)
            continue;   /* old code only: not loaded */
        if (out && n < max) {
            copy_name(out[n].name, m->name);
            out[n].file = m->file;
            out[n].functions = (int)m->nfuncs;
        }
        n++;
    }
    pthread_mutex_unlock(&vm->code_lock);
    return n;
}

tvm_status tvm_functions(tvm_vm *vm, const char *module, tvm_function_info *out, size_t max,
                         size_t *count)
{
    if (!vm || !module || !count || (max && !out))
        return TVM_ERR_BADARG;
    Atom a;
    if (!vm_atom_lookup(module, strlen(module), &a))
        return TVM_ERR_NOTFOUND;
    pthread_mutex_lock(&vm->code_lock);
    const Module *m = vm_module_current_locked(vm, a);
    if (m) {
        *count = m->nfuncs;
        for (size_t i = 0; i < m->nfuncs && i < max; i++) {
            const FuncInfo *fi = m->funcs[i];
            copy_name(out[i].name, fi->name);
            out[i].arity = fi->arity;
            out[i].exported = fi->export != NULL;
            out[i].line = fi->nlines ? (int)fi->lines[0].line : 0;
        }
    }
    pthread_mutex_unlock(&vm->code_lock);
    return m ? TVM_OK : TVM_ERR_NOTFOUND;
}
