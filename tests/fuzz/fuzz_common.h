/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every libFuzzer target here shares: the entry points libFuzzer calls
 * (declared, so -Wmissing-prototypes holds) and TRAP_IF, which turns a broken
 * invariant into a crash libFuzzer reports with the input that caused it.
 *
 * One rule for every target: what an input allocates is freed before
 * LLVMFuzzerTestOneInput returns (state made once, in LLVMFuzzerInitialize or
 * on the first input, may stay if it does not grow). libFuzzer leak-checks an
 * input only when it ends with more mallocs than frees, and stops checking
 * for good after 1000 such inputs with nothing unreachable: memory kept
 * reachable per input then grows until the RSS limit. fuzz_run.sh fails a
 * target where libFuzzer stopped checking.
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
