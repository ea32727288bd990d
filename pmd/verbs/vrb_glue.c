/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The production glue table: libibverbs.so.1 loaded with dlopen() on first
 * use, so the binary carries no DT_NEEDED on rdma-core and a host without it
 * only fails when someone asks for RDMA.
 *
 * Entry points that libibverbs' header implements inline (ibv_post_send,
 * ibv_poll_cq, the extended ibv_query_port) dispatch through the context's
 * provider ops and need no symbol; the others are dlsym()ed by name, which
 * resolves to the default symbol version (IBVERBS_1.1 for the old names).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide_log.h"
#include "tide_vrb.h"

#define VRB_LIB "libibverbs.so.1"
/* The test seam (tide_vrb.h): a library that supplies the table instead. Not a
 * TIDE_* name: the node environment refuses TIDE_* keys it does not know. */
#define VRB_TEST_ENV "TIDETEST_VERBS_GLUE"
#define VRB_TEST_SYM "tide_vrb_test_glue"

static pthread_mutex_t glue_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct tide_vrb_ops *glue_override;
static const struct tide_vrb_ops *glue_loaded;
static int glue_load_rc; /* 0 before the first attempt, else the cached failure */
static char glue_load_err[256];
static atomic_uint glue_dlopens;

/* Symbols taken from the library; filled once under glue_lock. */
static struct {
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_port_compat)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *,
				    int);
	int (*destroy_cq)(struct ibv_cq *);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*destroy_qp)(struct ibv_qp *);
} sym;

/* The header's ___ibv_query_port without its link-time reference: the
 * extended provider op when there is one, else the 1.1 compat call. */
static int
glue_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	if (vctx == NULL) {
		memset(attr, 0, sizeof(*attr));
		return sym.query_port_compat(ctx, port, attr);
	}
	return vctx->query_port(ctx, port, attr, sizeof(*attr));
}

/* sysfs holds what verbs does not say: "RoCE v2" / "IB/RoCE v1" per GID entry. */
static int
glue_gid_roce_version(struct ibv_context *ctx, uint8_t port, int index)
{
	char path[256], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
		 sym.get_device_name(ctx->device), (unsigned)port, index);
	f = fopen(path, "r");
	if (f == NULL) {
		return -errno;
	}
	if (fgets(buf, sizeof(buf), f) == NULL) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	if (strncmp(buf, "RoCE v2", 7) == 0) {
		return 2;
	}
	return 1;
}

static int
glue_device_numa_node(struct ibv_device *dev)
{
	char path[256];
	FILE *f;
	int node = -1;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node",
		 sym.get_device_name(dev));
	f = fopen(path, "r");
	if (f == NULL) {
		return -1;
	}
	if (fscanf(f, "%d", &node) != 1) {
		node = -1;
	}
	fclose(f);
	return node;
}

static int
glue_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

static int
glue_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

static struct tide_vrb_ops glue_ops = {
	.name = VRB_LIB,
	.query_port = glue_query_port,
	.gid_roce_version = glue_gid_roce_version,
	.device_numa_node = glue_device_numa_node,
	.post_send = glue_post_send,
	.poll_cq = glue_poll_cq,
};

/*
 * TIDETEST_VERBS_GLUE (tests only): take the table from that library's
 * tide_vrb_test_glue() instead of libibverbs. Never a fall-back either way: a
 * seam that does not load is an error, so a test cannot pass on a real
 * device by accident. Caller holds glue_lock.
 */
static int
glue_load_test(const char *path)
{
	const struct tide_vrb_ops *(*entry)(void);
	const struct tide_vrb_ops *ops;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (h == NULL) {
		const char *why = dlerror();

		snprintf(glue_load_err, sizeof(glue_load_err), "%s=%s: cannot load (%s)",
			 VRB_TEST_ENV, path, why ? why : "not found");
		return -ENOENT;
	}
	*(void **)&entry = dlsym(h, VRB_TEST_SYM);
	ops = entry != NULL ? entry() : NULL;
	if (ops == NULL || ops->get_device_list == NULL || ops->free_device_list == NULL ||
	    ops->get_device_name == NULL || ops->open_device == NULL || ops->close_device == NULL ||
	    ops->query_device == NULL || ops->query_port == NULL || ops->query_gid == NULL ||
	    ops->gid_roce_version == NULL || ops->device_numa_node == NULL ||
	    ops->alloc_pd == NULL || ops->dealloc_pd == NULL || ops->reg_mr == NULL ||
	    ops->dereg_mr == NULL || ops->create_cq == NULL || ops->destroy_cq == NULL ||
	    ops->create_qp == NULL || ops->modify_qp == NULL || ops->destroy_qp == NULL ||
	    ops->post_send == NULL || ops->poll_cq == NULL) {
		snprintf(glue_load_err, sizeof(glue_load_err),
			 "%s=%s: no complete verbs table from %s()", VRB_TEST_ENV, path,
			 VRB_TEST_SYM);
		dlclose(h);
		return -ENOSYS;
	}
	/* Loud on purpose: this process will not touch an RDMA device. */
	TIDE_LOG(WARN,
		 "verbs: TEST SEAM %s=%s: using the verbs table '%s' from that library "
		 "instead of %s; no RDMA hardware is used by this process",
		 VRB_TEST_ENV, path, ops->name ? ops->name : "?", VRB_LIB);
	glue_loaded = ops;
	return 0;
}

