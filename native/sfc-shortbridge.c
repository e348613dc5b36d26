// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-shortbridge: the shortbridge of a point-to-point link in a host context, in one of two
 * forms:
 *
 *   sfc-shortbridge --netns NAME [--via-egress] IFACE_A IFACE_B
 *   sfc-shortbridge --netns NAME [--via-egress] --underlay UL --vni N --local ADDR \
 *                   --remote ADDR --remote-mac MAC [--udp-port P] --owner MARK PORT
 *
 * NAME '-' is the namespace the tool runs in (a real host's root context, where its agent runs).
 *
 * Two devices: inside namespace NAME (/run/netns/NAME), ../bpf/shortbridge.bpf.c is attached
 * at tcx ingress of IFACE_A redirecting to IFACE_B, and at tcx ingress of IFACE_B redirecting
 * to IFACE_A (a kernel VXLAN device and a port, or two ports of one host).  A frame bound for a
 * veth is delivered into the veth's other end directly (bpf_redirect_peer), unless
 * --via-egress asks for the veth's egress path (where a shaper sits).
 *
 * Own tunnel end (--underlay): no VXLAN device.  ../bpf/vxlan_encap.bpf.c at tcx ingress of
 * PORT puts the link's outer headers (UL's MAC -> MAC, ADDR -> ADDR, UDP port P (4789), VNI N)
 * on every frame the node sends and sends it out of UL; ../bpf/vxlan_decap.bpf.c at tcx
 * ingress of UL (appended after the programs already there) strips them from this link's
 * frames and hands the inner frame to the node (into its end of PORT, or through PORT's
 * egress with --via-egress), and passes everything else on.
 *
 * The decapsulation carries MARK (the lab's, at most VXLAN_OWNER_LEN - 1 bytes) in its .rodata.
 *
 * --detach IFACE takes these programs (by name) off tcx ingress of IFACE (tests); with --vni,
 * --local, --remote and --owner (and --udp-port) only the vxlan_decap loaded for that tunnel
 * that carries that mark (a real host's underlay interface outlives the lab: its teardown
 * removes only what proves to be the lab's); --show IFACE lists the names of
 * the programs there (bpftool 7.1 does not list tcx); --counters IFACE prints what each tunnel
 * end there has counted (struct vxlan_counts), one JSON object a line.
 *
 * The attachments are held by the interfaces, which live in the lab's host context namespace:
 * removing the namespace detaches them (this kernel refuses to pin BPF links).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
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
#include <linux/if_ether.h>
#include <linux/sockios.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "netns.h"
#include "shortbridge.skel.h"
#include "vxlan_tunnel.h"
#include "vxlan_decap.skel.h"
#include "vxlan_encap.skel.h"

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

struct tunnel {
	const char *underlay;
	const char *owner; /* the lab's mark, carried by the decapsulation */
	unsigned int vni, udp_port;
	struct in_addr local, remote;
	__u8 remote_mac[ETH_ALEN];
};

/* 1 if program `fd` is a vxlan_decap loaded for tunnel `t` with its owner's mark (its
 * load-time settings, read from its .rodata map), 0 if not */
static int decap_of(int fd, const struct tunnel *t)
{
	__u32 ids[8], len;
	struct bpf_prog_info info = {0};
	int found = 0;

	info.nr_map_ids = 8;
	info.map_ids = (__u64)(unsigned long)ids;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return 0;
	for (__u32 i = 0; i < info.nr_map_ids && i < 8 && !found; i++) {
		struct bpf_map_info mi = {0};
		struct vxlan_decap__rodata ro;
		char buf[256];
		__u32 mlen = sizeof(mi), zero = 0;
		int mfd = bpf_map_get_fd_by_id(ids[i]);

		if (mfd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(mfd, &mi, &mlen) && strstr(mi.name, ".rodata") &&
		    mi.value_size <= sizeof(buf) && !bpf_map_lookup_elem(mfd, &zero, buf)) {
			memset(&ro, 0, sizeof(ro));
			memcpy(&ro, buf, mi.value_size < sizeof(ro) ? mi.value_size : sizeof(ro));
			found = ro.vni == t->vni && ro.local_addr == t->local.s_addr &&
				ro.remote_addr == t->remote.s_addr && ro.udp_port == t->udp_port &&
				!strncmp((const char *)ro.owner, t->owner, VXLAN_OWNER_LEN);
		}
		close(mfd);
	}
	return found;
}

/* the MAC address of `ifname`, 0 or -1 on error */
static int mac_of(const char *ifname, __u8 mac[ETH_ALEN])
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	rc = ioctl(fd, SIOCGIFHWADDR, &ifr);
	close(fd);
	if (rc)
		return -1;
	memcpy(mac, ifr.ifr_hwaddr.sa_data, ETH_ALEN);
	return 0;
}

/* the link's own tunnel end: encapsulation at `port`'s ingress, decapsulation at the
 * underlay's */
static int terminate(const struct tunnel *t, const char *port, unsigned int port_idx,
		     unsigned int ul_idx, int into_peer)
{
	struct vxlan_encap *enc = NULL;
	struct vxlan_decap *dec = NULL;
	int err, rc = -1;

	enc = vxlan_encap__open();
	dec = vxlan_decap__open();
	if (!enc || !dec) {
		log_err("Failed to open the tunnel programs: %s", strerror(errno));
		goto cleanup;
	}
	enc->rodata->underlay_ifindex = ul_idx;
	if (mac_of(t->underlay, (__u8 *)enc->rodata->local_mac)) {
		log_err("Failed to read the MAC address of %s: %s", t->underlay, strerror(errno));
		goto cleanup;
	}
	memcpy((void *)enc->rodata->remote_mac, t->remote_mac, ETH_ALEN);
	enc->rodata->local_addr = t->local.s_addr;
	enc->rodata->remote_addr = t->remote.s_addr;
	enc->rodata->vni = t->vni;
	enc->rodata->udp_port = (__u16)t->udp_port;
	dec->rodata->port_ifindex = port_idx;
	dec->rodata->into_peer = (__u8)into_peer;
	dec->rodata->local_addr = t->local.s_addr;
	dec->rodata->remote_addr = t->remote.s_addr;
	dec->rodata->vni = t->vni;
	dec->rodata->udp_port = (__u16)t->udp_port;
	snprintf((char *)dec->rodata->owner, VXLAN_OWNER_LEN, "%s", t->owner);
	err = vxlan_encap__load(enc);
	if (!err)
		err = vxlan_decap__load(dec);
	if (err) {
		log_err("Failed to load the tunnel programs: %s", strerror(-err));
		goto cleanup;
	}
	if (bpf_prog_attach(bpf_program__fd(enc->progs.vxlan_encap), (int)port_idx,
			    ATTACH_TCX_INGRESS, 0)) {
		log_err("Failed to attach the tunnel's encapsulation at %s: %s", port, strerror(errno));
		goto cleanup;
	}
	if (bpf_prog_attach(bpf_program__fd(dec->progs.vxlan_decap), (int)ul_idx,
			    ATTACH_TCX_INGRESS, 0)) {
		log_err("Failed to attach the tunnel's decapsulation at %s: %s", t->underlay,
			strerror(errno));
		/* the encapsulation stays with the port, which the lab's teardown removes */
		goto cleanup;
	}
	rc = 0;
cleanup:
	vxlan_decap__destroy(dec);
	vxlan_encap__destroy(enc);
	return rc;
}

/* print the counters (struct vxlan_counts, the program's whole .bss map) of tunnel end
 * program `fd` named `name` as one JSON object on a line */
static void print_counts(int fd, const char *name, __u32 id)
{
	__u32 maps[8], len, zero = 0;
	struct bpf_prog_info info = {0};
	struct vxlan_counts c;

	len = sizeof(info);
	info.nr_map_ids = 8;
	info.map_ids = (__u64)(unsigned long)maps;
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return;
	for (__u32 i = 0; i < info.nr_map_ids && i < 8; i++) {
		struct bpf_map_info mi = {0};
		__u32 mlen = sizeof(mi);
		int mfd = bpf_map_get_fd_by_id(maps[i]);

		if (mfd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(mfd, &mi, &mlen) && strstr(mi.name, ".bss") &&
		    mi.value_size == sizeof(c) && !bpf_map_lookup_elem(mfd, &zero, &c))
			printf("{\"program\": \"%s\", \"id\": %u, \"frames\": %llu, "
			       "\"gso_frames\": %llu, \"gso_bytes\": %llu, \"other\": %llu, "
			       "\"errors\": %llu}\n", name, id, (unsigned long long)c.frames,
			       (unsigned long long)c.gso_frames, (unsigned long long)c.gso_bytes,
			       (unsigned long long)c.other, (unsigned long long)c.errors);
		close(mfd);
	}
}

/* detach the shortbridge's programs (by name) from tcx ingress of `ifname` (with `t`, only
 * the vxlan_decap of that tunnel), or with `show` 1 print the names of all programs there, one
 * a line, in their order, with `show` 2 the counters of its tunnel ends (print_counts) */
static int detach(const char *ifname, unsigned int idx, int show, const struct tunnel *t)
{
	static const char *const ours[] = {"shortbridge", "vxlan_encap", "vxlan_decap"};
	__u32 ids[64], cnt = 64, flags = 0;
	int rc = 0;

	if (bpf_prog_query((int)idx, ATTACH_TCX_INGRESS, 0, &flags, ids, &cnt)) {
		log_err("Failed to list the programs at %s: %s", ifname, strerror(errno));
		return -1;
	}
	for (__u32 i = 0; i < cnt; i++) {
		struct bpf_prog_info info = {0};
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(ids[i]);

		if (fd < 0)
			continue; /* gone meanwhile */
		if (!bpf_obj_get_info_by_fd(fd, &info, &len)) {
			if (show == 1)
				printf("%s\n", info.name);
			if (show == 2 && (!strcmp(info.name, "vxlan_encap") ||
					  !strcmp(info.name, "vxlan_decap")))
				print_counts(fd, info.name, ids[i]);
			for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]) && !show; k++) {
				if (strcmp(info.name, ours[k]))
					continue;
				if (t && (strcmp(info.name, "vxlan_decap") || !decap_of(fd, t)))
					continue;
				if (bpf_prog_detach2(fd, (int)idx, ATTACH_TCX_INGRESS)) {
					log_err("Failed to detach %s from %s: %s", info.name, ifname,
						strerror(errno));
					rc = -1;
				}
			}
		}
		close(fd);
	}
	return rc;
}

