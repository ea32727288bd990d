/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to pmd/verbs and its unit tests: the handle's body.
 */
#ifndef VRB_INTERNAL_H
#define VRB_INTERNAL_H

#include "tide_vrb.h"

struct tide_vrb {
	const struct tide_vrb_ops *ops;
	unsigned ndev;
	struct tide_vrb_dev devs[TIDE_VRB_MAX_DEVS];
};

#endif /* VRB_INTERNAL_H */
