// SPDX-License-Identifier: GPL-2.0
/*
 * The SFC forwarder (XDP, on every interface of every node on a chain's path).
 *
 * An SRv6 chain's frame (an outer IPv6 header with an SRH whose active SID is in the SFC
 * locator) is acted on by sfc_srv6_end (include/sfc_srv6_end.h) as End, End.DX4/DX6 or the
 * dynamic proxy.  Other plain (non-MPLS) frames pass untouched: IP traffic of the node routes as before.  A labelled
 * frame's top label must belong to this node (else it is dropped as an unknown label) and have
 * a TTL above 1 (else dropped as expired).  Then, by the label's action:
 *   forward: pop it, give its TTL less one to the new top entry, rewrite the Ethernet header
 *            for the next hop and redirect there; popping the bottom entry leaves plain IPv4.
 *   unpad:   the last label of a padded path: pop it and the padding entries below it (down to
 *            the bottom of the stack) at once, and send plain IPv4 on as the last forward does.
 *   proxy:   the function here must not see labels: pop it, park the rest of the stack under a
 *            stack id (sfc_stack_ids / sfc_stacks, one entry per distinct stack, not per flow;
 *            the last one parked is remembered per CPU, so a run of one path's frames looks it
 *            up once), take the whole stack off and pass the IPv4 packet up with the id in XDP
 *            metadata; sfc_proxy_in turns it into skb->mark, sfc_proxy_out puts the stack back.
 * Frames go on by bpf_redirect_map through sfc_ports (the label's device), see sfc.h.
 * An NSH frame (ethertype 0x894F, a chain of `encap: nsh`) goes to nsh_forward instead: the
 * same hops and actions, found by (SPI, SI) (include/sfc_nsh.h).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfc.h"
#include "sfc_nsh.h"
#include "sfc_srv6.h"
#include "sfc_pop.h"

/* What this CPU parked last, so that a run of frames of one path (the rest of their stacks
 * alike) looks its stack id up once, not once per frame: the stack and its id, and the flow
 * last remembered in sfc_flows with the id it was given.  Per CPU and per program load (not
 * pinned: each node's forwarder has its own), so no other CPU or node writes it. */
struct sfc_parked {
	struct sfc_stack st;
	__u32 id;
	__u32 parked;         /* 1 once st and id hold a parked stack */
	struct sfc_class_key flow; /* mask SFC_FLOW_MASK once it holds a flow */
	__u32 flow_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sfc_parked);
} sfc_last SEC(".maps");

static __always_inline struct sfc_parked *last_parked(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&sfc_last, &zero);
}

/* 1 if `a` and `b` hold the same stack (depth and entries) */
static __always_inline int same_stack(const struct sfc_stack *a, const struct sfc_stack *b)
{
	if (a->depth != b->depth)
		return 0;
	for (__u32 i = 0; i < SFC_MAX_LABELS; i++)
		if (i < a->depth && a->lse[i] != b->lse[i])
			return 0;
	return 1;
}

/* 1 if `a` and `b` are the same flow key */
static __always_inline int same_flow(const struct sfc_class_key *a,
				     const struct sfc_class_key *b)
{
	for (__u32 i = 0; i < 4; i++)
		if (a->src[i] != b->src[i] || a->dst[i] != b->dst[i])
			return 0;
	return a->node == b->node && a->sport == b->sport && a->dport == b->dport &&
	       a->proto == b->proto && a->family == b->family;
}

static __always_inline int park(struct sfc_stack *st, __u32 *id)
{
	struct sfc_parked *last = last_parked();
	__u32 zero = 0, *have, *next;
	struct sfc_stack *slot;

	if (last && last->parked && same_stack(&last->st, st)) {
		*id = last->id;
		return 0;
	}
	have = bpf_map_lookup_elem(&sfc_stack_ids, st);
	if (have) {
		*id = *have;
		goto remember;
	}
	next = bpf_map_lookup_elem(&sfc_next_stack, &zero);
	if (!next)
		return -1;
	*id = __sync_fetch_and_add(next, 1);
	if (*id >= SFC_MAX_STACKS)
		return -1;
	slot = bpf_map_lookup_elem(&sfc_stacks, id);
	if (!slot)
		return -1;
	__builtin_memcpy(slot, st, sizeof(*st));
	/* a racing CPU may have parked the same stack: both ids stay valid */
	bpf_map_update_elem(&sfc_stack_ids, st, id, BPF_NOEXIST);
remember:
	if (last) {
		__builtin_memcpy(&last->st, st, sizeof(*st));
		last->id = *id;
		last->parked = 1;
	}
	return 0;
}

