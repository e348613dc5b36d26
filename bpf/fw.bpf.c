// SPDX-License-Identifier: GPL-2.0
/*
 * The bpf-firewall (XDP, on every interface of a `bpf-firewall` node): an SFC-aware firewall.
 * It takes the place of the forwarder and of the proxy on its node, so a packet of a chain
 * never leaves XDP there and never loses its labels to a kernel function.  By the frame:
 *
 *   plain IPv4 or IPv6 (routed traffic, replies of a one-way chain, and what is addressed to
 *       the node itself): filtered; passed to the kernel or dropped.
 *   labelled, top label this node's proxy label (the chain stops at this function): the IPv4
 *       or IPv6 packet under the stack is filtered; if it passes, the proxy label and the
 *       forward label under it (also this node's) are popped and the frame redirected to the
 *       next hop, as the forwarder would send it.
 *   labelled, top label this node's forward label (a path crossing the node): forwarded
 *       unfiltered, as the forwarder does.
 *   any other frame (ARP ...): passed.
 *
 * Filtering (include/sfc_fw.h): in stateful mode a packet whose 5-tuple, or the reverse, is in
 * the connection map passes; otherwise the node's rules in order, first match wins, then the
 * policy.  One rule list serves both families, as the kernel firewall's `inet` table: a rule
 * matches the packets of its prefixes' family, or of either without prefixes.  An IPv6
 * packet's protocol and ports are those behind its extension headers (sfc_ip6_walk in
 * include/sfc.h: up to SFC_IP6_EXT_MAX of them; behind more, the protocol is the next
 * extension header's type and there are no ports; a later fragment has no ports, as an IPv4
 * one).  Neighbour discovery is filtered like any ICMPv6 packet -- the firewall sees what
 * arrives for the node itself, as the kernel firewall's `input` hook does -- so under policy
 * drop a node finds its IPv6 neighbours only if a rule accepts icmpv6.  An accepted packet in
 * stateful mode enters its tuple in the connection map.  Every decision is counted, in packets
 * and IP bytes, by the rule (or policy, or connection map) that made it.  The node's
 * data-plane counters count a chain's packets into the function (proxy_in) and out of it
 * (proxy_out) as the proxy does for a kernel function, so instance shares and health read the
 * same.
 *
 * XDP, not tcx: the forwarder's XDP hook is the one each chain interface has, and popping a
 * label in tc is refused (bpf_skb_adjust_room takes only IPv4/IPv6 packets).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfc.h"
#include "sfc_fw.h"
#include "sfc_pop.h"
#include "sfc_stage.h"

static __always_inline void fw_count(__u32 slot, __u32 bytes)
{
	__u32 k = (node_id % SFC_MAX_NODES) * SFC_FW_SLOTS + slot;
	struct sfc_fw_count *c = bpf_map_lookup_elem(&sfc_fw_counts, &k);

	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

/* Whether the 128-bit address `a` is in the prefix `net`/`mask`.  An IPv4 address (`six` 0)
 * is compared by its first word alone: the rules it meets (of IPv4, or of no prefix) hold 0 in
 * the others, so an IPv4 packet walks the rules at the cost of the IPv4-only layout. */
static __always_inline int fw_in_prefix(const __be32 *a, const __be32 *net, const __be32 *mask,
					int six)
{
	__be32 d = (a[0] & mask[0]) ^ net[0];

	if (six)
		d |= ((a[1] & mask[1]) ^ net[1]) | ((a[2] & mask[2]) ^ net[2]) |
		     ((a[3] & mask[3]) ^ net[3]);
	return !d;
}

static __always_inline int fw_matches(const struct sfc_fw_rule *r, const struct sfc_tuple *t,
				      int six)
{
	__u16 sport = bpf_ntohs(t->sport), dport = bpf_ntohs(t->dport);

	if (r->proto && r->proto != t->proto)
		return 0;
	if (r->family && r->family != t->family)
		return 0;
	if (!fw_in_prefix(t->src, r->src, r->src_mask, six) ||
	    !fw_in_prefix(t->dst, r->dst, r->dst_mask, six))
		return 0;
	return sport >= r->sport_first && sport <= r->sport_last &&
	       dport >= r->dport_first && dport <= r->dport_last;
}

