/*
 * fuzz/replay.c - a main for a harness outside libFuzzer: runs
 * LLVMFuzzerTestOneInput once on each file of the directories (or files)
 * given, in name order, and prints how many.  A finding aborts, as under
 * libFuzzer.  Built into every test build as fuzz_replay_NAME
 * (tests/SConscript); tests/sh/fuzz_replay.sh runs them.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/fuzz.h"

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = fread(buf, 1, (size_t)(n > 0 ? n : 0), f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    size_t runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]))
                return 1;
            runs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        char **names = NULL;
        size_t n = 0, cap = 0;
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                names = realloc(names, cap * sizeof *names);
            }
            names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            sprintf(names[n++], "%s/%s", argv[i], e->d_name);
        }
        if (d)
            closedir(d);
        qsort(names, n, sizeof *names, cmp);
        for (size_t k = 0; k < n; k++) {
            if (run_file(names[k]))
                return 1;
            free(names[k]);
            runs++;
        }
        free(names);
    }
    printf("%zu inputs\n", runs);
    return 0;
}
