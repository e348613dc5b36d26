// SPDX-License-Identifier: Apache-2.0
/*
 * Loading and driving sfcgen's eBPF programs (see sfcgen_xdp.h and bpf/sfcgen_*.bpf.c).
 *
 * The sender runs bpf/sfcgen_tx.bpf.c with BPF_PROG_RUN in live-frames mode: each call
 * transmits `count` frames built from one template, and the program stamps every one.  The sink
 * attaches bpf/sfcgen_rx.bpf.c with BPF links and reads its maps: totals per CPU by lookup,
 * flow states through a shared memory mapping.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sfcgen_xdp.h"
#include "nl.h"
#include "sfcgen_tx.skel.h"
#include "sfcgen_rx.skel.h"
#include "sfc_classify.skel.h"

/* libbpf's last warning, so a failed load can say why (the verifier log goes there). */
static char libbpf_last[512];

static int libbpf_note(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	if (getenv("SFCGEN_BPF_DEBUG")) /* the whole libbpf log, verifier output included */
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (n)
		snprintf(libbpf_last, sizeof(libbpf_last), "%s", line);
	return 0;
}

static void libbpf_quiet(void)
{
	libbpf_set_print(libbpf_note);
	libbpf_last[0] = '\0';
}

/* ------------------------------------------------------------------------------------------ */

struct xdp_tx {
	struct sfcgen_tx *skel;
	struct sfc_classify *cls; /* the lab's classifier, with the lab's maps (or NULL) */
	struct bpf_link *hold; /* on loopback: keeps the program in the XDP dispatcher */
	int prog_fd;
};

/*
 * The lab's classifier for node `node`, sharing the maps pinned in `maps` (as sfc-steer loads
 * it: libbpf's pin root, node_id in .rodata), and its XDP entry put in the generator's
 * classify_then.  Only sfc_classify_xdp is loaded.  Returns 0, or -1 with why set.
 */
static int classify_open(struct xdp_tx *x, const char *maps, unsigned node, char *why,
			 size_t whylen)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = maps);
	__u32 zero = 0;
	int fd, err;

	x->cls = sfc_classify__open_opts(&opts);
	if (!x->cls) {
		snprintf(why, whylen, "cannot open the classifier: %s", strerror(errno));
		return -1;
	}
	x->cls->rodata->node_id = node;
	bpf_program__set_autoload(x->cls->progs.sfc_classify_egress, false);
	bpf_program__set_autoload(x->cls->progs.sfc_classify_ingress, false);
	err = sfc_classify__load(x->cls);
	if (err) {
		snprintf(why, whylen, "cannot load the classifier with the maps in %s: %s%s%s", maps,
			 strerror(-err), libbpf_last[0] ? ": " : "", libbpf_last);
		return -1;
	}
	fd = bpf_program__fd(x->cls->progs.sfc_classify_xdp);
	if (bpf_map__update_elem(x->skel->maps.classify_then, &zero, sizeof(zero), &fd,
				 sizeof(fd), BPF_ANY)) {
		snprintf(why, whylen, "cannot chain the classifier to the generator: %s",
			 strerror(errno));
		return -1;
	}
	return 0;
}

struct xdp_tx *xdp_tx_open(int ifindex, unsigned flows, unsigned threads, bool imix, uint16_t run,
			   const uint8_t headers[2 * HEADER_WORDS6], const char *classify_maps,
			   unsigned classify_node, char *why, size_t whylen, char *note,
			   size_t notelen)
{
	struct xdp_tx *x = calloc(1, sizeof(*x));
	int err;

	if (!x) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	libbpf_quiet();
	x->skel = sfcgen_tx__open();
	if (!x->skel) {
		snprintf(why, whylen, "cannot open the generator program: %s", strerror(errno));
		goto fail;
	}
	x->skel->rodata->flows = flows;
	x->skel->rodata->threads = threads;
	x->skel->rodata->imix = imix;
	x->skel->rodata->run = run;
	x->skel->rodata->tx_ifindex = (__u32)ifindex;
	x->skel->rodata->ipv6 = headers[12] == 0x86 && headers[13] == 0xdd;
	memcpy((void *)x->skel->rodata->headers, headers,
	       2 * (x->skel->rodata->ipv6 ? HEADER_WORDS6 : HEADER_WORDS));
	x->skel->rodata->classify = classify_maps != NULL;
	bpf_map__set_max_entries(x->skel->maps.flow_seq, flows);
	err = sfcgen_tx__load(x->skel);
	if (err) {
		snprintf(why, whylen, "cannot load the generator program: %s%s%s", strerror(-err),
			 libbpf_last[0] ? ": " : "", libbpf_last);
		goto fail;
	}
	x->prog_fd = bpf_program__fd(x->skel->progs.sfcgen_tx);
	if (classify_maps && classify_open(x, classify_maps, classify_node, why, whylen))
		goto fail;
	note[0] = '\0';
	x->hold = bpf_program__attach_xdp(x->skel->progs.sfcgen_tx, (int)if_nametoindex("lo"));
	err = libbpf_get_error(x->hold);
	if (err) {
		x->hold = NULL;
		snprintf(note, notelen, "cannot keep the program attached to lo (%s): every send "
			 "call waits for the XDP dispatcher", strerror(-err));
	}
	return x;
fail:
	xdp_tx_close(x);
	return NULL;
}

