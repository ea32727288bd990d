/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for the embedded store behind the agent server (the
 * tide_store_* calls store/agent/agent_server.c makes), for the agent fuzz
 * target and the seed generator. It checks what the agent promises the
 * store: every buffer of a request lies inside a region the client mapped
 * and the agent registered, keys are strings, arrays are as long as their
 * counts. A broken promise traps. Results are fixed and harmless.
 */
#ifndef FUZZ_STORE_STUB_H
#define FUZZ_STORE_STUB_H

#include <stddef.h>

/* The store pointer to hand to the agent server. */
struct tide_store *fz_store(void);

/* Buffers registered now (0 once every client's regions are gone). */
size_t fz_store_regions(void);

#endif /* FUZZ_STORE_STUB_H */
