/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SRv6 service programming (draft-ietf-spring-sr-service-programming) on the SFC data plane's
 * own tables: a chain with `encap: srv6` travels under an outer IPv6 header and a segment
 * routing header (RFC 8754) instead of a label stack, and everything else -- paths, labels,
 * slot tables, the parking of a stack through a function -- stays as sfc.h describes it.
 *
 * A segment (SID) is a label of the path written as an IPv6 address in its owner's locator:
 *
 *     2001:2:ff:<owner node id>::<label>     (SFC_SRV6_LOC_W0, SFC_SRV6_LOC_W1 | node id)
 *
 * (outside the labs' default IPv6 pool 2001:2::/48, so it overlaps no link prefix the pool
 * gives; src/sfclab/plan/srv6.py makes the same SIDs and a test checks the two agree).  The
 * SIDs are never routed: every node acts on the active SID (the outer destination) in XDP,
 * by the label table, and redirects as the label forwarder does.
 *
 *   classifier (H.Encaps): a path of encap SFC_ENCAP_SRV6 (sfc.h; its entries also carry
 *       SFC_LSE_SRV6 in their traffic class, which the proxy's parked stack keeps).  Its labels become the SRH's segment list (the last label is
 *       segments[0]); segments left = n - 1; the outer destination is the first SID, the
 *       source the ingress's locator, the hop limit the chain's TTL, the next header 4 (IPv4
 *       inside) or 41 (IPv6 inside).
 *   forwarder (End): the active SID must be this node's (else unknown label) and the hop
 *       limit above 1 (else expired).  forward: with segments left, the next SID becomes the
 *       destination and the frame goes to the label's neighbour; at the last SID (End.DX4/DX6)
 *       the outer header and SRH are taken off and plain IPv4 or IPv6 goes on.
 *       proxy (End.AD-like): the SIDs still to come are parked as a label stack (entries
 *       marked SFC_LSE_SRV6, the first with the hop limit less one) under a stack id in the
 *       mark, the outer header and SRH are taken off and the inner packet goes up to the
 *       function; sfc_proxy_out puts an outer header and SRH with the rest back on.
 *
 * Included by the programs after sfc.h; the forwarder includes it after its park().
 */
#ifndef SFCLAB_SFC_SRV6_H
#define SFCLAB_SFC_SRV6_H

#include <linux/types.h>

enum sfc_srv6 {
	SFC_SRV6_LOC_W0 = 0x20010002,   /* 2001:2: */
	SFC_SRV6_LOC_W1 = 0x00ff0000,   /* ff:<node id> */
	SFC_SRV6_HDR = 48,              /* outer IPv6 header and the SRH's fixed part */
	SFC_SRV6_SID = 16,
	SFC_SRV6_ROOM = 48 + 16 * 16,   /* the most an encapsulation adds (SFC_MAX_LABELS SIDs) */
	SFC_LSE_SRV6 = 0x200,           /* traffic class 1 of a label stack entry: an SRv6 segment */
};

#define SFC_SRH_TYPE 4

#ifdef __BPF__

const enum sfc_srv6 sfc_contract_srv6 SFC_CONTRACT = SFC_SRV6_ROOM;

/* the parked stack whose top entry is `top` is an SRv6 one */
static __always_inline int sfc_srv6_entry(__be32 top)
{
	return !!(bpf_ntohl(top) & SFC_LSE_SRV6);
}

/* the SID of `label` owned by node `node`, into 16 bytes at `sid` */
static __always_inline void sfc_srv6_sid(__be32 *sid, __u32 node, __u32 label)
{
	sid[0] = bpf_htonl(SFC_SRV6_LOC_W0);
	sid[1] = bpf_htonl(SFC_SRV6_LOC_W1 | (node & 0xffff));
	sid[2] = 0;
	sid[3] = bpf_htonl(label);
}

/* The outer IPv6 header and SRH's fixed part for `n` SIDs (segments left n - 1), into `h`
 * (SFC_SRV6_HDR bytes): source the locator of this node, destination the SID `first`. */
static __always_inline void sfc_srv6_header(__u8 *h, __u32 n, __u32 hop_limit, __u8 inner_nh,
					    __u16 inner_len, const __be32 *first)
{
	__be32 *w = (__be32 *)h;
	__u16 plen = 8 + SFC_SRV6_SID * n + inner_len;

	w[0] = bpf_htonl(0x60000000);
	h[4] = plen >> 8;
	h[5] = plen & 0xff;
	h[6] = SFC_IPPROTO_ROUTING;
	h[7] = hop_limit;
	sfc_srv6_sid(w + 2, node_id, 0);
	__builtin_memcpy(w + 6, first, 16);
	h[40] = inner_nh;
	h[41] = 2 * n;                  /* length in 8 octets, past the first 8 */
	h[42] = SFC_SRH_TYPE;
	h[43] = n - 1;                  /* segments left */
	h[44] = n - 1;                  /* last entry */
	h[45] = 0;
	h[46] = 0;
	h[47] = 0;
}

/* The SID of label stack entry `e` (its label looked up for its owner) into `sid`: 0, or -1
 * for a label the table does not hold. */
static __always_inline int sfc_srv6_sid_of(__be32 e, __be32 *sid)
{
	__u32 label = LSE_LABEL(bpf_ntohl(e));
	struct sfc_hop *hop = sfc_hop_of(label);

	if (!hop)
		return -1;
	sfc_srv6_sid(sid, hop->node, label);
	return 0;
}

/*
 * H.Encaps on a socket buffer whose Ethernet header is followed by the IPv4 or IPv6 packet:
 * the outer header and an SRH with the SIDs of the `n` entries of `lse` (SFC_MAX_LABELS of them,
 * top first) from entry `off` on, the hop
 * limit `hop_limit`, the Ethernet header rewritten from `smac` to `dmac`.  0, or -1 (counted).
 */
static __always_inline int sfc_srv6_encap_skb(struct __sk_buff *skb, const __be32 *lse, __u32 off,
					      __u32 n, __u32 hop_limit, const __u8 *smac,
					      const __u8 *dmac)
{
	__u8 h[SFC_SRV6_HDR];
	__be32 sid[4], first[4];
	struct ethhdr neth;
	__u16 inner_len = skb->len - sizeof(struct ethhdr);
	__u8 nh = skb->protocol == bpf_htons(SFC_ETH_P_IPV6) ? 41 : 4;

	if (n < 1 || off + n > SFC_MAX_LABELS ||
	    sfc_srv6_sid_of(lse[off & (SFC_MAX_LABELS - 1)], first))
		goto bad;
	sfc_srv6_header(h, n, hop_limit, nh, inner_len, first);
	if (bpf_skb_adjust_room(skb, (__s32)(SFC_SRV6_HDR + SFC_SRV6_SID * n), BPF_ADJ_ROOM_MAC,
				0))
		goto bad;
	if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr), h, sizeof(h), 0))
		goto bad;
	/* segments[i] is the SID of entry n - 1 - i: the last label first */
	for (__u32 i = 0; i < SFC_MAX_LABELS; i++) {
		if (i >= n)
			break;
		if (sfc_srv6_sid_of(lse[(off + n - 1 - i) & (SFC_MAX_LABELS - 1)], sid))
			goto bad;
		if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + SFC_SRV6_HDR + SFC_SRV6_SID * i,
					sid, sizeof(sid), 0))
			goto bad;
	}
	__builtin_memcpy(neth.h_dest, dmac, ETH_ALEN);
	__builtin_memcpy(neth.h_source, smac, ETH_ALEN);
	neth.h_proto = bpf_htons(SFC_ETH_P_IPV6);
	if (bpf_skb_store_bytes(skb, 0, &neth, sizeof(neth), 0))
		goto bad;
	return 0;