#define USAGE                                                                                   \
	"usage: sfc-shortbridge --netns NAME [--via-egress] IFACE_A IFACE_B\n"                  \
	"       sfc-shortbridge --netns NAME [--via-egress] --underlay UL --vni N --local ADDR\n" \
	"                       --remote ADDR --remote-mac MAC [--udp-port P] --owner MARK PORT\n" \
	"       sfc-shortbridge --netns NAME {--detach|--show|--counters} IFACE\n"            \
	"       sfc-shortbridge --netns NAME --detach UL --vni N --local ADDR --remote ADDR\n" \
	"                       [--udp-port P] --owner MARK\n"

static const struct option options[] = {
	{"help", no_argument, NULL, 'h'},
	{"netns", required_argument, NULL, 'n'},
	{"via-egress", no_argument, NULL, 'e'},
	{"underlay", required_argument, NULL, 'u'},
	{"vni", required_argument, NULL, 'v'},
	{"local", required_argument, NULL, 'l'},
	{"remote", required_argument, NULL, 'r'},
	{"remote-mac", required_argument, NULL, 'm'},
	{"udp-port", required_argument, NULL, 'p'},
	{"owner", required_argument, NULL, 'o'},
	{"detach", required_argument, NULL, 'd'},
	{"show", required_argument, NULL, 's'},
	{"counters", required_argument, NULL, 'c'},
	{NULL, 0, NULL, 0},
};

