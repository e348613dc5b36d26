// SPDX-License-Identifier: GPL-2.0
/*
 * The bpf-balancer (XDP, on every interface of a `bpf-balancer` node): an SFC-aware load
 * balancer.  It takes the place of the forwarder and of the proxy on its node, as the
 * bpf-firewall does (bpf/fw.bpf.c), and handles frames the same way:
 *
 *   plain IPv4 or IPv6 (routed traffic, replies of a one-way chain): balanced or un-NATed,
 *       then passed to the kernel, which routes it by its (new) addresses.
 *   labelled, top label this node's proxy label: the IPv4 or IPv6 packet under the stack is
 *       balanced or un-NATed, then the proxy label and the forward label under it are popped
 *       and the frame redirected to the next hop, as the forwarder would send it.
 *   labelled, top label this node's forward label: forwarded untouched.
 *   any other frame, and IPv6 that never leaves its link (neighbour discovery, link-local,
 *   multicast: sfc_ip6_link_scope): passed, uncounted.
 *
 * Balancing (include/sfc_lb.h): a packet whose tuple is a backend's reply to a connection gets
 * the VIP back as its source.  A TCP or UDP packet to the VIP (its family, protocol and ports)
 * goes to its connection's backend if it has one still in; otherwise to the backend of its
 * Maglev slot (hash of the 5-tuple or of the source address, as configured; an IPv6 address
 * folded to one word, as the classifier folds it), and the connection is remembered both ways.
 * Its destination address is rewritten to the backend's, the checksums adjusted incrementally:
 * IPv4's header checksum, and the TCP/UDP checksum over the pseudo-header (an IPv4 UDP
 * datagram sent without a checksum keeps none; in IPv6, where UDP has no such choice, 0 is
 * never written).  An IPv6 packet's ports are those behind its extension headers
 * (sfc_ip6_walk).  Everything else passes unchanged.  Every packet is counted, in packets and
 * IP bytes, by the backend it went to, as a reply, or as other.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfc.h"
#include "sfc_lb.h"
#include "sfc_pop.h"
#include "sfc_stage.h"

static __always_inline void lb_count(__u32 slot, __u32 bytes)
{
	__u32 k = (node_id % SFC_MAX_NODES) * SFC_LB_SLOTS + slot;
	struct sfc_lb_count *c = bpf_map_lookup_elem(&sfc_lb_counts, &k);

	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

/* what a checksum rewritten by lb_csum_replace covers: TCP's (or the IPv4 header's), UDP's in
 * IPv4 (0: the datagram has none, left so), UDP's in IPv6 (never 0: 0 would say "none") */
enum lb_csum { LB_CSUM = 0, LB_CSUM_UDP4 = 1, LB_CSUM_UDP6 = 2 };

/* a 16-bit one's complement checksum at `sum` (memory order) with 32-bit word `from` replaced
 * by `to` (RFC 1624; the sum is the same in either byte order, so no swapping) */
static __always_inline void lb_csum_replace(__u16 *sum, __u32 from, __u32 to, enum lb_csum kind)
{
	__u32 s = (__u16)~*sum;

	if (kind == LB_CSUM_UDP4 && !*sum)
		return; /* a UDP datagram sent without a checksum keeps none */
	s += (__u16)~(from & 0xffff);
	s += (__u16)~(from >> 16);
	s += to & 0xffff;
	s += to >> 16;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	*sum = (__u16)~s;
	if (kind != LB_CSUM && !*sum)
		*sum = 0xffff;
}

/* the same for a 128-bit address of `family` (an IPv4 one: its first word) */
static __always_inline void lb_csum_replace_addr(__u16 *sum, const __be32 *from, const __be32 *to,
						 __u8 family, enum lb_csum kind)
{
	lb_csum_replace(sum, from[0], to[0], kind);
	if (family != SFC_FAMILY_IPV6)
		return;
	lb_csum_replace(sum, from[1], to[1], kind);
	lb_csum_replace(sum, from[2], to[2], kind);
	lb_csum_replace(sum, from[3], to[3], kind);
}

/* whether two 128-bit addresses are the same */
static __always_inline int lb_same(const __be32 *a, const __be32 *b)
{
	return !((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]));
}

/* an IPv6 address folded to one word, as the classifier folds it (an IPv4 one: itself) */
static __always_inline __be32 lb_fold(const __be32 *a)
{
	return a[0] ^ a[1] ^ a[2] ^ a[3];
}

/* where the source (`src` 1) or destination address of the IP packet at `ip` is, and its
 * length in words, 1 or 4; the offset of its TCP/UDP header in *l4; -1 if cut short */
static __always_inline int lb_where(__u8 *ip, void *end, int src, __u32 *at, __u32 *l4)
{
	__u32 frag;
	__u8 proto;

	if ((void *)(ip + 20) > end)
		return -1;
	if ((ip[0] >> 4) == 6) {
		*at = src ? 8 : 24;
		return sfc_ip6_walk(ip, end, &proto, l4, &frag);
	}
	*at = src ? 12 : 16;
	*l4 = (ip[0] & 0x0f) * 4 & 0x3c;
	return 0;
}

