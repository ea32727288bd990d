/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every libFuzzer target here shares: the entry points libFuzzer calls
 * (declared, so -Wmissing-prototypes holds) and TRAP_IF, which turns a broken
 * invariant into a crash libFuzzer reports with the input that caused it.
 */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TRAP_IF(c)                        \
	do {                              \
		if (c)                    \
			__builtin_trap(); \
	} while (0)

#endif /* FUZZ_COMMON_H */