/* The flow `fk` remembered under stack id `id` in sfc_flows (for functions that lose the mark),
 * unless this CPU remembered just that last: the entry's reader, sfc_proxy_out, looks it up
 * for every packet that lost its mark, which keeps it fresh in the LRU. */
static __always_inline void remember_flow(struct sfc_class_key *fk, __u32 id)
{
	struct sfc_parked *last = last_parked();
	__u32 *was;

	if (last && last->flow_id == id && last->flow.mask == SFC_FLOW_MASK &&
	    same_flow(&last->flow, fk))
		return;
	was = bpf_map_lookup_elem(&sfc_flows, fk);
	if (!was || *was != id)
		bpf_map_update_elem(&sfc_flows, fk, &id, BPF_ANY);
	if (last) {
		__builtin_memcpy(&last->flow, fk, sizeof(*fk));
		last->flow_id = id;
	}
}

/* The frame handed up to the function: `strip` bytes after the Ethernet header taken off (the
 * stack or header parked as `id`), `eth` written in front, the id left in XDP metadata for
 * sfc_proxy_in, and the flow remembered for functions that lose the mark. */
static __always_inline int hand_up(struct xdp_md *ctx, struct ethhdr *eth, int strip, __u32 id)
{
	void *data, *end;
	struct sfc_class_key fk = {};
	__u32 *meta;

	if (bpf_xdp_adjust_head(ctx, strip))
		goto bad;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u32)))
		goto bad;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > data || data + sizeof(*eth) > end)
		goto bad;
	*meta = sfc_mark_of(id);
	__builtin_memcpy(data, eth, sizeof(*eth));
	/* for functions that lose the mark (a program reading a TUN device): the flow, IPv4 or
	 * IPv6 */
	if (!sfc_flow_key(data + sizeof(*eth), end, &fk))
		remember_flow(&fk, id);
	sfc_count(SFC_C_POPPED);
	sfc_count(SFC_C_PROXY_IN);
	return XDP_PASS;
bad:
	sfc_count(SFC_C_ERRORS);
	return XDP_DROP;
}

#include "sfc_srv6_end.h"

static __always_inline int proxy(struct xdp_md *ctx, __u32 ttl)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__be32 *lse = data + sizeof(struct ethhdr);
	struct sfc_stack st = {};
	struct ethhdr eth;
	__u32 id, i;

	if ((void *)(lse + 1) > end)
		return XDP_DROP;
	if (!LSE_BOS(bpf_ntohl(lse[0]))) {
		for (i = 0; i < SFC_MAX_LABELS; i++) {
			__be32 *p = lse + 1 + i;
			__u32 v;

			if ((void *)(p + 1) > end)
				goto bad;
			v = bpf_ntohl(*p);
			if (i == 0)
				v = (v & ~0xffu) | (ttl - 1);
			st.lse[i] = bpf_htonl(v);
			st.depth = i + 1;
			if (LSE_BOS(v))
				break;
		}
		if (!st.depth || !LSE_BOS(bpf_ntohl(st.lse[(st.depth - 1) & (SFC_MAX_LABELS - 1)])))
			goto bad;
	}
	if (park(&st, &id))
		goto bad;
	__builtin_memcpy(&eth, data, sizeof(eth));
	eth.h_proto = bpf_htons(sfc_inner_proto(lse + 1 + (st.depth & (SFC_MAX_LABELS - 1)), end));
	return hand_up(ctx, &eth, (int)(4 * (1 + st.depth)), id);
bad:
	sfc_count(SFC_C_ERRORS);
	return XDP_DROP;
}

/* entries from the top down to the bottom of the stack (1 .. SFC_MAX_LABELS), or 0 when the
 * stack is cut short or deeper than SFC_MAX_LABELS */
