/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SRv6 forwarder's behaviours in XDP (sfc_srv6.h has the model): End at a forward label
 * (End.DX4/End.DX6 at the last SID) and the End.AD-like dynamic proxy at a proxy label.
 * Included by bpf/sfc_forward.bpf.c after sfc_srv6.h and its park().
 */
#ifndef SFCLAB_SFC_SRV6_END_H
#define SFCLAB_SFC_SRV6_END_H

#ifdef __BPF__
#include <linux/bpf.h>
#include <linux/if_ether.h>

static __always_inline int sfc_srv6_drop(__u32 counter)
{
	sfc_count(counter);
	return XDP_DROP;
}

/* the ethertype of the SRH's next header (4: IPv4, 41: IPv6), or 0 */
static __always_inline __u16 sfc_srv6_inner(__u8 nh)
{
	return nh == 41 ? SFC_ETH_P_IPV6 : nh == 4 ? SFC_ETH_P_IP : 0;
}

/* End.AD-like: the SIDs after the active one parked as a stack, the outer header and SRH
 * (`hlen` bytes) taken off, the inner packet passed up with the stack id in XDP metadata */
static __always_inline int sfc_srv6_proxy(struct xdp_md *ctx, __u8 *srh, void *end, __u32 sl,
					  __u32 hl, __u32 hlen)
{
	struct sfc_stack st = {};
	struct sfc_class_key fk = {};
	struct ethhdr eth;
	void *data = (void *)(long)ctx->data;
	__u32 id, *meta;
	__u16 inner = sfc_srv6_inner(srh[0]);

	for (__u32 i = 0; i < SFC_MAX_LABELS; i++) {
		__u8 *seg;
		__u32 v;

		if (i >= sl)
			break;
		seg = srh + 8 + SFC_SRV6_SID * ((sl - 1 - i) & (SFC_MAX_LABELS - 1));
		if ((void *)(seg + SFC_SRV6_SID) > end)
			return sfc_srv6_drop(SFC_C_ERRORS);
		v = (bpf_ntohl(*(__be32 *)(seg + 12)) << 12) | SFC_LSE_SRV6;
		if (i == 0)
			v |= (hl - 1) & 0xff;
		if (i + 1 == sl)
			v |= 1 << 8;
		st.lse[i] = bpf_htonl(v);
		st.depth = i + 1;
	}
	if (!inner || data + sizeof(eth) > end || park(&st, &id))
		return sfc_srv6_drop(SFC_C_ERRORS);
	__builtin_memcpy(&eth, data, sizeof(eth));
	eth.h_proto = bpf_htons(inner);
	if (bpf_xdp_adjust_head(ctx, (int)hlen) || bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u32)))
		return sfc_srv6_drop(SFC_C_ERRORS);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > data || data + sizeof(eth) > end)
		return sfc_srv6_drop(SFC_C_ERRORS);
	*meta = sfc_mark_of(id);
	__builtin_memcpy(data, &eth, sizeof(eth));
	/* for functions that lose the mark: the flow, as the label proxy keeps it */
	if (!sfc_flow_key(data + sizeof(eth), end, &fk))
		remember_flow(&fk, id);
	sfc_count(SFC_C_POPPED);
	sfc_count(SFC_C_PROXY_IN);
	return XDP_PASS;
}

/* End, and End.DX4/End.DX6 at the last SID: the frame sent to the label's neighbour */
static __always_inline int sfc_srv6_next(struct xdp_md *ctx, __u8 *srh, void *end,
					 __u32 label, const struct sfc_hop *hop, __u32 sl, __u32 hl,
					 __u32 hlen)
{
	struct ethhdr *eth = (void *)(long)ctx->data;
	__u8 *ip6 = srh - 40;
	__u16 proto = SFC_ETH_P_IPV6;

	if (sl) {
		__u8 *seg = srh + 8 + SFC_SRV6_SID * ((sl - 1) & (SFC_MAX_LABELS - 1));

		if ((void *)(seg + SFC_SRV6_SID) > end)
			return sfc_srv6_drop(SFC_C_ERRORS);
		__builtin_memcpy(ip6 + 24, seg, SFC_SRV6_SID);
		srh[3] = sl - 1;
		ip6[7] = hl - 1;
	} else {
		proto = sfc_srv6_inner(srh[0]);
		if (!proto || bpf_xdp_adjust_head(ctx, (int)hlen))
			return sfc_srv6_drop(SFC_C_ERRORS);
		eth = (void *)(long)ctx->data;
	}
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	__builtin_memcpy(eth->h_dest, hop->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, hop->smac, ETH_ALEN);
	eth->h_proto = bpf_htons(proto);
	sfc_count(SFC_C_POPPED);
	sfc_count(sl ? SFC_C_FORWARDED : SFC_C_DELIVERED);
	return sfc_redirect_hop(label, hop);
}

/* An SRv6 frame's verdict at this node, or -1 when the frame is no SRv6 frame of the lab */
static __always_inline int sfc_srv6_end(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *srh = sfc_srv6_srh(data, end), *ip6;
	struct sfc_hop *hop;
	__u32 label, hl, sl, hlen;

	if (!srh)
		return -1;
	ip6 = srh - 40;
	label = bpf_ntohl(*(__be32 *)(ip6 + 36));
	hop = sfc_hop_of(label);
	if (!hop || hop->node != node_id || (bpf_ntohl(*(__be32 *)(ip6 + 28)) & 0xffff) != node_id)
		return sfc_srv6_drop(SFC_C_UNKNOWN_LABEL);
	hl = ip6[7];
	if (hl <= 1)
		return sfc_srv6_drop(SFC_C_TTL_EXPIRED);
	sl = srh[3];
	if (srh[1] > 2 * SFC_MAX_LABELS || sl > srh[4] || 2 * (__u32)srh[4] + 2 != srh[1])
		return sfc_srv6_drop(SFC_C_ERRORS);
	hlen = 48 + 8 * (__u32)srh[1];
	if (hop->action == SFC_A_PROXY)
		return sfc_srv6_proxy(ctx, srh, end, sl, hl, hlen);
	if (hop->action != SFC_A_FORWARD)
		return sfc_srv6_drop(SFC_C_ERRORS);
	return sfc_srv6_next(ctx, srh, end, label, hop, sl, hl, hlen);
}
#endif /* __BPF__ */

#endif
