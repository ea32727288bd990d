/* SPDX-License-Identifier: Apache-2.0 */
/*
 * EAL bring-up. Builds the argv the EAL wants from tide_eal_opts, choosing
 * hugepages or --no-huge. The decision is made here, before rte_eal_init,
 * because the EAL itself only fails late and noisily when pages are short.
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "memif_publish.h"
#include "tide_eth.h"
#include "tide_log.h"

#define EAL_MAX_ARGS 64
#define MIB          ((uint64_t)1024 * 1024)
#define DEFAULT_MEM  (256ull * MIB)

static bool eal_up;

static int
read_u64_file(const char *path, uint64_t *out)
{
	FILE *f = fopen(path, "r");
	unsigned long long v;
	int n;

	if (f == NULL)
		return -errno;
	n = fscanf(f, "%llu", &v);
	fclose(f);
	if (n != 1)
		return -EIO;
	*out = v;
	return 0;
}

static int
write_u64_file(const char *path, uint64_t v)
{
	FILE *f = fopen(path, "w");
	int rc = 0;

	if (f == NULL)
		return -errno;
	if (fprintf(f, "%" PRIu64 "\n", v) < 0)
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* A hugetlbfs mount must exist for the EAL to map pages; with several page
 * sizes it picks the mount whose pagesize= matches, the default size
 * otherwise. We only check that some hugetlbfs is mounted. */
static bool
hugetlbfs_mounted(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/mounts", "r");

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, " hugetlbfs ") != NULL;
	fclose(f);
	return found;
}

int
tide_eal_hugepages_usable(uint64_t mem_bytes, uint64_t page_size, bool reserve, char *reason,
			  size_t reason_len)
{
	char dir[128], path[192];
	uint64_t free_pages = 0, nr_pages = 0, need;
	char dummy[1];

	if (reason == NULL) {
		reason = dummy;
		reason_len = sizeof(dummy);
	}
	if (page_size != 2 * MIB && page_size != 1024 * MIB)
		return -EINVAL;
	if (mem_bytes == 0)
		mem_bytes = DEFAULT_MEM;
	need = (mem_bytes + page_size - 1) / page_size;
	snprintf(dir, sizeof(dir), "/sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB",
		 page_size / 1024);
	snprintf(path, sizeof(path), "%s/free_hugepages", dir);
	if (read_u64_file(path, &free_pages) != 0) {
		snprintf(reason, reason_len, "kernel has no %" PRIu64 " kB hugepages",
			 page_size / 1024);
		return 0;
	}
	if (!hugetlbfs_mounted()) {
		snprintf(reason, reason_len,
			 "no hugetlbfs mounted (mount -t hugetlbfs nodev /dev/hugepages)");
		return 0;
	}
	if (free_pages < need && reserve) {
		snprintf(path, sizeof(path), "%s/nr_hugepages", dir);
		if (read_u64_file(path, &nr_pages) == 0 &&
		    write_u64_file(path, nr_pages + (need - free_pages)) == 0) {
			snprintf(path, sizeof(path), "%s/free_hugepages", dir);
			(void)read_u64_file(path, &free_pages);
		}
	}
	if (free_pages < need) {
		snprintf(reason, reason_len,
			 "%" PRIu64 " free %" PRIu64 " kB hugepages, %" PRIu64
			 " needed for %" PRIu64 " MiB%s",
			 free_pages, page_size / 1024, need, mem_bytes / MIB,
			 reserve ? " (reservation refused or short)" : "");
		return 0;
	}
	snprintf(reason, reason_len,
		 "%" PRIu64 " free %" PRIu64 " kB hugepages cover %" PRIu64 " MiB", free_pages,
		 page_size / 1024, mem_bytes / MIB);
	return 1;
}

struct argv_buf {
	char *argv[EAL_MAX_ARGS + 1];
	int argc;
	char store[4096];
	size_t used;
};

static int
argv_add(struct argv_buf *a, const char *s)
{
	size_t n = strlen(s) + 1;

	if (a->argc >= EAL_MAX_ARGS || a->used + n > sizeof(a->store))
		return -E2BIG;
	memcpy(a->store + a->used, s, n);
	a->argv[a->argc++] = a->store + a->used;
	a->used += n;
	a->argv[a->argc] = NULL;
	return 0;
}

