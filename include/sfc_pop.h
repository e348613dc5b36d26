/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Popping labels in XDP and sending the frame on, as the forwarder does for a forward label
 * (bpf/sfc_forward.bpf.c): take `n` labels off the top (1 or 2, all owned by this node), give
 * the new top entry the TTL `ttl` less one, rewrite the Ethernet header for `hop`'s neighbour
 * and redirect out its interface; when the last label popped was the bottom one, what leaves
 * is plain IPv4.  Included after sfc.h by programs that forward by the stack themselves.
 */
#ifndef SFCLAB_SFC_POP_H
#define SFCLAB_SFC_POP_H

#ifdef __BPF__
#include <linux/bpf.h>
#include <linux/if_ether.h>

static __always_inline int sfc_pop_and_redirect(struct xdp_md *ctx, const struct sfc_hop *hop,
						__u32 n, __u32 ttl, __u32 bos)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__be32 *lse = data + sizeof(struct ethhdr);
	struct ethhdr neth;

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
	neth.h_proto = bpf_htons(bos ? SFC_ETH_P_IP : SFC_ETH_P_MPLS_UC);
	if (bpf_xdp_adjust_head(ctx, n == 2 ? 8 : 4)) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + sizeof(neth) > end)
		return XDP_DROP;
	__builtin_memcpy(data, &neth, sizeof(neth));
	sfc_count(SFC_C_POPPED);
	sfc_count(bos ? SFC_C_DELIVERED : SFC_C_FORWARDED);
	return bpf_redirect(hop->ifindex, 0);
}
#endif /* __BPF__ */

#endif
