// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-shortbridge: join two interfaces of a namespace point to point with the shortbridge
 * eBPF program (../bpf/shortbridge.bpf.c), one load per direction:
 *
 *   sfc-shortbridge --netns NAME [--via-egress] IFACE_A IFACE_B
 *
 * NAME '-' is the namespace the tool runs in (a real host's root context, where its agent runs).
 * Inside namespace NAME (/run/netns/NAME), the program is attached at tcx ingress of IFACE_A
 * redirecting to IFACE_B, and at tcx ingress of IFACE_B redirecting to IFACE_A.  A frame bound
 * for a veth is delivered into the veth's other end directly (bpf_redirect_peer), unless
 * --via-egress asks for the veth's egress path (where a shaper sits).  The
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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/ethtool.h>
#include <linux/sockios.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "netns.h"
#include "shortbridge.skel.h"

#define ATTACH_TCX_INGRESS 46 /* enum bpf_attach_type, from the running kernel */

/* 1 if `ifname` is a veth (its driver, as ethtool tells it), 0 if not, -1 on error */
static int is_veth(const char *ifname)
{
	struct ethtool_drvinfo info = {.cmd = ETHTOOL_GDRVINFO};
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&info;
	rc = ioctl(fd, SIOCETHTOOL, &ifr);
	close(fd);
	if (rc)
		return -1;
	return !strcmp(info.driver, "veth");
}

/* attach a program redirecting every frame arriving on `from` to `to` (into its peer when
 * `into_peer`) */
static int join(const char *from, unsigned int from_idx, const char *to, unsigned int to_idx,
		int into_peer)
{
	struct shortbridge *skel;
	int err, rc = -1;

	skel = shortbridge__open();
	if (!skel) {
		log_err("Failed to open the shortbridge program: %s", strerror(errno));
		return -1;
	}
	skel->rodata->peer_ifindex = to_idx;
	skel->rodata->into_peer = (__u8)into_peer;
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

#define USAGE "usage: sfc-shortbridge --netns NAME [--via-egress] IFACE_A IFACE_B\n"

int main(int argc, char **argv)
{
	const char *ns, *ia, *ib;
	unsigned int a, b;
	int via_egress = 0, va, vb;

	log_init(argv[0]);
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf(USAGE);
		return 0;
	}
	if (argc == 6 && !strcmp(argv[3], "--via-egress"))
		via_egress = 1;
	if (argc != 5 + via_egress || strcmp(argv[1], "--netns")) {
		fprintf(stderr, USAGE);
		return 2;
	}
	ns = argv[2];
	ia = argv[3 + via_egress];
	ib = argv[4 + via_egress];
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (netns_enter(ns))
		return 1;
	a = if_nametoindex(ia);
	b = if_nametoindex(ib);
	if (!a || !b) {
		log_err("Failed to find interface %s: %s", a ? ib : ia, strerror(errno));
		return 1;
	}
	va = is_veth(ia);
	vb = is_veth(ib);
	if (va < 0 || vb < 0) {
		log_err("Failed to read the driver of %s: %s", va < 0 ? ia : ib, strerror(errno));
		return 1;
	}
	if (join(ia, a, ib, b, vb && !via_egress) || join(ib, b, ia, a, va && !via_egress))
		return 1;
	return 0;
}