int xdp_tx_send(struct xdp_tx *x, int ifindex, const void *frame, unsigned len, unsigned count)
{
	struct xdp_md ctx = {.data_end = len, .ingress_ifindex = (unsigned)ifindex};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = count,
		    .flags = BPF_F_TEST_XDP_LIVE_FRAMES);

	if (bpf_prog_test_run_opts(x->prog_fd, &opts))
		return -errno;
	return 0;
}

void xdp_tx_set_window(struct xdp_tx *x, int64_t start_ns)
{
	x->skel->bss->win_start_ns = (__u64)start_ns;
}

int xdp_tx_thread_sent(struct xdp_tx *x, unsigned index, uint64_t *sent, uint64_t *bytes,
		       uint64_t *sent_window)
{
	struct xdp_tx_thread th;
	__u32 key = index;

	if (bpf_map__lookup_elem(x->skel->maps.tx_threads, &key, sizeof(key), &th, sizeof(th), 0))
		return -errno;
	*sent = th.sent;
	*bytes = th.bytes;
	*sent_window = th.sent_window;
	return 0;
}

int xdp_tx_flow_sent(struct xdp_tx *x, uint64_t *per_flow, unsigned flows)
{
	for (__u32 f = 0; f < flows; f++) {
		__u32 seq;

		if (bpf_map__lookup_elem(x->skel->maps.flow_seq, &f, sizeof(f), &seq, sizeof(seq), 0))
			return -errno;
		per_flow[f] = seq;
	}
	return 0;
}

void xdp_tx_close(struct xdp_tx *x)
{
	if (!x)
		return;
	bpf_link__destroy(x->hold);
	sfcgen_tx__destroy(x->skel);
	sfc_classify__destroy(x->cls);
	free(x);
}

int dev_xdp_tx_lost(const char *ifname, uint64_t *lost)
{
	struct rtnl_link_stats64 st = {0};
	int ifindex = (int)if_nametoindex(ifname), peer, peer_nsid;

	if (!ifindex || nl_link_get(ifindex, -1, &peer, &peer_nsid, &st))
		return -1;
	*lost = st.tx_dropped;
	return 0;
}

int veth_peer_rx_packets(const char *ifname, uint64_t *packets)
{
	struct rtnl_link_stats64 st = {0};
	int ifindex = (int)if_nametoindex(ifname), peer, peer_nsid, dummy;

	if (!ifindex || nl_link_get(ifindex, -1, &peer, &peer_nsid, &st) || peer <= 0)
		return -1;
	if (nl_link_get(peer, peer_nsid, &dummy, &dummy, &st))
		return -1;
	*packets = st.rx_packets;
	return 0;
}

/* ------------------------------------------------------------------------------------------ */

#define SINK_MAX_IFACES 64

#define ATTACH_TCX_INGRESS 46 /* enum bpf_attach_type, from the running kernel */

struct xdp_sink {
	struct sfcgen_rx *skel;
	enum sink_hook hook;
	struct bpf_link *links[SINK_MAX_IFACES]; /* XDP attachments */
	int tcx_fds[SINK_MAX_IFACES];            /* tcx ingress links (libbpf 1.1 knows no tcx) */
	unsigned nlinks, ntcx;
	unsigned flows;
	struct flow_state *flow_map; /* mmap of flow_states */
	size_t flow_map_len;
	char where[SINK_MAX_IFACES * 2 * 48 + 4]; /* one entry per hook and interface */
};

static bool is_loopback(const char *name)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool lo = false;

	if (fd < 0)
		return false;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (!ioctl(fd, SIOCGIFFLAGS, &ifr))
		lo = ifr.ifr_flags & IFF_LOOPBACK;
	close(fd);
	return lo;
}

/* 1 if `ifindex` already runs an XDP program (the data plane's), 0 if not. */
static int has_xdp(int ifindex)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	if (bpf_xdp_query(ifindex, 0, &q))
		return 0;
	return q.attach_mode != XDP_ATTACHED_NONE;
}

