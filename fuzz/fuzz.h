/*
 * fuzz/fuzz.h - the one entry point every harness defines: libFuzzer calls
 * it for each input, and fuzz/replay.c for each file of a corpus.
 */
#ifndef FUZZ_FUZZ_H
#define FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* FUZZ_FUZZ_H */