static int argv_addf(struct argv_buf *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int
argv_addf(struct argv_buf *a, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -E2BIG;
	return argv_add(a, tmp);
}

/* Extra args are split on whitespace only; no quoting, because the node file
 * forbids anything a shell would interpret differently. */
static int
argv_add_split(struct argv_buf *a, const char *s)
{
	char tok[512];
	int rc;

	while (s != NULL && *s != '\0') {
		size_t n;

		s += strspn(s, " \t");
		n = strcspn(s, " \t");
		if (n == 0)
			break;
		if (n >= sizeof(tok))
			return -E2BIG;
		memcpy(tok, s, n);
		tok[n] = '\0';
		rc = argv_add(a, tok);
		if (rc != 0)
			return rc;
		s += n;
	}
	return 0;
}

int
tide_eal_init(const struct tide_eal_opts *o, struct tide_eal_info *info)
{
	struct argv_buf a = {.argc = 0};
	struct tide_eal_info inf = {0};
	uint64_t mem = o->mem_bytes != 0 ? o->mem_bytes : DEFAULT_MEM;
	uint64_t page = o->hugepage_size != 0 ? o->hugepage_size : 2 * MIB;
	int rc = 0, usable = 0;
	cpu_set_t mask;
	bool have_mask;

	if (eal_up)
		return -EALREADY;
	if (o->huge != TIDE_EAL_HUGE_OFF) {
		usable = tide_eal_hugepages_usable(mem, page, o->reserve_hugepages, inf.huge_reason,
						   sizeof(inf.huge_reason));
		if (usable < 0) {
			TIDE_LOG(ERR, "hugepage size %" PRIu64 " kB is not 2048 or 1048576",
				 page / 1024);
			return usable;
		}
		if (usable == 0 && o->huge == TIDE_EAL_HUGE_ON) {
			TIDE_LOG(ERR, "hugepages required (TIDE_HUGEPAGES=on) but unusable: %s",
				 inf.huge_reason);
			return -ENOMEM;
		}
	} else {
		snprintf(inf.huge_reason, sizeof(inf.huge_reason), "hugepages turned off");
	}
	inf.hugepages = usable == 1;
	inf.mem_bytes = mem;

	rc |= argv_add(&a, o->prog != NULL ? o->prog : "tide");
	rc |= argv_addf(&a, "-l%s", o->lcores != NULL ? o->lcores : "0");
	rc |= argv_addf(&a, "--file-prefix=%s", o->file_prefix != NULL ? o->file_prefix : "tide");
	rc |= argv_addf(&a, "-m%" PRIu64, (mem + MIB - 1) / MIB);
	if (inf.hugepages) {
		/* Unlink the backing files right after mapping: a crash then
		 * leaves no stale pages behind in /dev/hugepages. */
		rc |= argv_add(&a, "--huge-unlink");
	} else {
		rc |= argv_add(&a, "--no-huge");
	}
	if (o->pci_allow != NULL && o->pci_allow[0] != '\0')
		rc |= argv_addf(&a, "-a%s", o->pci_allow);
	else
		rc |= argv_add(&a, "--no-pci");
	for (unsigned i = 0; i < 4 && o->vdevs[i] != NULL; i++) {
		char vdev[512];
		int r = tide_memif_vdev_rewrite(o->vdevs[i], vdev, sizeof(vdev));

		if (r < 0) {
			tide_memif_forget_all();
			return r;
		}
		rc |= argv_addf(&a, "--vdev=%s", vdev);
	}
	rc |= argv_addf(&a, "--log-level=%d",
			o->log_level > 0 ? o->log_level : (int)RTE_LOG_WARNING);
	if (rc != 0)
		return -E2BIG;
	rc = argv_add_split(&a, o->extra_args);
	if (rc != 0) {
		TIDE_LOG(ERR, "TIDE_EAL_ARGS too long");
		return rc;
	}
	if (tide_log_enabled(TIDE_LOG_INFO)) {
		char line[1024] = "";
		size_t off = 0;

		for (int i = 0; i < a.argc && off < sizeof(line); i++)
			off += (size_t)snprintf(line + off, sizeof(line) - off, "%s ", a.argv[i]);
		TIDE_LOG(INFO, "EAL: %s", line);
	}
	/* The EAL pins the calling thread to its main lcore (CPU 0 with -l0), and
	 * every thread started afterwards inherits that: a Python process's interpreter
	 * and thread pools would all share CPU 0 with whatever polls there. Tide pins
	 * its own pollers (engine/lcore), so the caller gets its affinity back. */
	have_mask = pthread_getaffinity_np(pthread_self(), sizeof(mask), &mask) == 0;
	/* rte_eal_init permutes argv; it works on our private copy. */
	rc = rte_eal_init(a.argc, a.argv);
	if (rc >= 0 && have_mask &&
	    pthread_setaffinity_np(pthread_self(), sizeof(mask), &mask) != 0)
		TIDE_LOG(WARN, "EAL: could not restore the calling thread's CPU affinity");
	if (rc < 0) {
		rc = rte_errno != 0 ? -rte_errno : -EINVAL;
		tide_memif_forget_all();
		TIDE_LOG(ERR, "rte_eal_init failed: %s (%s hugepages: %s)", rte_strerror(-rc),
			 inf.hugepages ? "with" : "without", inf.huge_reason);
		return rc;
	}
	eal_up = true;
	inf.lcores = rte_lcore_count();
	inf.ports = rte_eth_dev_count_avail();
	if (info != NULL)
		*info = inf;
	return 0;
}

int
tide_eal_fini(void)
{
	if (!eal_up)
		return -EALREADY;
	eal_up = false;
	tide_memif_forget_all();
	return rte_eal_cleanup();
}

int
tide_eal_thread_register(void *arg, unsigned worker)
{
	(void)arg;
	if (!eal_up)
		return -EINVAL;
	if (rte_thread_register() != 0) {
		TIDE_LOG(ERR, "worker %u: no free lcore id: %s", worker, rte_strerror(rte_errno));
		return -rte_errno;
	}
	return 0;
}

int
tide_eal_cpu_socket(int cpu)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int node = 0;

	if (cpu < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d", cpu);
	d = opendir(path);
	if (d == NULL)
		return errno == ENOENT ? -EINVAL : 0;
	/* The CPU's directory links to its node as "nodeN"; kernels without
	 * NUMA have no such link, and then everything is node 0. */
	while ((e = readdir(d)) != NULL) {
		char *end;
		long n;

		if (strncmp(e->d_name, "node", 4) != 0)
			continue;
		n = strtol(e->d_name + 4, &end, 10);
		if (end != e->d_name + 4 && *end == '\0' && n >= 0 && n < 1024) {
			node = (int)n;
			break;
		}
	}
	closedir(d);
	return node;
}
