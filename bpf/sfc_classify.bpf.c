// SPDX-License-Identifier: GPL-2.0
/*
 * The SFC classifier (tc, at a chain's ingress node: tcx egress for traffic the node sends
 * itself, tcx ingress for traffic it receives and passes on; XDP for sfcgen's live frames,
 * which never pass the node's tcx egress: see sfc_classify_xdp below).
 *
 * IPv4 and IPv6 packets are looked up alike, in one key (struct sfc_class_key in sfc.h).
 * Lookup is tuple-space search: one exact-match hash lookup per distinct wildcard mask in the
 * lab (sfc_masks, at most SFC_MAX_MASKS), so its cost grows with the number of masks, never
 * with the number of entries; port ranges arrive expanded to prefixes.  The best priority
 * wins.  The chain's slot table (weighted by the planner) picks the path by a hash of the flow
 * -- the same for both directions of a symmetric chain -- and the path's whole label stack is
 * pushed in one step.  Unmatched packets pass untouched and follow routes.  A path of an NSH
 * chain (sfc_path.encap) holds its NSH header in place of labels: the same push, ethertype
 * 0x894F, and the next protocol set by the packet's family (include/sfc_nsh.h).  An SRv6 chain's path (its entries marked
 * SFC_LSE_SRV6) is written as an outer IPv6 header and SRH instead (include/sfc_srv6.h).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfc.h"
#include "sfc_nsh.h"
#include "sfc_srv6.h"

/* A packet's classifier fields: addresses in four words (IPv4 in the first), its family. */
struct flow {
	__be32 src[4];
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;
};

/* the entry of best priority over every wildcard mask in use (tuple-space search), or 0 */
static __always_inline struct sfc_match *best_match(const struct flow *f)
{
	struct sfc_class_key key = {};
	struct sfc_match *best = 0;

	key.node = node_id;
	for (__u32 i = 0; i < SFC_MAX_MASKS; i++) {
		__u32 k = i;
		struct sfc_mask *m = bpf_map_lookup_elem(&sfc_masks, &k);
		struct sfc_match *hit;

		if (!m || !m->used)
			break;
		key.mask = i;
		for (int w = 0; w < 4; w++) {
			key.src[w] = f->src[w] & m->src[w];
			key.dst[w] = f->dst[w] & m->dst[w];
		}
		key.sport = f->sport & m->sport;
		key.dport = f->dport & m->dport;
		key.proto = f->proto & m->proto;
		key.family = f->family & m->family;
		hit = bpf_map_lookup_elem(&sfc_classes, &key);
		if (hit && (!best || hit->priority > best->priority))
			best = hit;
	}
	return best;
}

/* the path's label stack pushed and the frame readdressed to its first hop: 0, or -1 (the
 * counter of why already counted) */
static __always_inline int push_stack(struct __sk_buff *skb, struct sfc_path *path, __u8 np)
{
	struct ethhdr neth;

	if (skb->gso_size) {
		/* labels cannot be pushed onto a GSO packet (the kernel would segment the labels as
		 * if they were the IP header): the lab turns GSO off where classifiers push */
		sfc_count(SFC_C_GSO);
		return -1;
	}
	if (bpf_skb_adjust_room(skb, (__s32)(4 * path->depth), BPF_ADJ_ROOM_MAC, 0)) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	for (__u32 i = 0; i < SFC_MAX_LABELS; i++) {
		if (i >= path->depth)
			break;
		if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + 4 * i, &path->lse[i], 4, 0)) {
			sfc_count(SFC_C_ERRORS);
			return -1;
		}
	}
	__builtin_memcpy(neth.h_dest, path->dmac, ETH_ALEN);
	__builtin_memcpy(neth.h_source, path->smac, ETH_ALEN);
	neth.h_proto = bpf_htons(SFC_ETH_P_MPLS_UC);
	if (path->encap == SFC_ENCAP_NSH) {
		neth.h_proto = bpf_htons(SFC_ETH_P_NSH);
		if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + 3, &np, 1, 0)) {
			sfc_count(SFC_C_ERRORS);
			return -1;
		}
	}
	if (bpf_skb_store_bytes(skb, 0, &neth, sizeof(neth), 0)) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	return 0;
}

/*
 * The path of a flow of best match `best`: picked by the chain's slot table, its counters
 * counted.  NULL when the flow is to be dropped (the chain has no instance left, or an entry
 * is broken; the counter of why already counted), else the path with its index in *pi.
 */
static __always_inline struct sfc_path *choose_path(struct sfc_match *best,
						    const struct flow *f, __u32 *pi,
						    int *unmatched)
{
	struct sfc_chain *chain;
	struct sfc_path *path;
	__u32 h, c = best->chain;

	chain = bpf_map_lookup_elem(&sfc_chains, &c);
	if (!chain || !chain->nslots) {
		*unmatched = 1;
		return 0;
	}
	/* an IPv6 address folded to one word (an IPv4 one is its first word, the rest 0) */
	h = sfc_flow_hash(f->src[0] ^ f->src[1] ^ f->src[2] ^ f->src[3],
			  f->dst[0] ^ f->dst[1] ^ f->dst[2] ^ f->dst[3], f->sport, f->dport, f->proto,
			  chain->symmetric);
	*pi = chain->slot[(h % chain->nslots) & (SFC_MAX_SLOTS - 1)];
	path = bpf_map_lookup_elem(&sfc_paths, pi);
	if (path && !path->depth) {
		/* an empty path: the chain's group has no instance left (failover); never leak
		 * the flow past the missing function */
		sfc_count(SFC_C_NO_INSTANCE);
		return 0;
	}
	if (!path || path->depth > SFC_MAX_LABELS) {
		sfc_count(SFC_C_ERRORS);
		return 0;
	}
	return path;
}

