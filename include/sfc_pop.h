/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Popping labels in XDP and sending the frame on, as the forwarder does for a forward label
 * (bpf/sfc_forward.bpf.c): take `n` labels off the top (1 or 2, all owned by this node; or a
 * padded stack's whole depth, up to 31, for an unpad label), give
 * the new top entry the TTL `ttl` less one, rewrite the Ethernet header for `hop`'s neighbour
 * (the hop of `label`) and redirect out its interface; when the last label popped was the
 * bottom one, what leaves is plain IPv4 or IPv6 (by the version under the stack).  Included
 * after sfc.h by programs that forward by the stack themselves.
 */
#ifndef SFCLAB_SFC_POP_H
#define SFCLAB_SFC_POP_H

#ifdef __BPF__
#include <linux/bpf.h>
#include <linux/if_ether.h>

/*
 * The frame's Ethernet header made `neth`, after taking `bytes` off its front first (0: none):
 * 0, or -1 when the frame cannot be adjusted (counted as an error) or is too short; the caller
 * then drops it.
 */
static __always_inline int sfc_put_eth(struct xdp_md *ctx, int bytes, const struct ethhdr *neth)
{
	void *data, *end;

	if (bytes && bpf_xdp_adjust_head(ctx, bytes)) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + sizeof(*neth) > end)
		return -1;
	__builtin_memcpy(data, neth, sizeof(*neth));
	return 0;
}

static __always_inline int sfc_pop_and_redirect(struct xdp_md *ctx, __u32 label,
						const struct sfc_hop *hop, __u32 n, __u32 ttl,
						__u32 bos)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__be32 *lse = data + sizeof(struct ethhdr);
	struct ethhdr neth;

	n &= 31; /* 1 or 2 labels of this node; a padded stack's whole depth (unpad) */
	if (!bos) {
		__be32 *next = n == 2 ? lse + 2 : lse + 1;

		if ((void *)(next + 1) > end) {
			sfc_count(SFC_C_ERRORS);
			return XDP_DROP;
		}
		*next = bpf_htonl((bpf_ntohl(*next) & ~0xffu) | (ttl - 1));
	}
	__builtin_memcpy(neth.h_dest, hop->dmac, ETH_ALEN);
	__builtin_memcpy(neth.h_source, hop->smac, ETH_ALEN);
	neth.h_proto = bpf_htons(bos ? sfc_inner_proto(lse + n, end) : SFC_ETH_P_MPLS_UC);
	if (sfc_put_eth(ctx, (int)(4 * n), &neth))
		return XDP_DROP;
	sfc_count(SFC_C_POPPED);
	sfc_count(bos ? SFC_C_DELIVERED : SFC_C_FORWARDED);
	return sfc_redirect_hop(label, hop);
}

/*
 * The top label of a labelled frame (`lse`, after the Ethernet header) at the node of an
 * SFC-aware function (`node_id`).  Returns 0 when the chain stops here: the top label is this
 * node's proxy label and not the bottom one; its TTL in *ttl.  Otherwise the frame is dealt
 * with here and *verdict says what to return: a forward label popped and sent on, or a drop
 * counted (a short stack, a label not this node's, an expired TTL, a proxy label at the bottom).
 */
static __always_inline int sfc_function_top(struct xdp_md *ctx, __be32 *lse, void *end,
					    __u32 node_id, __u32 *ttl, int *verdict)
{
	const struct sfc_hop *hop;
	__u32 v, label, bos;

	*verdict = XDP_DROP;
	if ((void *)(lse + 1) > end) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	v = bpf_ntohl(lse[0]);
	label = LSE_LABEL(v);
	*ttl = LSE_TTL(v);
	bos = LSE_BOS(v);
	hop = sfc_hop_of(label);
	if (!hop || hop->node != node_id) {
		sfc_count(SFC_C_UNKNOWN_LABEL);
		return -1;
	}
	if (*ttl <= 1) {
		sfc_count(SFC_C_TTL_EXPIRED);
		return -1;
	}
	if (hop->action == SFC_A_FORWARD) {
		*verdict = sfc_pop_and_redirect(ctx, label, hop, 1, *ttl, bos);
		return -1;
	}
	if (hop->action != SFC_A_PROXY || bos) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	return 0;
}

/* what lies under the label stack at `lse` (the IPv4 or IPv6 header), or NULL for a stack cut
 * short or deeper than SFC_MAX_LABELS */
static __always_inline void *sfc_stack_bottom(__be32 *lse, void *end)
{
	for (__u32 i = 0; i < SFC_MAX_LABELS; i++) {
		__be32 *p = lse + i;

		if ((void *)(p + 1) > end)
			return NULL;
		if (LSE_BOS(bpf_ntohl(*p)))
			return p + 1;
	}
	return NULL;
}

/* The way on from an SFC-aware function: its forward label, its hop, and whether that label is
 * the bottom one. */
struct sfc_way {
	__u32 label;
	__u32 bos;
	const struct sfc_hop *hop;
};

/*
 * Under this node's proxy label: its forward label (the way on, in *out) and the IP header
 * under the stack, returned; NULL for a stack that is not so (the caller counts it an error
 * and drops).
 */
static __always_inline void *sfc_function_packet(__be32 *lse, void *end, __u32 node_id,
						 struct sfc_way *out)
{
	__u32 v;

	if ((void *)(lse + 2) > end)
		return NULL;
	v = bpf_ntohl(lse[1]);
	out->label = LSE_LABEL(v);
	out->hop = sfc_hop_of(out->label);
	if (!out->hop || out->hop->node != node_id || out->hop->action != SFC_A_FORWARD)
		return NULL;
	out->bos = LSE_BOS(v);
	return sfc_stack_bottom(lse, end);
}

/*
 * Out of the function and on: pop the proxy label and the forward label under it (TTL `ttl`
 * of the proxy label) and send the frame to `out`'s neighbour, counted as the proxy counts.
 */
static __always_inline int sfc_function_leave(struct xdp_md *ctx, const struct sfc_way *out,
					      __u32 ttl)
{
	if (ttl - 1 <= 1) {
		sfc_count(SFC_C_TTL_EXPIRED);
		return XDP_DROP;
	}
	sfc_count(SFC_C_POPPED); /* the proxy label; the helper counts the forward label */
	sfc_count(SFC_C_PROXY_OUT);
	return sfc_pop_and_redirect(ctx, out->label, out->hop, 2, ttl - 1, out->bos);
}
#endif /* __BPF__ */

#endif