/* rewrite the source (`src` 1) or destination address of the IP packet at `ip` (of family
 * `family`, protocol `proto`) to `to`, with its checksums; -1 if the headers are cut short */
static __always_inline int lb_rewrite(__u8 *ip, void *end, __u8 family, __u8 proto, int src,
				      const __be32 *to)
{
	int six = family == SFC_FAMILY_IPV6;
	__be32 from[4] = {}, *addr;
	__u32 at, l4;
	__u8 *h;

	if (lb_where(ip, end, src, &at, &l4))
		return -1;
	addr = (__be32 *)(ip + (at & 0x1c));
	h = ip + (l4 & 0x3fff);
	if (six) {
		if ((void *)(addr + 4) > end)
			return -1;
		__builtin_memcpy(from, addr, 16);
	} else {
		if ((void *)(addr + 1) > end)
			return -1;
		from[0] = addr[0];
	}
	if (proto == 6) {
		if ((void *)(h + 18) > end)
			return -1;
		lb_csum_replace_addr((__u16 *)(h + 16), from, to, family, LB_CSUM);
	} else if (proto == 17) {
		if ((void *)(h + 8) > end)
			return -1;
		lb_csum_replace_addr((__u16 *)(h + 6), from, to, family,
				     six ? LB_CSUM_UDP6 : LB_CSUM_UDP4);
	}
	if (six) {
		if ((void *)(addr + 4) > end)
			return -1;
		__builtin_memcpy(addr, to, 16);
		return 0;
	}
	if ((void *)(addr + 1) > end)
		return -1;
	lb_csum_replace((__u16 *)(ip + 10), from[0], to[0], LB_CSUM);
	addr[0] = to[0];
	return 0;
}

/* Where a packet is in its frame, and what lb_write is to write into it. */
struct lb_pkt {
	__u32 ip;             /* the IP header's offset in the frame (after the Ethernet header, or
			       * under the label stack) */
	__u32 bytes;          /* its IP length, as counted */
	__be32 to[4];         /* lb_write: the new address, of the packet's family */
	__u8 src;             /* lb_write: 1 the source address, 0 the destination */
	__u8 pad[3];
};

/*
 * The tuple of the IPv4 or IPv6 packet at offset p->ip of the frame into *t (node and mask
 * left), its length into p->bytes: sfc_tuple_of's 0, 1 (link-scope IPv6) or -1 (cut short).
 *
 * lb_parse and lb_write are global functions, not inlined: the verifier checks each once, by
 * itself, instead of each family, protocol and extension-header path of theirs at every place
 * they are used; they find the packet again from `ctx` (a global function takes no packet
 * pointer).
 */
__noinline int lb_parse(struct xdp_md *ctx, struct lb_pkt *p, struct sfc_tuple *t)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	if (!p || !t)
		return -1;
	return sfc_tuple_of(data + (p->ip & 0x7f), end, t, &p->bytes);
}

/* lb_rewrite of p->to into the packet at offset p->ip of the frame, of tuple `t`; global, as
 * lb_parse */
__noinline int lb_write(struct xdp_md *ctx, const struct lb_pkt *p, const struct sfc_tuple *t)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	if (!p || !t)
		return -1;
	return lb_rewrite(data + (p->ip & 0x7f), end, t->family, t->proto, p->src, p->to);
}

/* the backend for the new (or re-chosen) connection of tuple `t`, -1 if none is in */
static __always_inline int lb_choose(const struct sfc_lb_config *cfg, const struct sfc_tuple *t,
				     __u32 k, __u32 *index, __be32 *addr)
{
	struct sfc_lb_table *table = bpf_map_lookup_elem(&sfc_lb_tables, &k);
	struct sfc_lb_backend *b;
	__u32 h, bk;

	if (!table)
		return -1;
	if (cfg->sticky == SFC_LB_BY_SOURCE)
		h = sfc_flow_hash(lb_fold(t->src), 0, 0, 0, 0, 0);
	else
		h = sfc_flow_hash(lb_fold(t->src), lb_fold(t->dst), t->sport, t->dport, t->proto,
				  0);
	h %= SFC_LB_TABLE_SIZE;
	asm volatile("" : "+r"(h)); /* keep the bound check: the verifier cannot see a modulo's */
	if (h >= SFC_LB_TABLE_SLOTS)
		return -1;
	h = table->slot[h];
	if (h >= SFC_LB_MAX_BACKENDS || h >= cfg->nbackends)
		return -1;
	bk = k * SFC_LB_MAX_BACKENDS + h;
	b = bpf_map_lookup_elem(&sfc_lb_backends, &bk);
	if (!b || !(b->addr[0] | b->addr[1] | b->addr[2] | b->addr[3]))
		return -1;
	*index = h;
	__builtin_memcpy(addr, b->addr, 16);
	return 0;
}