static __always_inline __u32 stack_depth(__be32 *lse, void *end)
{
	for (__u32 i = 0; i < SFC_MAX_LABELS; i++) {
		if ((void *)(lse + i + 1) > end)
			return 0;
		if (LSE_BOS(bpf_ntohl(lse[i])))
			return i + 1;
	}
	return 0;
}

/* An NSH frame (include/sfc_nsh.h): this node's hop at its (SPI, SI), by the hop's label.
 * forward: TTL - 1 and on to the next hop, or, at the path's last label, the header off and
 * the packet on plain; proxy: the header parked (TTL - 1) and the packet handed up. */
static __always_inline int nsh_forward(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data, neth;
	__be32 *w = (void *)(eth + 1);
	struct sfc_stack st = {};
	struct sfc_nsh_hop *nh;
	struct sfc_hop *hop;
	__u32 base, sph, ttl, id;

	if (sfc_nsh_parse(w, end, &base, &sph) ||
	    sfc_nsh_hop_at(NSH_SPI(sph), NSH_SI(sph), &nh, &hop)) {
		sfc_count(SFC_C_NSH_UNKNOWN);
		return XDP_DROP;
	}
	ttl = NSH_TTL(base);
	if (ttl <= 1) {
		sfc_count(SFC_C_NSH_TTL_EXPIRED);
		return XDP_DROP;
	}
	__builtin_memcpy(neth.h_dest, hop->dmac, ETH_ALEN);
	__builtin_memcpy(neth.h_source, hop->smac, ETH_ALEN);
	neth.h_proto = bpf_htons(sfc_nsh_inner(base));
	if (hop->action == SFC_A_PROXY) {
		st.depth = SFC_STACK_NSH;
		st.lse[0] = bpf_htonl(NSH_WITH_TTL(base, ttl - 1));
		st.lse[1] = bpf_htonl(sph);
		if (park(&st, &id)) {
			sfc_count(SFC_C_ERRORS);
			return XDP_DROP;
		}
		__builtin_memcpy(&neth, eth, 2 * ETH_ALEN); /* up to the function as it came */
		return hand_up(ctx, &neth, SFC_NSH_BYTES, id);
	}
	if (hop->action != SFC_A_FORWARD) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	if (!nh->last) {
		w[0] = bpf_htonl(NSH_WITH_TTL(base, ttl - 1));
		neth.h_proto = bpf_htons(SFC_ETH_P_NSH);
	}
	if (sfc_put_eth(ctx, nh->last ? SFC_NSH_BYTES : 0, &neth))
		return XDP_DROP;
	sfc_count(nh->last ? SFC_C_DELIVERED : SFC_C_FORWARDED);
	return sfc_redirect_hop(nh->label, hop);
}

SEC("xdp")
int sfc_forward(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be32 *lse = (void *)(eth + 1);
	struct sfc_hop *hop;
	__u32 v, label, ttl, bos, npop = 1;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(SFC_ETH_P_NSH))
		return nsh_forward(ctx);
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IPV6)) {
		int verdict = sfc_srv6_end(ctx); /* an SRv6 chain's frame (sfc_srv6.h) */

		return verdict < 0 ? XDP_PASS : verdict;
	}
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return XDP_PASS;
	if ((void *)(lse + 1) > end) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	v = bpf_ntohl(lse[0]);
	label = LSE_LABEL(v);
	ttl = LSE_TTL(v);
	bos = LSE_BOS(v);
	hop = sfc_hop_of(label);
	if (!hop || hop->node != node_id) {
		sfc_count(SFC_C_UNKNOWN_LABEL);
		return XDP_DROP;
	}
	if (ttl <= 1) {
		sfc_count(SFC_C_TTL_EXPIRED);
		return XDP_DROP;
	}
	if (hop->action == SFC_A_PROXY)
		return proxy(ctx, ttl);
	if (hop->action == SFC_A_UNPAD) {
		npop = stack_depth(lse, end);
		if (!npop) {
			sfc_count(SFC_C_ERRORS);
			return XDP_DROP;
		}
		bos = 1;
	} else if (hop->action != SFC_A_FORWARD) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	return sfc_pop_and_redirect(ctx, label, hop, npop, ttl, bos);
}

char LICENSE[] SEC("license") = "GPL";