bad:
	sfc_count(SFC_C_ERRORS);
	return -1;
}

/*
 * H.Encaps on an XDP frame (sfcgen's live frames, sfc_classify_xdp): as sfc_srv6_encap_skb.
 * The frame has XDP_PACKET_HEADROOM (256 bytes) in front: at most 13 SIDs fit.
 */
static __always_inline int sfc_srv6_encap_xdp(struct xdp_md *ctx, const __be32 *lse, __u32 n,
					      __u32 hop_limit, const __u8 *smac, const __u8 *dmac)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be32 first[4];
	__u16 inner_len;
	__u8 nh, *h;

	if ((void *)(eth + 1) > end || n < 1 || n > 13 || sfc_srv6_sid_of(lse[0], first))
		goto bad;
	nh = eth->h_proto == bpf_htons(SFC_ETH_P_IPV6) ? 41 : 4;
	inner_len = bpf_xdp_get_buff_len(ctx) - sizeof(*eth);
	if (bpf_xdp_adjust_head(ctx, -(int)(SFC_SRV6_HDR + SFC_SRV6_SID * n)))
		goto bad;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	h = (__u8 *)(eth + 1);
	if ((void *)(h + SFC_SRV6_HDR) > end)
		goto bad;
	sfc_srv6_header(h, n, hop_limit, nh, inner_len, first);
	for (__u32 i = 0; i < SFC_MAX_LABELS; i++) {
		__u8 *seg = h + SFC_SRV6_HDR + SFC_SRV6_SID * (i & (SFC_MAX_LABELS - 1));

		if (i >= n)
			break;
		if ((void *)(seg + SFC_SRV6_SID) > end ||
		    sfc_srv6_sid_of(lse[(n - 1 - i) & (SFC_MAX_LABELS - 1)], (__be32 *)seg))
			goto bad;
	}
	__builtin_memcpy(eth->h_dest, dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, smac, ETH_ALEN);
	eth->h_proto = bpf_htons(SFC_ETH_P_IPV6);
	return 0;
bad:
	sfc_count(SFC_C_ERRORS);
	return -1;
}

/* The SRH of an SRv6 frame of this lab at `eth` (its outer IPv6 header right after), or NULL
 * when the frame is no SRv6 frame of this data plane (it passes as plain IPv6). */
static __always_inline __u8 *sfc_srv6_srh(struct ethhdr *eth, void *end)
{
	__u8 *ip6 = (__u8 *)(eth + 1);
	__be32 *dst = (__be32 *)(ip6 + 24);

	if (eth->h_proto != bpf_htons(SFC_ETH_P_IPV6) || (void *)(ip6 + SFC_SRV6_HDR) > end)
		return NULL;
	if (ip6[6] != SFC_IPPROTO_ROUTING || ip6[42] != SFC_SRH_TYPE ||
	    dst[0] != bpf_htonl(SFC_SRV6_LOC_W0) ||
	    (bpf_ntohl(dst[1]) & 0xffff0000) != SFC_SRV6_LOC_W1)
		return NULL;
	return ip6 + 40;
}

#endif /* __BPF__ */

#endif