static int bad(const char *what, const char *value)
{
	fprintf(stderr, "sfc-shortbridge: bad %s '%s'\n" USAGE, what, value);
	return 2;
}

/* the command line: a tunnel (`have`: which of its settings were given, see below), the
 * namespace, and what to do */
struct args {
	struct tunnel t;
	const char *ns, *off; /* --netns; --detach/--show/--counters IFACE */
	int via_egress, listing, have; /* have: 1 vni, 2 local, 4 remote, 8 remote-mac, 16 owner */
};

/* one option into `a`: 0, or the exit status */
static int take_option(int opt, struct args *a)
{
	char *endp;

	switch (opt) {
	case 'h':
		printf(USAGE);
		return -1;
	case 'n':
		a->ns = optarg;
		return 0;
	case 'c':
		a->listing = 2;
		a->off = optarg;
		return 0;
	case 's':
		a->listing = 1;
		/* fall through */
	case 'd':
		a->off = optarg;
		return 0;
	case 'e':
		a->via_egress = 1;
		return 0;
	case 'u':
		a->t.underlay = optarg;
		return 0;
	case 'v':
		a->t.vni = (unsigned int)strtoul(optarg, &endp, 10);
		if (*endp || !a->t.vni || a->t.vni >= (1u << 24))
			return bad("VNI", optarg);
		a->have |= 1;
		return 0;
	case 'l':
	case 'r':
		if (inet_pton(AF_INET, optarg, opt == 'l' ? &a->t.local : &a->t.remote) != 1)
			return bad("IPv4 address", optarg);
		a->have |= opt == 'l' ? 2 : 4;
		return 0;
	case 'm':
		if (sscanf(optarg, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &a->t.remote_mac[0],
			   &a->t.remote_mac[1], &a->t.remote_mac[2], &a->t.remote_mac[3],
			   &a->t.remote_mac[4], &a->t.remote_mac[5]) != ETH_ALEN)
			return bad("MAC address", optarg);
		a->have |= 8;
		return 0;
	case 'o':
		if (!*optarg || strlen(optarg) >= VXLAN_OWNER_LEN)
			return bad("owner mark (1 to 63 bytes)", optarg);
		a->t.owner = optarg;
		a->have |= 16;
		return 0;
	case 'p':
		a->t.udp_port = (unsigned int)strtoul(optarg, &endp, 10);
		if (*endp || !a->t.udp_port || a->t.udp_port > 65535)
			return bad("UDP port", optarg);
		return 0;
	default:
		fprintf(stderr, USAGE);
		return 2;
	}
}