/* Count at tcx ingress of `ifindex`, after the programs already there; the link is the fd. */
static int sink_attach_tcx(struct xdp_sink *k, const char *name, int ifindex, char *why,
			   size_t whylen)
{
	int fd = bpf_link_create(bpf_program__fd(k->skel->progs.sfcgen_rx_tc), ifindex,
				 ATTACH_TCX_INGRESS, NULL);

	if (fd < 0) {
		snprintf(why, whylen, "cannot attach to tcx ingress of %s: %s", name,
			 strerror(errno));
		return -1;
	}
	k->tcx_fds[k->ntcx++] = fd;
	return 0;
}

/* Add `name` at `mode` to the JSON list of where the sink counts. */
static void sink_where_add(struct xdp_sink *k, const char *name, const char *mode)
{
	size_t used = strlen(k->where);

	snprintf(k->where + used, sizeof(k->where) - used, "%s{\"dev\":\"%s\",\"mode\":\"%s\"}",
		 used > 1 ? "," : "", name, mode);
}

/*
 * Count on `name`: at tcx ingress for --tc, or for --kernel where the interface has an XDP
 * program already; else at XDP, and for --kernel also at tcx ingress behind it.  A frame
 * handed into a veth by bpf_redirect_peer (the shortbridge's tunnel end, a tcx program
 * redirecting into its peer) skips the veth's XDP but not its tcx ingress: what XDP counted
 * it dropped, so the tcx program counts exactly the frames XDP never saw.
 */
static int sink_attach(struct xdp_sink *k, const char *name, char *why, size_t whylen)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int ifindex = (int)if_nametoindex(name), err;
	struct bpf_link *link;

	if (!ifindex) {
		snprintf(why, whylen, "no interface %s", name);
		return -1;
	}
	if (k->nlinks == SINK_MAX_IFACES || k->ntcx == SINK_MAX_IFACES) {
		snprintf(why, whylen, "more than %d interfaces", SINK_MAX_IFACES);
		return -1;
	}
	if (k->hook == SINK_TC || (k->hook == SINK_KERNEL && has_xdp(ifindex))) {
		if (sink_attach_tcx(k, name, ifindex, why, whylen))
			return -1;
		sink_where_add(k, name, "tcx");
		return 0;
	}
	link = bpf_program__attach_xdp(k->skel->progs.sfcgen_rx, ifindex);
	err = libbpf_get_error(link);
	if (err) {
		snprintf(why, whylen, "cannot attach to %s: %s%s", name, strerror(-err),
			 err == -EBUSY || err == -EEXIST ?
			 " (it has another XDP program: --tc or --kernel count behind it)" : "");
		return -1;
	}
	k->links[k->nlinks++] = link;
	bpf_xdp_query(ifindex, 0, &q);
	sink_where_add(k, name, q.attach_mode == XDP_ATTACHED_DRV ? "native" :
			       q.attach_mode == XDP_ATTACHED_SKB ? "generic" : "other");
	if (k->hook == SINK_KERNEL) {
		if (sink_attach_tcx(k, name, ifindex, why, whylen))
			return -1;
		sink_where_add(k, name, "tcx");
	}
	return 0;
}

/* Attach the sink to every named interface (a comma-separated list), or with NULL or "auto"
 * to every interface but loopback.  Returns 0, or -1 with why set. */
static int sink_attach_all(struct xdp_sink *k, const char *ifnames, char *why, size_t whylen)
{
	if (!ifnames || !strcmp(ifnames, "auto")) {
		struct if_nameindex *all = if_nameindex(), *i;

		if (!all) {
			snprintf(why, whylen, "cannot list interfaces: %s", strerror(errno));
			return -1;
		}
		for (i = all; i->if_index; i++) {
			if (is_loopback(i->if_name))
				continue;
			if (sink_attach(k, i->if_name, why, whylen)) {
				if_freenameindex(all);
				return -1;
			}
		}
		if_freenameindex(all);
		if (!k->nlinks && !k->ntcx) {
			snprintf(why, whylen, "no interface other than loopback");
			return -1;
		}
	} else {
		char *list = strdup(ifnames), *save = NULL, *name;

		if (!list) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		for (name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
			if (sink_attach(k, name, why, whylen)) {
				free(list);
				return -1;
			}
		}
		free(list);
		if (!k->nlinks && !k->ntcx) {
			snprintf(why, whylen, "no interface named");
			return -1;
		}
	}
	return 0;
}