/* Caller holds glue_lock. */
static int
glue_load(void)
{
	const char *test = secure_getenv(VRB_TEST_ENV);
	void *h;

	atomic_fetch_add(&glue_dlopens, 1);
	if (test != NULL && test[0] != '\0') {
		return glue_load_test(test);
	}
	h = dlopen(VRB_LIB, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *why = dlerror();

		snprintf(glue_load_err, sizeof(glue_load_err),
			 "cannot load %s (%s): install rdma-core (Debian: libibverbs1 and "
			 "ibverbs-providers), or use protocol tcp (MOONCAKE_PROTOCOL=tcp)",
			 VRB_LIB, why ? why : "not found");
		return -ENOENT;
	}
#define SYM(field, name)                                                                         \
	do {                                                                                     \
		*(void **)&sym.field = dlsym(h, name);                                           \
		if (sym.field == NULL) {                                                         \
			snprintf(glue_load_err, sizeof(glue_load_err),                           \
				 "%s has no %s: rdma-core too old (need >= 17)", VRB_LIB, name); \
			dlclose(h);                                                              \
			return -ENOSYS;                                                          \
		}                                                                                \
	} while (0)
	SYM(get_device_list, "ibv_get_device_list");
	SYM(free_device_list, "ibv_free_device_list");
	SYM(get_device_name, "ibv_get_device_name");
	SYM(open_device, "ibv_open_device");
	SYM(close_device, "ibv_close_device");
	SYM(query_device, "ibv_query_device");
	SYM(query_port_compat, "ibv_query_port");
	SYM(query_gid, "ibv_query_gid");
	SYM(alloc_pd, "ibv_alloc_pd");
	SYM(dealloc_pd, "ibv_dealloc_pd");
	SYM(reg_mr, "ibv_reg_mr");
	SYM(dereg_mr, "ibv_dereg_mr");
	SYM(create_cq, "ibv_create_cq");
	SYM(destroy_cq, "ibv_destroy_cq");
	SYM(create_qp, "ibv_create_qp");
	SYM(modify_qp, "ibv_modify_qp");
	SYM(destroy_qp, "ibv_destroy_qp");
#undef SYM
	glue_ops.get_device_list = sym.get_device_list;
	glue_ops.free_device_list = sym.free_device_list;
	glue_ops.get_device_name = sym.get_device_name;
	glue_ops.open_device = sym.open_device;
	glue_ops.close_device = sym.close_device;
	glue_ops.query_device = sym.query_device;
	glue_ops.query_gid = sym.query_gid;
	glue_ops.alloc_pd = sym.alloc_pd;
	glue_ops.dealloc_pd = sym.dealloc_pd;
	glue_ops.reg_mr = sym.reg_mr;
	glue_ops.dereg_mr = sym.dereg_mr;
	glue_ops.create_cq = sym.create_cq;
	glue_ops.destroy_cq = sym.destroy_cq;
	glue_ops.create_qp = sym.create_qp;
	glue_ops.modify_qp = sym.modify_qp;
	glue_ops.destroy_qp = sym.destroy_qp;
	/* The library stays loaded for the life of the process: providers keep
	 * pointers into it. */
	glue_loaded = &glue_ops;
	TIDE_LOG(INFO, "verbs: %s loaded", VRB_LIB);
	return 0;
}

int
tide_vrb_glue_get(const struct tide_vrb_ops **out, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&glue_lock);
	if (glue_override != NULL) {
		*out = glue_override;
	} else if (glue_loaded != NULL) {
		*out = glue_loaded;
	} else {
		if (glue_load_rc == 0) {
			glue_load_rc = glue_load();
		}
		rc = glue_load_rc;
		if (rc == 0) {
			*out = glue_loaded;
		} else if (err != NULL && errlen > 0) {
			snprintf(err, errlen, "%s", glue_load_err);
		}
	}
	pthread_mutex_unlock(&glue_lock);
	return rc;
}

void
tide_vrb_glue_set(const struct tide_vrb_ops *ops)
{
	pthread_mutex_lock(&glue_lock);
	glue_override = ops;
	pthread_mutex_unlock(&glue_lock);
}

unsigned
tide_vrb_glue_dlopen_count(void)
{
	return atomic_load(&glue_dlopens);
}