/* whether the connection `c` still has its backend in */
static __always_inline int lb_conn_live(const struct sfc_lb_conn *c, __u32 k)
{
	__u32 bk = k * SFC_LB_MAX_BACKENDS + (c->backend % SFC_LB_MAX_BACKENDS);
	struct sfc_lb_backend *b = bpf_map_lookup_elem(&sfc_lb_backends, &bk);

	return b && (b->addr[0] | b->addr[1] | b->addr[2] | b->addr[3]) &&
	       lb_same(b->addr, c->addr);
}

/* whether the packet of tuple `t` is for the VIP of `cfg` (its family, protocol and ports) */
static __always_inline int lb_for_vip(const struct sfc_lb_config *cfg, const struct sfc_tuple *t)
{
	__u16 dport = bpf_ntohs(t->dport);

	return t->family == cfg->family && lb_same(t->dst, cfg->vip) &&
	       (!cfg->proto || cfg->proto == t->proto) && t->dport &&
	       dport >= cfg->port_first && dport <= cfg->port_last;
}

/* balance or un-NAT the IPv4 or IPv6 packet at `ip`: 0 when it may go on, -1 when it must be
 * dropped (cut short, or for the VIP with no backend in) */
static __always_inline int lb_packet(struct xdp_md *ctx, __u8 *ip)
{
	__u32 k = node_id % SFC_MAX_NODES, index;
	struct sfc_lb_config *cfg = bpf_map_lookup_elem(&sfc_lb_config, &k);
	struct sfc_tuple t = {};
	struct lb_pkt p = {.ip = (__u32)((long)ip - (long)ctx->data)};
	struct sfc_lb_conn *c, conn = {};

	if (lb_parse(ctx, &p, &t))
		return 0; /* cut short (the kernel would not forward it either), or link-scope */
	t.node = node_id;
	t.mask = SFC_LB_REPLY;
	if (!cfg || !cfg->nbackends || (t.proto != 6 && t.proto != 17))
		goto other;
	c = bpf_map_lookup_elem(&sfc_lb_conns, &t);
	if (c && lb_same(t.src, c->addr)) { /* a backend's reply: from the VIP again */
		__builtin_memcpy(p.to, cfg->vip, 16);
		p.src = 1;
		if (lb_write(ctx, &p, &t))
			return -1;
		lb_count(SFC_LB_REPLIES, p.bytes);
		return 0;
	}
	if (!lb_for_vip(cfg, &t))
		goto other;
	t.mask = SFC_LB_FORWARD;
	c = bpf_map_lookup_elem(&sfc_lb_conns, &t);
	if (c && lb_conn_live(c, k)) {
		index = c->backend;
		__builtin_memcpy(conn.addr, c->addr, 16);
	} else {
		struct sfc_tuple r = {.node = node_id, .mask = SFC_LB_REPLY, .sport = t.dport,
				      .dport = t.sport, .proto = t.proto, .family = t.family};

		if (lb_choose(cfg, &t, k, &index, conn.addr)) {
			sfc_count(SFC_C_NO_INSTANCE);
			return -1;
		}
		conn.backend = index;
		__builtin_memcpy(r.src, conn.addr, 16);
		__builtin_memcpy(r.dst, t.src, 16);
		bpf_map_update_elem(&sfc_lb_conns, &t, &conn, BPF_ANY);
		bpf_map_update_elem(&sfc_lb_conns, &r, &conn, BPF_ANY);
	}
	__builtin_memcpy(p.to, conn.addr, 16);
	p.src = 0;
	if (lb_write(ctx, &p, &t))
		return -1;
	lb_count(index % SFC_LB_MAX_BACKENDS, p.bytes);
	return 0;
other:
	lb_count(SFC_LB_OTHER, p.bytes);
	return 0;
}

SEC("xdp")
int sfc_lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be32 *lse = (void *)(eth + 1);
	struct sfc_way out;
	__u32 ttl;
	int verdict;
	void *ip;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP) || eth->h_proto == bpf_htons(SFC_ETH_P_IPV6))
		return lb_packet(ctx, (__u8 *)lse) ? XDP_DROP : XDP_PASS;
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return XDP_PASS;
	if (sfc_function_top(ctx, lse, end, node_id, &ttl, &verdict))
		return verdict;
	/* the chain stops here: the packet under the stack is balanced */
	ip = sfc_function_packet(lse, end, node_id, &out);
	if (!ip) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	sfc_count(SFC_C_PROXY_IN); /* in and out of the function, as the proxy counts them */
	if (lb_packet(ctx, ip))
		return XDP_DROP;
	return sfc_function_leave(ctx, &out, ttl);
}

/* the balancer as a stage of a bpf-pipeline node (include/sfc_stage.h): the packet is balanced
 * or un-NATed, then handed on */
SEC("xdp")
int sfc_lb_stage(struct xdp_md *ctx)
{
	void *ip = NULL;

	if (sfc_stage_ip(ctx, &ip) < 0)
		return XDP_PASS;
	if (lb_packet(ctx, ip))
		return XDP_DROP;
	return sfc_stage_next(ctx);
}

char LICENSE[] SEC("license") = "GPL";