/* SFC_FW_ACCEPT or SFC_FW_DROP for the packet with tuple `t` (t->node set) */
static __always_inline __u32 fw_verdict(struct sfc_tuple *t, __u32 bytes)
{
	__u32 k = node_id % SFC_MAX_NODES, one = 1, i, v;
	struct sfc_fw_config *cfg = bpf_map_lookup_elem(&sfc_fw_config, &k);
	int six = t->family == SFC_FAMILY_IPV6;

	if (!cfg) /* never: the array holds every node; zero until configured, drop all */
		return SFC_FW_DROP;
	if (cfg->stateful) {
		struct sfc_tuple rev = {.node = t->node, .sport = t->dport, .dport = t->sport,
					.proto = t->proto, .family = t->family};

		__builtin_memcpy(rev.src, t->dst, sizeof(rev.src));
		__builtin_memcpy(rev.dst, t->src, sizeof(rev.dst));
		if (bpf_map_lookup_elem(&sfc_fw_conns, t) ||
		    bpf_map_lookup_elem(&sfc_fw_conns, &rev)) {
			fw_count(SFC_FW_ESTABLISHED, bytes);
			return SFC_FW_ACCEPT;
		}
	}
	v = cfg->policy;
	for (i = 0; i < SFC_FW_MAX_RULES; i++) {
		__u32 rk = k * SFC_FW_MAX_RULES + i;
		struct sfc_fw_rule *r;

		if (i >= cfg->nrules)
			break;
		r = bpf_map_lookup_elem(&sfc_fw_rules, &rk);
		if (!r)
			break;
		if (fw_matches(r, t, six)) {
			fw_count(i, bytes);
			v = r->action;
			goto decided;
		}
	}
	fw_count(SFC_FW_POLICY, bytes);
decided:
	if (v == SFC_FW_ACCEPT && cfg->stateful)
		bpf_map_update_elem(&sfc_fw_conns, t, &one, BPF_ANY);
	return v;
}

/* Where a packet is in its frame. */
struct fw_pkt {
	__u32 ip;             /* the IP header's offset in the frame (after the Ethernet header, or
			       * under the label stack) */
	__u32 bytes;          /* its IP length, as counted */
};

/* The tuple of the IPv4 or IPv6 packet at offset p->ip of the frame into *t (node set), its IP
 * length into p->bytes; -1 if cut short (an IPv6 packet that never leaves its link, neighbour
 * discovery, is filtered like any other).  A global function, not inlined: the verifier checks
 * it once, by itself, instead of going through the rules once for each of its family and
 * extension-header paths; it finds the packet again from `ctx` (a global function takes no
 * packet pointer). */
__noinline int fw_parse(struct xdp_md *ctx, struct fw_pkt *p, struct sfc_tuple *t)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	if (!p || !t || sfc_tuple_of(data + (p->ip & 0x7f), end, t, &p->bytes) < 0)
		return -1;
	t->node = node_id;
	return 0;
}

/* fw_parse of the packet at `ip`: its tuple into *t and its length into *bytes; -1 if cut
 * short */
static __always_inline int fw_tuple(struct xdp_md *ctx, void *ip, struct sfc_tuple *t,
				    __u32 *bytes)
{
	struct fw_pkt p = {.ip = (__u32)((long)ip - (long)ctx->data)};

	if (fw_parse(ctx, &p, t))
		return -1;
	*bytes = p.bytes;
	return 0;
}

SEC("xdp")
int sfc_fw(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be32 *lse = (void *)(eth + 1);
	struct sfc_tuple t = {};
	struct sfc_way out;
	__u32 ttl, bytes;
	int verdict;
	void *ip;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP) || eth->h_proto == bpf_htons(SFC_ETH_P_IPV6)) {
		if (fw_tuple(ctx, lse, &t, &bytes))
			return XDP_PASS; /* not a packet the kernel would forward either */
		return fw_verdict(&t, bytes) == SFC_FW_ACCEPT ? XDP_PASS : XDP_DROP;
	}
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return XDP_PASS;
	if (sfc_function_top(ctx, lse, end, node_id, &ttl, &verdict))
		return verdict;
	/* the chain stops here: the packet under the stack is filtered */
	ip = sfc_function_packet(lse, end, node_id, &out);
	if (!ip || fw_tuple(ctx, ip, &t, &bytes)) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	sfc_count(SFC_C_PROXY_IN); /* in and out of the function, as the proxy counts them */
	if (fw_verdict(&t, bytes) != SFC_FW_ACCEPT)
		return XDP_DROP;
	return sfc_function_leave(ctx, &out, ttl);
}

/* the firewall as a stage of a bpf-pipeline node (include/sfc_stage.h): the packet is filtered,
 * then handed on */
SEC("xdp")
int sfc_fw_stage(struct xdp_md *ctx)
{
	struct sfc_tuple t = {};
	void *ip = NULL;
	__u32 bytes;

	if (sfc_stage_ip(ctx, &ip) < 0)
		return XDP_PASS;
	if (fw_tuple(ctx, ip, &t, &bytes))
		return sfc_stage_next(ctx); /* no whole IP header: not for the rules */
	if (fw_verdict(&t, bytes) != SFC_FW_ACCEPT)
		return XDP_DROP;
	return sfc_stage_next(ctx);
}

char LICENSE[] SEC("license") = "GPL";
