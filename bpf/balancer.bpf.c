// SPDX-License-Identifier: GPL-2.0
/*
 * The bpf-balancer (XDP, on every interface of a `bpf-balancer` node): an SFC-aware load
 * balancer.  It takes the place of the forwarder and of the proxy on its node, as the
 * bpf-firewall does (bpf/fw.bpf.c), and handles frames the same way:
 *
 *   plain IPv4 (routed traffic, replies of a one-way chain): balanced or un-NATed, then passed
 *       to the kernel, which routes it by its (new) addresses.
 *   labelled, top label this node's proxy label: the IPv4 packet under the stack is balanced
 *       or un-NATed, then the proxy label and the forward label under it are popped and the
 *       frame redirected to the next hop, as the forwarder would send it.
 *   labelled, top label this node's forward label: forwarded untouched.
 *   any other frame: passed.
 *
 * Balancing (include/sfc_lb.h): a packet whose tuple is a backend's reply to a connection gets
 * the VIP back as its source.  A TCP or UDP packet to the VIP (its protocol and ports) goes to
 * its connection's backend if it has one still in; otherwise to the backend of its Maglev slot
 * (hash of the 5-tuple or of the source address, as configured), and the connection is
 * remembered both ways.  Its destination address is rewritten to the backend's, the IPv4 and
 * TCP/UDP checksums adjusted incrementally.  Everything else passes unchanged.  Every packet
 * is counted, in packets and IPv4 bytes, by the backend it went to, as a reply, or as other.
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

/* a 16-bit one's complement checksum at `sum` (memory order) with 32-bit word `from` replaced
 * by `to` (RFC 1624; the sum is the same in either byte order, so no swapping) */
static __always_inline void lb_csum_replace(__u16 *sum, __u32 from, __u32 to, int udp)
{
	__u32 s = (__u16)~*sum;

	if (udp && !*sum)
		return; /* a UDP datagram sent without a checksum keeps none */
	s += (__u16)~(from & 0xffff);
	s += (__u16)~(from >> 16);
	s += to & 0xffff;
	s += to >> 16;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	*sum = (__u16)~s;
	if (udp && !*sum)
		*sum = 0xffff;
}

/* rewrite the address at offset `at` (12: source, 16: destination) of the IPv4 packet at `ip`
 * to `to`, with its checksums; -1 if the headers are cut short */
static __always_inline int lb_rewrite(__u8 *ip, void *end, __u32 at, __be32 to)
{
	__be32 *addr = (__be32 *)(ip + (at == 12 ? 12 : 16));
	__be32 from;
	__u8 proto, *l4;

	if ((void *)(ip + 20) > end)
		return -1;
	proto = ip[9];
	l4 = ip + ((ip[0] & 0x0f) * 4 & 0x3c);
	from = *addr;
	if (proto == 6) {
		if ((void *)(l4 + 18) > end)
			return -1;
		lb_csum_replace((__u16 *)(l4 + 16), from, to, 0);
	} else if (proto == 17) {
		if ((void *)(l4 + 8) > end)
			return -1;
		lb_csum_replace((__u16 *)(l4 + 6), from, to, 1);
	}
	lb_csum_replace((__u16 *)(ip + 10), from, to, 0);
	*addr = to;
	return 0;
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
		h = sfc_flow_hash(t->src, 0, 0, 0, 0, 0);
	else
		h = sfc_flow_hash(t->src, t->dst, t->sport, t->dport, t->proto, 0);
	h %= SFC_LB_TABLE_SIZE;
	asm volatile("" : "+r"(h)); /* keep the bound check: the verifier cannot see a modulo's */
	if (h >= SFC_LB_TABLE_SLOTS)
		return -1;
	h = table->slot[h];
	if (h >= SFC_LB_MAX_BACKENDS || h >= cfg->nbackends)
		return -1;
	bk = k * SFC_LB_MAX_BACKENDS + h;
	b = bpf_map_lookup_elem(&sfc_lb_backends, &bk);
	if (!b || !b->addr)
		return -1;
	*index = h;
	*addr = b->addr;
	return 0;
}

/* whether the connection `c` still has its backend in */
static __always_inline int lb_conn_live(const struct sfc_lb_conn *c, __u32 k)
{
	__u32 bk = k * SFC_LB_MAX_BACKENDS + (c->backend % SFC_LB_MAX_BACKENDS);
	struct sfc_lb_backend *b = bpf_map_lookup_elem(&sfc_lb_backends, &bk);

	return b && b->addr && b->addr == c->addr;
}

/* balance or un-NAT the IPv4 packet at `ip`: 0 when it may go on, -1 when it must be dropped
 * (cut short, or for the VIP with no backend in) */
static __always_inline int lb_packet(__u8 *ip, void *end)
{
	__u32 k = node_id % SFC_MAX_NODES, bytes, index;
	struct sfc_lb_config *cfg = bpf_map_lookup_elem(&sfc_lb_config, &k);
	struct sfc_tuple t = {.node = node_id, .mask = SFC_LB_REPLY};
	struct sfc_lb_conn *c, conn;
	__u16 dport;
	__be32 addr;
	__u8 proto;

	if (sfc_parse_ip(ip, end, &t.src, &t.dst, &t.sport, &t.dport, &proto))
		return 0; /* not a packet the kernel would forward either */
	t.proto = proto;
	bytes = bpf_ntohs(*(__be16 *)(ip + 2));
	if (!cfg || !cfg->nbackends || (proto != 6 && proto != 17))
		goto other;
	c = bpf_map_lookup_elem(&sfc_lb_conns, &t);
	if (c && t.src == c->addr) { /* a backend's reply: from the VIP again */
		if (lb_rewrite(ip, end, 12, cfg->vip))
			return -1;
		lb_count(SFC_LB_REPLIES, bytes);
		return 0;
	}
	dport = bpf_ntohs(t.dport);
	if (t.dst != cfg->vip || (cfg->proto && cfg->proto != proto) || !t.dport ||
	    dport < cfg->port_first || dport > cfg->port_last)
		goto other;
	t.mask = SFC_LB_FORWARD;
	c = bpf_map_lookup_elem(&sfc_lb_conns, &t);
	if (c && lb_conn_live(c, k)) {
		index = c->backend;
		addr = c->addr;
	} else {
		struct sfc_tuple r = {.node = node_id, .mask = SFC_LB_REPLY, .dst = t.src,
				      .sport = t.dport, .dport = t.sport, .proto = proto};

		if (lb_choose(cfg, &t, k, &index, &addr)) {
			sfc_count(SFC_C_NO_INSTANCE);
			return -1;
		}
		conn.backend = index;
		conn.addr = addr;
		r.src = addr;
		bpf_map_update_elem(&sfc_lb_conns, &t, &conn, BPF_ANY);
		bpf_map_update_elem(&sfc_lb_conns, &r, &conn, BPF_ANY);
	}
	if (lb_rewrite(ip, end, 16, addr))
		return -1;
	lb_count(index % SFC_LB_MAX_BACKENDS, bytes);
	return 0;
other:
	lb_count(SFC_LB_OTHER, bytes);
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
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP))
		return lb_packet((__u8 *)lse, end) ? XDP_DROP : XDP_PASS;
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
	if (lb_packet(ip, end))
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
	if (lb_packet(ip, (void *)(long)ctx->data_end))
		return XDP_DROP;
	return sfc_stage_next(ctx);
}

char LICENSE[] SEC("license") = "GPL";
