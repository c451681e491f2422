/*
 * fuzz/fuzz_term.c - the term parser (tvm_parse_term: the literal syntax
 * of .tasm files, match specs and tracevm run's arguments) and what every
 * term goes through afterwards: printing, copying, comparing.
 * Invariants: a parsed term prints, and when its text has nothing the
 * parser does not read back (binaries and pids print as <<...>> and
 * <0.N.0>), the printed text parses to an equal term; a copy (as a
 * message) is exactly term_size words and equal to the original; a term
 * compares equal to itself and to its copy.
 */
#include "fuzz/fuzz_util.h"
#include "vm/print.h"
#include "vm/process.h"
#include "vm/sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tvm_vm *vm = fuzz_vm(20000);
    tvm_env *env = tvm_env_new(vm);
    char *text = fuzz_text(data, size);
    tvm_term t;
    tvm_error err;
    tvm_status st = tvm_parse_term(env, text, &t, &err);
    if (st == TVM_OK) {
        Term v = vm_root_get(env->p, t);
        StrBuf sb;
        sb_init(&sb);
        vm_print_term(&sb, v);
        size_t words = term_size(v);
        Message *m = vm_message_new(NULL, v, words);
        FUZZ_CHECK(m && m->words == words, "copy of %zu words", words);
        FUZZ_CHECK(term_compare(m->term, v) == 0, "copy differs: %s", sb.s);
        FUZZ_CHECK(term_compare(v, v) == 0, "not equal to itself: %s", sb.s);
        vm_messages_free(m);
        if (!strstr(sb.s, "<<") && !strstr(sb.s, "<0.")) {
            tvm_term back;
            tvm_status st2 = tvm_parse_term(env, sb.s, &back, &err);
            FUZZ_CHECK(st2 == TVM_OK, "printed %s does not parse: %s", sb.s, err.message);
            FUZZ_CHECK(tvm_equal(env, t, back), "printed %s parses to another term", sb.s);
        }
        sb_free(&sb);
    } else {
        FUZZ_CHECK(st == TVM_ERR_BADARG || st == TVM_ERR_LIMIT, "status %s",
                   tvm_status_name(st));
        FUZZ_CHECK(err.message[0], "no message");
    }
    free(text);
    tvm_env_free(env);
    return 0;
}
