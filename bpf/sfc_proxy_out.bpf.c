// SPDX-License-Identifier: GPL-2.0
/*
 * The SFC proxy's outer half, behind a function (tcx egress of every interface of the function
 * node): whatever leaves the function with a parked stack's id in the proxy's bits of skb->mark
 * (SFC_MARK_PROXY_MASK in sfc.h; the tenancy's bits are never touched) (or, for a function
 * that loses the mark, whose 5-tuple sfc_forward saw enter) gets its stack back.  The top entry
 * is this node's own forwarding label: it is popped here and the packet goes to its next hop
 * with the rest, or as plain IPv4 if nothing is left -- or if the label unpads (the last of a
 * padded path: the padding below it is not put back).
 *
 * A stack parked from an SRv6 chain (entries marked SFC_LSE_SRV6) goes back on as an outer IPv6
 * header and SRH holding the rest as SIDs (sfc_srv6.h), the next SID active.
 *
 * A packet with no parked stack -- one the function made itself (an ICMP error, a TCP reset),
 * or rewrote beyond recognition after losing the mark -- is counted as a proxy miss and left to
 * the node's IP routes, which take it to its address like any unclassified packet.
 *
 * A parked NSH header (a chain of `encap: nsh`) goes back by nsh_restore, with SI - 1.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfc.h"
#include "sfc_nsh.h"
#include "sfc_srv6.h"

/* the parked stack id of this packet into `id`: from its mark, or else from its flow (a
 * function that rewrote the mark kept the flow's 5-tuple); 1 if found, 0 if the packet is no
 * chain's (then it passes untouched) */
static __always_inline int parked_id(struct __sk_buff *skb, struct ethhdr *eth, void *end,
				     __u32 *id)
{
	struct sfc_class_key fk = {};
	__u32 *have;

	if (!sfc_mark_id(skb->mark, id))
		return 1;
	if (sfc_flow_key(eth + 1, end, &fk))
		return 0;
	have = bpf_map_lookup_elem(&sfc_flows, &fk);
	if (!have) {
		sfc_count(SFC_C_PROXY_MISS);
		return 0;
	}
	*id = *have;
	return 1;
}

/* the stack below its top label written back (the first with TTL `ttl` - 1) and the frame
 * readdressed to `hop`: 0, or -1 (counted) */
static __always_inline int restore_stack(struct __sk_buff *skb, struct sfc_stack *st,
					 struct sfc_hop *hop, __u32 n, __u32 ttl, __be16 inner)
{
	__be32 lse[SFC_MAX_LABELS - 1];
	struct ethhdr neth;

	if (n && bpf_skb_adjust_room(skb, (__s32)(4 * n), BPF_ADJ_ROOM_MAC, 0)) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	/* the entries in one buffer, written with one store */
	for (__u32 i = 0; i < SFC_MAX_LABELS - 1; i++)
		lse[i] = st->lse[i + 1];
	lse[0] = bpf_htonl((bpf_ntohl(lse[0]) & ~0xffu) | (ttl - 1));
	if (n && n < SFC_MAX_LABELS &&
	    bpf_skb_store_bytes(skb, sizeof(struct ethhdr), lse, 4 * n, 0)) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	__builtin_memcpy(neth.h_dest, hop->dmac, ETH_ALEN);
	__builtin_memcpy(neth.h_source, hop->smac, ETH_ALEN);
	neth.h_proto = n ? bpf_htons(SFC_ETH_P_MPLS_UC) : inner;
	if (bpf_skb_store_bytes(skb, 0, &neth, sizeof(neth), 0)) {
		sfc_count(SFC_C_ERRORS);
		return -1;
	}
	return 0;
}

/* A parked NSH header (include/sfc_nsh.h) put back with SI - 1 and the frame sent to this
 * node's hop at the new (SPI, SI): still NSH, or plain at the path's last label.  SI 0 (the
 * path has no function left to count) drops it as nsh_si_expired. */
