/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memif server sockets published after start (memif_publish.h).
 *
 * The devargs are parsed as the memif PMD reads them: comma-separated
 * key=value pairs after the device name; "role=server" makes a server (the
 * PMD's default role is client), "socket-abstract=no" a filesystem socket
 * (the default is abstract), "socket=" the path (at most 107 bytes, a
 * sockaddr_un). Bounded: at most PUB_MAX servers per process (an EAL takes
 * at most four vdevs from tide_eal_opts).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>

#include "memif_publish.h"
#include "tide_log.h"

#define PUB_MAX   8
#define NAME_MAX_ 64
#define PATH_MAX_ 108 /* sockaddr_un.sun_path */

struct pub {
	bool used;
	bool published;
	dev_t dev; /* the published file, to unlink only our own */
	ino_t ino;
	char name[NAME_MAX_];
	char path[PATH_MAX_];
	char tmp[PATH_MAX_];
};

static struct pub pubs[PUB_MAX];

const char *
tide_memif_arg_find(const char *args, const char *key, size_t *len)
{
	size_t kl = strlen(key);

	for (const char *p = args; p != NULL && *p != '\0';) {
		const char *end = strchr(p, ',');
		size_t n = end != NULL ? (size_t)(end - p) : strlen(p);

		if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
			*len = n - kl - 1;
			return p + kl + 1;
		}
		p = end != NULL ? end + 1 : NULL;
	}
	return NULL;
}

bool
tide_memif_arg_is(const char *args, const char *key, const char *val)
{
	size_t len;
	const char *v = tide_memif_arg_find(args, key, &len);

	return v != NULL && len == strlen(val) && strncmp(v, val, len) == 0;
}

const char *
tide_memif_devargs(const struct rte_eth_dev_info *di)
{
	const struct rte_devargs *da;

	if (di->driver_name == NULL || strcmp(di->driver_name, "net_memif") != 0 ||
	    di->device == NULL)
		return NULL;
	da = rte_dev_devargs(di->device);
	return da != NULL && da->args != NULL ? da->args : "";
}

static struct pub *
pub_find(const char *devname)
{
	for (int i = 0; i < PUB_MAX; i++)
		if (pubs[i].used && strcmp(pubs[i].name, devname) == 0)
			return &pubs[i];
	return NULL;
}

int
tide_memif_vdev_rewrite(const char *vdev, char *out, size_t outlen)
{
	const char *args = strchr(vdev, ','), *path;
	size_t name_len = args != NULL ? (size_t)(args - vdev) : strlen(vdev), path_len;
	struct pub *slot = NULL;
	int n;

	if (strlen(vdev) >= outlen)
		return -E2BIG;
	snprintf(out, outlen, "%s", vdev);
	if (strncmp(vdev, "net_memif", 9) != 0 || args == NULL || name_len >= NAME_MAX_ ||
	    !tide_memif_arg_is(args + 1, "role", "server") ||
	    !tide_memif_arg_is(args + 1, "socket-abstract", "no"))
		return 0;
	path = tide_memif_arg_find(args + 1, "socket", &path_len);
	if (path == NULL || path_len == 0)
		return 0;
	for (int i = 0; i < PUB_MAX && slot == NULL; i++)
		if (!pubs[i].used)
			slot = &pubs[i];
	if (slot == NULL)
		return -ENOSPC;
	memset(slot, 0, sizeof(*slot));
	n = snprintf(slot->tmp, sizeof(slot->tmp), "%.*s.%d.starting", (int)path_len, path,
		     (int)getpid());
	if (path_len >= sizeof(slot->path) || n < 0 || (size_t)n >= sizeof(slot->tmp)) {
		TIDE_LOG(ERR,
			 "%.*s: memif socket path '%.*s' leaves no room for its private "
			 "start-up name (at most %d bytes)",
			 (int)name_len, vdev, (int)path_len, path, PATH_MAX_ - 20);
		return -E2BIG;
	}
	snprintf(slot->path, sizeof(slot->path), "%.*s", (int)path_len, path);
	snprintf(slot->name, sizeof(slot->name), "%.*s", (int)name_len, vdev);
	n = snprintf(out, outlen, "%.*s%s%s", (int)(path - vdev), vdev, slot->tmp, path + path_len);
	if (n < 0 || (size_t)n >= outlen)
		return -E2BIG;
	/* A private file left by a crashed process of the same pid would make
	 * the PMD's bind fail. */
	(void)unlink(slot->tmp);
	slot->used = true;
	return 1;
}

int
tide_memif_publish(const char *devname)
{
	struct pub *p = pub_find(devname);
	struct stat st;

	if (p == NULL || p->published)
		return 0;
	if (rename(p->tmp, p->path) != 0) {
		int rc = -errno;

		TIDE_LOG(ERR, "%s: cannot move the memif socket %s to %s: %s", devname, p->tmp,
			 p->path, strerror(errno));
		return rc;
	}
	if (stat(p->path, &st) == 0) {
		p->dev = st.st_dev;
		p->ino = st.st_ino;
	}
	p->published = true;
	return 0;
}

void
tide_memif_unpublish(const char *devname)
{
	struct pub *p = pub_find(devname);
	struct stat st;

	/* Back to the private name, where the PMD's close unlinks it; a newer
	 * server's file at the configured path is left alone. */
	if (p != NULL && p->published && stat(p->path, &st) == 0 && st.st_dev == p->dev &&
	    st.st_ino == p->ino && rename(p->path, p->tmp) == 0)
		p->published = false;
}

void
tide_memif_forget(const char *devname)
{
	struct pub *p = pub_find(devname);

	if (p == NULL)
		return;
	if (!p->published)
		(void)unlink(p->tmp); /* PMDs that leave their socket file behind */
	p->used = false;
}

void
tide_memif_forget_all(void)
{
	memset(pubs, 0, sizeof(pubs));
}