static __always_inline void count_classified(__u32 pi)
{
	__u64 *n;

	sfc_count(SFC_C_CLASSIFIED);
	n = bpf_map_lookup_elem(&sfc_path_counts, &pi);
	if (n)
		*n += 1;
}

/* The classifier fields of an IPv4 or IPv6 frame into *f: 0, or -1 for any other frame. */
static __always_inline int parse_flow(struct ethhdr *eth, void *end, struct flow *f)
{
	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP)) {
		if (sfc_parse_ip(eth + 1, end, &f->src[0], &f->dst[0], &f->sport, &f->dport,
				 &f->proto))
			return -1;
		f->family = SFC_FAMILY_IPV4;
		return 0;
	}
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IPV6)) {
		if (sfc_parse_ip6(eth + 1, end, f->src, f->dst, &f->sport, &f->dport, &f->proto))
			return -1;
		f->family = SFC_FAMILY_IPV6;
		return 0;
	}
	return -1;
}

static __always_inline int classify(struct __sk_buff *skb, int at_egress)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct sfc_match *best;
	struct sfc_path *path;
	struct flow f = {};
	__u32 pi = 0;
	int unmatched = 0;

	if (parse_flow(eth, end, &f))
		return TC_ACT_OK;
	best = best_match(&f);
	if (!best)
		return TC_ACT_OK;
	path = choose_path(best, &f, &pi, &unmatched);
	if (!path)
		return unmatched ? TC_ACT_OK : TC_ACT_SHOT;
	if (path->encap == SFC_ENCAP_SRV6) { /* an SRv6 chain: H.Encaps (sfc_srv6.h) */
		if (skb->gso_size) {
			sfc_count(SFC_C_GSO);
			return TC_ACT_SHOT;
		}
		if (sfc_srv6_encap_skb(skb, path->lse, 0, path->depth,
				       LSE_TTL(bpf_ntohl(path->lse[0])),
				       path->smac, path->dmac))
			return TC_ACT_SHOT;
	} else if (push_stack(skb, path, sfc_nsh_np(f.family))) {
		return TC_ACT_SHOT;
	}
	count_classified(pi);
	if (at_egress && path->ifindex == skb->ifindex)
		return TC_ACT_OK;
	return bpf_redirect(path->ifindex, 0);
}

SEC("tc")
int sfc_classify_egress(struct __sk_buff *skb)
{
	return classify(skb, 1);
}

SEC("tc")
int sfc_classify_ingress(struct __sk_buff *skb)
{
	return classify(skb, 0);
}

/*
 * The same classification for frames that never were socket buffers: sfcgen's live-frames
 * engine (`sfcgen send --engine xdp --classify-maps DIR --classify-node N`) loads this object
 * with the lab's pinned maps and the sending node's node_id, and its program tail-calls here
 * for every frame it stamps.  Those frames skip the node's tcx egress, where sfc_classify_egress
 * would have classified them; here they meet the same tables and leave the same way: with the
 * path's stack, out of its first interface (XDP_TX when that is the one they were sent on).
 * Unmatched frames leave as they are; a flow the classifier drops is dropped.
 */
SEC("xdp")
int sfc_classify_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct sfc_match *best;
	struct sfc_path *path;
	struct flow f = {};
	__be32 *lse;
	__u32 pi = 0, depth;
	int unmatched = 0;

	if (parse_flow(eth, end, &f))
		return XDP_TX;
	best = best_match(&f);
	if (!best)
		return XDP_TX;
	path = choose_path(best, &f, &pi, &unmatched);
	if (!path)
		return unmatched ? XDP_TX : XDP_DROP;
	depth = path->depth;
	if (path->encap == SFC_ENCAP_SRV6) { /* an SRv6 chain: H.Encaps (sfc_srv6.h) */
		if (sfc_srv6_encap_xdp(ctx, path->lse, depth, LSE_TTL(bpf_ntohl(path->lse[0])),
				       path->smac, path->dmac))
			return XDP_DROP;
		goto out;
	}
	if (depth > SFC_MAX_LABELS || bpf_xdp_adjust_head(ctx, -(int)(4 * depth))) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	lse = (void *)(eth + 1);
	for (__u32 i = 0; i < SFC_MAX_LABELS; i++) {
		if (i >= depth)
			break;
		if ((void *)(lse + i + 1) > end) {
			sfc_count(SFC_C_ERRORS);
			return XDP_DROP;
		}
		lse[i] = path->lse[i];
	}
	if ((void *)(eth + 1) > end) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	__builtin_memcpy(eth->h_dest, path->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, path->smac, ETH_ALEN);
	eth->h_proto = bpf_htons(SFC_ETH_P_MPLS_UC);
	if (path->encap == SFC_ENCAP_NSH) {
		if ((void *)((__u8 *)lse + 4) > end) {
			sfc_count(SFC_C_ERRORS);
			return XDP_DROP;
		}
		eth->h_proto = bpf_htons(SFC_ETH_P_NSH);
		((__u8 *)lse)[3] = sfc_nsh_np(f.family);
	}
out:
	count_classified(pi);
	if (path->ifindex == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect(path->ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