/* --detach, --show or --counters IFACE in namespace `a->ns`: the exit status */
static int off_or_show(const struct args *a)
{
	unsigned int idx;

	if (a->have && a->have != 23) {
		fprintf(stderr, "sfc-shortbridge: --detach of one tunnel needs --vni, --local, "
				"--remote and --owner\n" USAGE);
		return 2;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (netns_enter(a->ns))
		return 1;
	idx = if_nametoindex(a->off);
	if (!idx) {
		log_err("Failed to find interface %s: %s", a->off, strerror(errno));
		return 1;
	}
	return detach(a->off, idx, a->listing, a->have == 23 ? &a->t : NULL) ? 1 : 0;
}

/* the two devices' shortbridge, or the tunnel end at PORT and UL: the exit status */
static int bridge(const struct args *a, const char *ia, const char *ib)
{
	unsigned int x, y;
	int vx, vy;

	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (netns_enter(a->ns))
		return 1;
	x = if_nametoindex(ia);
	y = if_nametoindex(ib);
	if (!x || !y) {
		log_err("Failed to find interface %s: %s", x ? ib : ia, strerror(errno));
		return 1;
	}
	vx = is_veth(ia);
	vy = is_veth(ib);
	if (vx < 0 || vy < 0) {
		log_err("Failed to read the driver of %s: %s", vx < 0 ? ia : ib, strerror(errno));
		return 1;
	}
	if (a->t.underlay)
		return terminate(&a->t, ia, x, y, vx && !a->via_egress) ? 1 : 0;
	if (join(ia, x, ib, y, vy && !a->via_egress) || join(ib, y, ia, x, vx && !a->via_egress))
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct args a = {.t = {.udp_port = 4789}};
	int opt, rc;

	log_init(argv[0]);
	while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		rc = take_option(opt, &a);
		if (rc)
			return rc < 0 ? 0 : rc;
	}
	if (a.ns && a.off && optind == argc)
		return off_or_show(&a);
	if (!a.ns || a.off || argc - optind != (a.t.underlay ? 1 : 2) ||
	    (a.t.underlay && a.have != 31)) {
		fprintf(stderr, USAGE);
		return 2;
	}
	return bridge(&a, argv[optind], a.t.underlay ? a.t.underlay : argv[optind + 1]);
}