static __always_inline int nsh_restore(struct __sk_buff *skb, struct sfc_stack *st, __be16 inner)
{
	__u32 base = bpf_ntohl(st->lse[0]), sph = bpf_ntohl(st->lse[1]), si = NSH_SI(sph);
	struct sfc_nsh_hop *nh;
	struct sfc_hop *hop;
	struct ethhdr neth;
	__be32 w[2];

	if (si <= 1) {
		sfc_count(SFC_C_NSH_SI_EXPIRED);
		return TC_ACT_SHOT;
	}
	si -= 1;
	if (sfc_nsh_hop_at(NSH_SPI(sph), si, &nh, &hop) || hop->action != SFC_A_FORWARD) {
		sfc_count(SFC_C_NSH_UNKNOWN);
		return TC_ACT_SHOT;
	}
	if (skb->gso_size) {
		sfc_count(SFC_C_GSO);
		return TC_ACT_SHOT;
	}
	if (!nh->last) {
		w[0] = bpf_htonl((base & ~0xffu) | (inner == bpf_htons(SFC_ETH_P_IPV6) ?
						    SFC_NSH_NP_IPV6 : SFC_NSH_NP_IPV4));
		w[1] = bpf_htonl((sph & ~0xffu) | si);
		if (bpf_skb_adjust_room(skb, SFC_NSH_BYTES, BPF_ADJ_ROOM_MAC, 0) ||
		    bpf_skb_store_bytes(skb, sizeof(struct ethhdr), w, sizeof(w), 0)) {
			sfc_count(SFC_C_ERRORS);
			return TC_ACT_SHOT;
		}
	}
	__builtin_memcpy(neth.h_dest, hop->dmac, ETH_ALEN);
	__builtin_memcpy(neth.h_source, hop->smac, ETH_ALEN);
	neth.h_proto = nh->last ? inner : bpf_htons(SFC_ETH_P_NSH);
	if (bpf_skb_store_bytes(skb, 0, &neth, sizeof(neth), 0)) {
		sfc_count(SFC_C_ERRORS);
		return TC_ACT_SHOT;
	}
	sfc_count(SFC_C_PROXY_OUT);
	sfc_count(nh->last ? SFC_C_DELIVERED : SFC_C_FORWARDED);
	if (hop->ifindex == skb->ifindex)
		return TC_ACT_OK;
	return bpf_redirect(hop->ifindex, 0);
}

SEC("tc")
int sfc_proxy_out(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct sfc_stack *st;
	struct sfc_hop *hop;
	__u32 id, v, ttl, label, n;
	__be16 inner;

	/* IPv4 or IPv6 under the stack, and so the flow fallback of parked_id() */
	if ((void *)(eth + 1) > end || (eth->h_proto != bpf_htons(SFC_ETH_P_IP) &&
					eth->h_proto != bpf_htons(SFC_ETH_P_IPV6)))
		return TC_ACT_OK;
	inner = eth->h_proto;
	if (!parked_id(skb, eth, end, &id))
		return TC_ACT_OK;
	skb->mark &= ~SFC_MARK_PROXY_MASK; /* the tenancy's bits stay */
	st = bpf_map_lookup_elem(&sfc_stacks, &id);
	if (st && st->depth == SFC_STACK_NSH)
		return nsh_restore(skb, st, inner);
	if (!st || !st->depth) {
		/* the function was the chain's last stop: its routes deliver the packet */
		sfc_count(SFC_C_PROXY_OUT);
		return TC_ACT_OK;
	}
	v = bpf_ntohl(st->lse[0]);
	label = LSE_LABEL(v);
	ttl = LSE_TTL(v);
	hop = sfc_hop_of(label);
	if (!hop || hop->node != node_id ||
	    (hop->action != SFC_A_FORWARD && hop->action != SFC_A_UNPAD)) {
		sfc_count(SFC_C_UNKNOWN_LABEL);
		return TC_ACT_SHOT;
	}
	if (ttl <= 1) {
		sfc_count(SFC_C_TTL_EXPIRED);
		return TC_ACT_SHOT;
	}
	if (skb->gso_size) {
		sfc_count(SFC_C_GSO);
		return TC_ACT_SHOT;
	}
	n = hop->action == SFC_A_UNPAD ? 0 : st->depth - 1;
	if (n > SFC_MAX_LABELS - 1)
		return TC_ACT_SHOT;
	if (n && sfc_srv6_entry(st->lse[0])) { /* an SRv6 chain: the SIDs after this node's */
		if (sfc_srv6_encap_skb(skb, st->lse, 1, n, ttl - 1, hop->smac, hop->dmac))
			return TC_ACT_SHOT;
	} else if (restore_stack(skb, st, hop, n, ttl, inner)) {
		return TC_ACT_SHOT;
	}
	sfc_count(SFC_C_PROXY_OUT);
	sfc_count(SFC_C_POPPED);
	sfc_count(n ? SFC_C_FORWARDED : SFC_C_DELIVERED);
	if (hop->ifindex == skb->ifindex)
		return TC_ACT_OK;
	return bpf_redirect(hop->ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
