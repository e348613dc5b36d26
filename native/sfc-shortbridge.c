// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-shortbridge: join two interfaces of a namespace point to point with the shortbridge
 * eBPF program (../bpf/shortbridge.bpf.c), one load per direction:
 *
 *   sfc-shortbridge --netns NAME IFACE_A IFACE_B
 *
 * Inside namespace NAME (/run/netns/NAME), the program is attached at tcx ingress of IFACE_A
 * redirecting to IFACE_B, and at tcx ingress of IFACE_B redirecting to IFACE_A.  The
 * attachments are held by the interfaces, which live in the lab's host context namespace:
 * removing the namespace detaches them (this kernel refuses to pin BPF links).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "shortbridge.skel.h"

#define ATTACH_TCX_INGRESS 46 /* enum bpf_attach_type, from the running kernel */

static int enter_netns(const char *name)
{
	char path[PATH_MAX];
	int fd;

	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
		log_err("invalid namespace name '%s'", name);
		return -1;
	}
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		log_err("Failed to enter namespace %s: %s", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* attach a program redirecting every frame arriving on `from` to `to` */
static int join(const char *from, unsigned int from_idx, const char *to, unsigned int to_idx)
{
	struct shortbridge *skel;
	int err, rc = -1;

	skel = shortbridge__open();
	if (!skel) {
		log_err("Failed to open the shortbridge program: %s", strerror(errno));
		return -1;
	}
	skel->rodata->peer_ifindex = to_idx;
	err = shortbridge__load(skel);
	if (err) {
		log_err("Failed to load the shortbridge program: %s", strerror(-err));
		goto cleanup;
	}
	err = bpf_prog_attach(bpf_program__fd(skel->progs.shortbridge), (int)from_idx,
			      ATTACH_TCX_INGRESS, 0);
	if (err) {
		log_err("Failed to attach the shortbridge %s -> %s: %s", from, to, strerror(errno));
		goto cleanup;
	}
	rc = 0;
cleanup:
	shortbridge__destroy(skel);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned int a, b;

	log_init(argv[0]);
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: sfc-shortbridge --netns NAME IFACE_A IFACE_B\n");
		return 0;
	}
	if (argc != 5 || strcmp(argv[1], "--netns")) {
		fprintf(stderr, "usage: sfc-shortbridge --netns NAME IFACE_A IFACE_B\n");
		return 2;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (enter_netns(argv[2]))
		return 1;
	a = if_nametoindex(argv[3]);
	b = if_nametoindex(argv[4]);
	if (!a || !b) {
		log_err("Failed to find interface %s: %s", a ? argv[4] : argv[3], strerror(errno));
		return 1;
	}
	if (join(argv[3], a, argv[4], b) || join(argv[4], b, argv[3], a))
		return 1;
	return 0;
}