struct xdp_sink *xdp_sink_open(enum sink_hook hook, unsigned port, unsigned flows,
			       const char *ifnames, char *why, size_t whylen)
{
	struct xdp_sink *k = calloc(1, sizeof(*k));
	size_t value_size;
	long page = sysconf(_SC_PAGESIZE);
	int err;

	if (!k) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	k->flows = flows;
	k->hook = hook;
	libbpf_quiet();
	k->skel = sfcgen_rx__open();
	if (!k->skel) {
		snprintf(why, whylen, "cannot open the sink program: %s", strerror(errno));
		goto fail;
	}
	k->skel->rodata->port_be = htons((uint16_t)port);
	k->skel->rodata->flows = flows;
	bpf_map__set_max_entries(k->skel->maps.flow_states, flows);
	err = sfcgen_rx__load(k->skel);
	if (err) {
		snprintf(why, whylen, "cannot load the sink program: %s%s%s", strerror(-err),
			 libbpf_last[0] ? ": " : "", libbpf_last);
		goto fail;
	}
	value_size = bpf_map__value_size(k->skel->maps.flow_states);
	if (value_size != sizeof(struct flow_state)) {
		snprintf(why, whylen, "flow state is %zu bytes in the program, %zu here", value_size,
			 sizeof(struct flow_state));
		goto fail;
	}
	k->flow_map_len = ((size_t)flows * value_size + (size_t)page - 1) / (size_t)page * (size_t)page;
	k->flow_map = mmap(NULL, k->flow_map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
			   bpf_map__fd(k->skel->maps.flow_states), 0);
	if (k->flow_map == MAP_FAILED) {
		k->flow_map = NULL;
		snprintf(why, whylen, "cannot map the flow states: %s", strerror(errno));
		goto fail;
	}
	strcpy(k->where, "[");
	if (sink_attach_all(k, ifnames, why, whylen))
		goto fail;
	strcat(k->where, "]");
	return k;
fail:
	xdp_sink_close(k);
	return NULL;
}

const char *xdp_sink_where(const struct xdp_sink *k)
{
	return k->where;
}

const char *xdp_sink_mode(const struct xdp_sink *k)
{
	static const char *const names[] = {[SINK_XDP] = "xdp", [SINK_TC] = "tc",
					    [SINK_KERNEL] = "kernel"};

	return names[k->hook];
}

int xdp_sink_read(struct xdp_sink *k, struct xdp_sink_totals *sum, struct flow_state *flows,
		  bool reset)
{
	int ncpu = libbpf_num_possible_cpus();
	size_t stride = (sizeof(struct xdp_sink_totals) + 7) / 8 * 8;
	struct xdp_sink_totals *per;
	__u32 zero = 0;
	int ret = -1;

	if (ncpu < 1)
		return -1;
	per = calloc((size_t)ncpu, stride);
	if (!per)
		return -1;
	if (bpf_map_lookup_elem(bpf_map__fd(k->skel->maps.totals), &zero, per))
		goto out;
	memset(sum, 0, sizeof(*sum));
	for (int c = 0; c < ncpu; c++) {
		const struct xdp_sink_totals *t = (const void *)((const char *)per + c * stride);

		sum->received += t->received;
		sum->received_window += t->received_window;
		if (t->win_first_ns) { /* sum: the counts in win_rx_last, the span's ends */
			sum->win_rx_last += t->win_rx_last - t->win_rx_before;
			if (!sum->win_first_ns || t->win_first_ns < sum->win_first_ns)
				sum->win_first_ns = t->win_first_ns;
			if (t->win_last_ns > sum->win_last_ns)
				sum->win_last_ns = t->win_last_ns;
		}
		sum->bytes += t->bytes;
		sum->invalid += t->invalid;
		sum->lat_sum_ns += t->lat_sum_ns;
		if (t->lat_count && (!sum->lat_count || t->lat_min_ns < sum->lat_min_ns))
			sum->lat_min_ns = t->lat_min_ns;
		sum->lat_count += t->lat_count;
		if (t->lat_max_ns > sum->lat_max_ns)
			sum->lat_max_ns = t->lat_max_ns;
		if (t->first_ns && (!sum->first_ns || t->first_ns < sum->first_ns))
			sum->first_ns = t->first_ns;
		if (t->last_ns > sum->last_ns)
			sum->last_ns = t->last_ns;
		for (unsigned b = 0; b < HIST_BUCKETS; b++)
			sum->hist[b] += t->hist[b];
	}
	if (flows)
		memcpy(flows, k->flow_map, (size_t)k->flows * sizeof(struct flow_state));
	if (reset) {
		memset(per, 0, (size_t)ncpu * stride);
		if (bpf_map_update_elem(bpf_map__fd(k->skel->maps.totals), &zero, per, BPF_ANY))
			goto out;
		memset(k->flow_map, 0, (size_t)k->flows * sizeof(struct flow_state));
	}
	ret = 0;
out:
	free(per);
	return ret;
}

void xdp_sink_close(struct xdp_sink *k)
{
	if (!k)
		return;
	for (unsigned i = 0; i < k->nlinks; i++)
		bpf_link__destroy(k->links[i]);
	for (unsigned i = 0; i < k->ntcx; i++)
		close(k->tcx_fds[i]);
	if (k->flow_map)
		munmap(k->flow_map, k->flow_map_len);
	sfcgen_rx__destroy(k->skel);
	free(k);
}
