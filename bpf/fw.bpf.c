// SPDX-License-Identifier: GPL-2.0
/*
 * The bpf-firewall (XDP, on every interface of a `bpf-firewall` node): an SFC-aware firewall.
 * It takes the place of the forwarder and of the proxy on its node, so a packet of a chain
 * never leaves XDP there and never loses its labels to a kernel function.  By the frame:
 *
 *   plain IPv4 (routed traffic, replies of a one-way chain): filtered; passed to the kernel or
 *       dropped.
 *   labelled, top label this node's proxy label (the chain stops at this function): the IPv4
 *       packet under the stack is filtered; if it passes, the proxy label and the forward label
 *       under it (also this node's) are popped and the frame redirected to the next hop, as
 *       the forwarder would send it.
 *   labelled, top label this node's forward label (a path crossing the node): forwarded
 *       unfiltered, as the forwarder does.
 *   any other frame (ARP, IPv6 ...): passed.
 *
 * Filtering (include/sfc_fw.h): in stateful mode a packet whose 5-tuple, or the reverse, is in
 * the connection map passes; otherwise the node's rules in order, first match wins, then the
 * policy.  An accepted packet in stateful mode enters its tuple in the connection map.  Every
 * decision is counted, in packets and IPv4 bytes, by the rule (or policy, or connection map)
 * that made it.  The node's data-plane counters count a chain's packets into the function
 * (proxy_in) and out of it (proxy_out) as the proxy does for a kernel function, so instance
 * shares and health read the same.
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

static __always_inline int fw_matches(const struct sfc_fw_rule *r, const struct sfc_tuple *t)
{
	__u16 sport = bpf_ntohs(t->sport), dport = bpf_ntohs(t->dport);

	if (r->proto && r->proto != t->proto)
		return 0;
	if ((t->src & r->src_mask) != r->src || (t->dst & r->dst_mask) != r->dst)
		return 0;
	return sport >= r->sport_first && sport <= r->sport_last &&
	       dport >= r->dport_first && dport <= r->dport_last;
}

/* SFC_FW_ACCEPT or SFC_FW_DROP for the packet with tuple `t` (t->node set) */
static __always_inline __u32 fw_verdict(struct sfc_tuple *t, __u32 bytes)
{
	__u32 k = node_id % SFC_MAX_NODES, one = 1, i, v;
	struct sfc_fw_config *cfg = bpf_map_lookup_elem(&sfc_fw_config, &k);

	if (!cfg) /* never: the array holds every node; zero until configured, drop all */
		return SFC_FW_DROP;
	if (cfg->stateful) {
		struct sfc_tuple rev = {.node = t->node, .src = t->dst, .dst = t->src,
					.sport = t->dport, .dport = t->sport, .proto = t->proto};

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
		if (fw_matches(r, t)) {
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

/* the tuple and IPv4 total length of the packet at `ip`; -1 if cut short or not IPv4 */
static __always_inline int fw_tuple(void *ip, void *end, struct sfc_tuple *t, __u32 *bytes)
{
	__u8 proto;

	if (sfc_parse_ip(ip, end, &t->src, &t->dst, &t->sport, &t->dport, &proto))
		return -1;
	t->node = node_id;
	t->proto = proto;
	*bytes = bpf_ntohs(*(__be16 *)(ip + 2));
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
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP)) {
		if (fw_tuple(lse, end, &t, &bytes))
			return XDP_PASS; /* not a packet the kernel would forward either */
		return fw_verdict(&t, bytes) == SFC_FW_ACCEPT ? XDP_PASS : XDP_DROP;
	}
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return XDP_PASS;
	if (sfc_function_top(ctx, lse, end, node_id, &ttl, &verdict))
		return verdict;
	/* the chain stops here: the packet under the stack is filtered */
	ip = sfc_function_packet(lse, end, node_id, &out);
	if (!ip || fw_tuple(ip, end, &t, &bytes)) {
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
	void *ip = NULL, *end;
	__u32 bytes;

	if (sfc_stage_ip(ctx, &ip) < 0)
		return XDP_PASS;
	end = (void *)(long)ctx->data_end;
	if (fw_tuple(ip, end, &t, &bytes))
		return sfc_stage_next(ctx); /* not IPv4 with its header: not for the rules */
	if (fw_verdict(&t, bytes) != SFC_FW_ACCEPT)
		return XDP_DROP;
	return sfc_stage_next(ctx);
}

char LICENSE[] SEC("license") = "GPL";
