// SPDX-License-Identifier: GPL-2.0
/*
 * The bpf-nat (XDP, on every interface of a `bpf-nat` node): an SFC-aware NAT, the eBPF twin
 * of the kernel `nat`.  Like the bpf-firewall it takes the place of the forwarder and of the
 * proxy on its node, so a chain's packet never leaves XDP there.  By the frame:
 *
 *   plain IPv4 or IPv6 (routed traffic, replies of a one-way chain): translated in place, then
 *       passed to the kernel, which routes it as it would any packet.
 *   labelled, top label this node's proxy label (the chain stops at this function): the IPv4
 *       or IPv6 packet under the stack is translated, the proxy label and the forward label
 *       under it are popped and the frame redirected to the next hop, as the forwarder would
 *       send it.
 *   labelled, top label this node's forward label (a path crossing the node): forwarded
 *       untranslated, as the forwarder does.
 *   any other frame (ARP ...), and IPv6 that never leaves its link (neighbour discovery,
 *   link-local, multicast: sfc_ip6_link_scope): passed, uncounted.
 *
 * Translating (include/sfc_nat.h), the same in both families -- IPv6 is NAT66 by masquerade,
 * as the kernel `nat` does it (not NPTv6 prefix translation): a packet whose 5-tuple has a
 * translation in the connection map gets it (both directions of a translated flow are there).
 * Otherwise a packet that came in on the outside interface for the outside address of its
 * family and a forwarded port of a forward of that family makes a port forward (DNAT); a packet
 * that leaves through the outside interface -- the next hop's interface for a chain's packet,
 * the kernel's route (bpf_fib_lookup) for a plain one -- makes a masquerade (SNAT) to the
 * outside address of its family.  Anything else passes as it is.  Checksums are updated
 * incrementally (RFC 1624): the IPv4 header's; TCP's, UDP's and ICMPv6's over the
 * pseudo-header; ICMP's (no pseudo-header).  An IPv4 UDP checksum of 0 (none) stays 0; in
 * IPv6, where UDP must have one, 0 is never written.  They must be whole when the packet
 * arrives, which they are on a chain's interfaces (transmit checksum offload off) -- a partial
 * checksum on a plain packet is completed by the sender's path and never checked between
 * namespaces.  Every translated packet is counted, in packets and IP bytes, by the rule
 * (masquerade, of each family apart as the kernel twin's two tables count it, or forward) that
 * made its translation; each new translation once more as `new`.
 *
 * Not translated, passed unchanged and counted as SFC_NAT_OTHER: IPv4 fragments and IPv6
 * packets with a fragment header, protocols other than TCP, UDP and ICMP (ICMPv6), and ICMP
 * other than echo request and reply (errors carry the inner header untranslated).  An IPv6
 * packet's protocol is the one behind its extension headers (sfc_ip6_walk, include/sfc.h: up
 * to SFC_IP6_EXT_MAX of them, then whatever header comes next is not translated).  A new flow
 * for which no port is free is dropped (SFC_NAT_NO_PORT).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfc.h"
#include "sfc_nat.h"
#include "sfc_pop.h"
#include "sfc_stage.h"

#define NAT_AF_INET 2
#define NAT_AF_INET6 10

static __always_inline void nat_count(__u32 slot, __u32 bytes, __u32 new)
{
	__u32 k = (node_id % SFC_MAX_NODES) * SFC_NAT_SLOTS + slot;
	struct sfc_nat_count *c = bpf_map_lookup_elem(&sfc_nat_counts, &k);

	if (c) {
		c->packets += 1;
		c->bytes += bytes;
		c->new += new;
	}
}

static __always_inline __u16 nat_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* RFC 1624, eqn. 3: the checksum at `c` once the 16-bit word `from` has become `to` */
static __always_inline void nat_csum2(__u16 *c, __u16 from, __u16 to)
{
	__u32 s = (__u16)~*c;

	s += (__u16)~from;
	s += to;
	*c = (__u16)~nat_fold(s);
}

/* the same for a 32-bit word (two 16-bit words, in memory order) */
static __always_inline void nat_csum4(__u16 *c, __u32 from, __u32 to)
{
	nat_csum2(c, (__u16)from, (__u16)to);
	nat_csum2(c, (__u16)(from >> 16), (__u16)(to >> 16));
}

/* Where a packet's parts are, as nat_parse found them. */
struct nat_pkt {
	__u32 ip;               /* its IP header's offset in the frame (after the Ethernet header,
				 * or under the label stack) */
	__u32 l4;               /* its TCP, UDP or ICMP header's offset from the IP header */
	__u32 bytes;            /* its IP length, as counted */
};

/* What nat_write writes into a packet: end `side` becomes `addr`:`port`. */
struct nat_edit {
	__be32 addr[4];         /* of `family`; IPv4: addr[0] */
	__be16 port;
	__u8 side;              /* enum sfc_nat_side */
	__u8 proto;             /* the packet's: 6, 17, 1 or 58 */
	__u8 family;            /* SFC_FAMILY_IPV4 or SFC_FAMILY_IPV6 */
	__u8 pad[3];
};

/* whether two 128-bit addresses are the same */
static __always_inline int nat_same(const __be32 *a, const __be32 *b)
{
	return !((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]));
}

/* The ports of flow `f` from its L4 header at `l4`: TCP's and UDP's, an ICMP (protocol
 * `icmp`) echo's identifier as the source port of a request (type `request`), the destination
 * port of a reply (type `reply`).  0, or -1 for what the NAT does not translate. */
static __always_inline int nat_ports(__u8 *l4, void *end, struct sfc_nat_flow *f, __u8 icmp,
				     __u8 request, __u8 reply)
{
	if (f->proto == 6 || f->proto == 17) {
		if ((void *)(l4 + 4) > end)
			return -1;
		f->sport = *(__be16 *)l4;
		f->dport = *(__be16 *)(l4 + 2);
		return 0;
	}
	if (f->proto != icmp || (void *)(l4 + 8) > end)
		return -1;
	if (l4[0] == request) {
		f->sport = *(__be16 *)(l4 + 4);
		f->dport = 0;
	} else if (l4[0] == reply) {
		f->sport = 0;
		f->dport = *(__be16 *)(l4 + 4);
	} else {
		return -1;
	}
	return 0;
}

/* nat_flow of an IPv4 packet */
static __always_inline int nat_flow4(__u8 *b, void *end, struct sfc_nat_flow *f,
				     struct nat_pkt *p)
{
	__u32 ihl;

	if ((void *)(b + 20) > end)
		return -2;
	ihl = (b[0] & 0x0f) * 4;
	if (ihl < 20)
		return -2;
	p->bytes = bpf_ntohs(*(__be16 *)(b + 2));
	if (*(__be16 *)(b + 6) & bpf_htons(0x3fff)) /* a fragment: more follow, or not the first */
		return -1;
	f->family = SFC_FAMILY_IPV4;
	f->src[0] = *(__be32 *)(b + 12);
	f->dst[0] = *(__be32 *)(b + 16);
	f->proto = b[9];
	p->l4 = ihl & 0x3c;
	return nat_ports(b + p->l4, end, f, 1, 8, 0);
}

/* nat_flow of an IPv6 packet: its protocol behind the extension headers (sfc_ip6_walk) */
static __always_inline int nat_flow6(__u8 *b, void *end, struct sfc_nat_flow *f,
				     struct nat_pkt *p)
{
	__u32 l4, frag;

	if (sfc_ip6_walk(b, end, &f->proto, &l4, &frag) ||
	    sfc_ip6_link_scope(b, end, f->proto, l4, frag))
		return -2;
	p->bytes = 40 + bpf_ntohs(*(__be16 *)(b + 4));
	if (frag)
		return -1;
	f->family = SFC_FAMILY_IPV6;
	__builtin_memcpy(f->src, b + 8, 16);
	__builtin_memcpy(f->dst, b + 24, 16);
	p->l4 = l4 & 0x3fff;
	return nat_ports(b + p->l4, end, f, SFC_IPPROTO_ICMPV6, 128, 129);
}

/*
 * The flow of the IPv4 or IPv6 packet (by its version) at offset p->ip of the frame, and where
 * its parts are: 0; -1 if the NAT does not translate it (the header comment); -2 if it is not a
 * whole IP header, or IPv6 that never leaves its link (passed, uncounted).
 *
 * nat_parse and nat_write are global functions, not inlined: the verifier checks each once, by
 * itself, instead of every family, protocol and extension header path of theirs at every place
 * they are used; they find the packet again from `ctx` (a global function takes no packet
 * pointer).
 */
__noinline int nat_parse(struct xdp_md *ctx, struct nat_pkt *p, struct sfc_nat_flow *f)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *b;

	if (!p || !f)
		return -2;
	b = data + (p->ip & 0x7f); /* the Ethernet header and SFC_MAX_LABELS labels at most */
	if ((void *)(b + 1) > end)
		return -2;
	f->node = node_id;
	if ((b[0] >> 4) == 6)
		return nat_flow6(b, end, f, p);
	if ((b[0] >> 4) != 4)
		return -2;
	return nat_flow4(b, end, f, p);
}

/* The checksum (*pc) and the port (*pp) of end `side` of a packet of protocol `proto`, its L4
 * header at `l4`: TCP's and UDP's; an ICMP or ICMPv6 echo's identifier.  -1 if cut short. */
static __always_inline int nat_l4(__u8 *l4, void *end, __u8 proto, __u8 side, __u16 **pc,
				  __u16 **pp)
{
	if (proto == 6) {
		if ((void *)(l4 + 20) > end)
			return -1;
		*pc = (__u16 *)(l4 + 16);
		*pp = (__u16 *)(l4 + (side == SFC_NAT_SRC ? 0 : 2));
		return 0;
	}
	if ((void *)(l4 + 8) > end)
		return -1;
	if (proto == 17) {
		*pc = (__u16 *)(l4 + 6);
		*pp = (__u16 *)(l4 + (side == SFC_NAT_SRC ? 0 : 2));
	} else {
		*pc = (__u16 *)(l4 + 2);
		*pp = (__u16 *)(l4 + 4);
	}
	return 0;
}

/* nat_rewrite of an IPv4 packet: the header's checksum, and the L4 one (ICMP's has no
 * pseudo-header; a UDP checksum of 0, none, is left so) */
static __always_inline int nat_rewrite4(__u8 *b, void *end, __u8 proto, __u8 side,
					__be32 addr, __be16 port, __u16 *pc, __u16 *pp)
{
	__be32 *pa = (__be32 *)(b + (side == SFC_NAT_SRC ? 12 : 16)), old;

	if ((void *)(b + 20) > end || (void *)(pa + 1) > end)
		return -1;
	old = *pa;
	nat_csum4((__u16 *)(b + 10), old, addr);
	if (proto != 17 || *pc) {
		if (proto != 1)
			nat_csum4(pc, old, addr);
		nat_csum2(pc, *pp, port);
		if (proto == 17 && !*pc)
			*pc = 0xffff; /* 0 says "no checksum" in UDP */
	}
	*pa = addr;
	*pp = port;
	return 0;
}

/* nat_rewrite of an IPv6 packet: no header checksum; TCP's, UDP's and ICMPv6's cover the
 * pseudo-header, and UDP's is never written as 0 (which IPv6 does not allow) */
static __always_inline int nat_rewrite6(__u8 *b, void *end, __u8 proto, __u8 side,
					const __be32 *addr, __be16 port, __u16 *pc, __u16 *pp)
{
	__be32 *pa = (__be32 *)(b + (side == SFC_NAT_SRC ? 8 : 24)), old[4];

	if ((void *)(pa + 4) > end)
		return -1;
	__builtin_memcpy(old, pa, 16);
	nat_csum4(pc, old[0], addr[0]);
	nat_csum4(pc, old[1], addr[1]);
	nat_csum4(pc, old[2], addr[2]);
	nat_csum4(pc, old[3], addr[3]);
	nat_csum2(pc, *pp, port);
	if (proto == 17 && !*pc)
		*pc = 0xffff;
	__builtin_memcpy(pa, addr, 16);
	*pp = port;
	return 0;
}

/* Writes e->addr and e->port into end e->side of the packet at p->ip of the frame (nat_parse
 * found its parts), checksums updated; -1 if the packet is too short to hold them (never for a
 * packet nat_parse took).  Global, as nat_parse. */
__noinline int nat_write(struct xdp_md *ctx, const struct nat_pkt *p, const struct nat_edit *e)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u16 *pc, *pp;
	__u8 *b;

	if (!p || !e)
		return -1;
	b = data + (p->ip & 0x7f);
	if (nat_l4(b + (p->l4 & 0x3fff), end, e->proto, e->side, &pc, &pp))
		return -1;
	if (e->family == SFC_FAMILY_IPV6)
		return nat_rewrite6(b, end, e->proto, e->side, e->addr, e->port, pc, pp);
	return nat_rewrite4(b, end, e->proto, e->side, e->addr[0], e->port, pc, pp);
}

/* nat_write of `addr`:`port` into end `side` of the packet of flow `f` */
static __always_inline int nat_rewrite(struct xdp_md *ctx, const struct nat_pkt *p,
				       const struct sfc_nat_flow *f, __u8 side,
				       const __be32 *addr, __be16 port)
{
	struct nat_edit e = {.port = port, .side = side, .proto = f->proto, .family = f->family};

	__builtin_memcpy(e.addr, addr, 16);
	return nat_write(ctx, p, &e);
}

/* the interface the kernel would send the packet of flow `f` out of; 0 if none */
static __always_inline __u32 nat_route(struct xdp_md *ctx, const struct sfc_nat_flow *f,
				       __u32 bytes)
{
	struct bpf_fib_lookup fib = {};
	long rc;

	fib.l4_protocol = f->proto;
	fib.sport = f->sport;
	fib.dport = f->dport;
	fib.tot_len = bytes;
	if (f->family == SFC_FAMILY_IPV6) {
		fib.family = NAT_AF_INET6;
		__builtin_memcpy(fib.ipv6_src, f->src, 16);
		__builtin_memcpy(fib.ipv6_dst, f->dst, 16);
	} else {
		fib.family = NAT_AF_INET;
		fib.ipv4_src = f->src[0];
		fib.ipv4_dst = f->dst[0];
	}
	fib.ifindex = ctx->ingress_ifindex;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return fib.ifindex;
	return 0;
}

/* The outside address of `family` into `out` (128 bits); 0, or -1 if the outside interface
 * has none of that family (the lab's `ip:` does not carry it). */
static __always_inline int nat_outside(const struct sfc_nat_config *cfg, __u8 family,
				       __be32 *out)
{
	if (family == SFC_FAMILY_IPV6)
		__builtin_memcpy(out, cfg->outside_addr6, 16);
	else
		out[0] = cfg->outside_addr;
	return (out[0] | out[1] | out[2] | out[3]) ? 0 : -1;
}

/* a port forward: the packet's destination becomes the forward's target, replies get the
 * outside address and port back */
static __always_inline int nat_forward(struct xdp_md *ctx, const struct nat_pkt *p,
				       const struct sfc_nat_flow *f, const __be32 *outside,
				       const struct sfc_nat_forward *fw, __u8 slot)
{
	__be16 to_port = fw->to_port ? bpf_htons(fw->to_port) : f->dport;
	struct sfc_nat_flow back = {.node = f->node, .sport = to_port, .dport = f->sport,
				    .proto = f->proto, .family = f->family};
	struct sfc_nat_xlate in = {.port = to_port, .side = SFC_NAT_DST, .slot = slot};
	struct sfc_nat_xlate out = {.port = f->dport, .side = SFC_NAT_SRC, .slot = slot};

	__builtin_memcpy(back.src, fw->to_addr, 16);
	__builtin_memcpy(back.dst, f->src, 16);
	__builtin_memcpy(in.addr, fw->to_addr, 16);
	__builtin_memcpy(out.addr, outside, 16);
	bpf_map_update_elem(&sfc_nat_conns, &back, &out, BPF_ANY);
	bpf_map_update_elem(&sfc_nat_conns, f, &in, BPF_ANY);
	nat_count(slot, p->bytes, 1);
	return nat_rewrite(ctx, p, f, SFC_NAT_DST, in.addr, to_port);
}

/* masquerading: the packet's source becomes the outside address and a free port (its own if
 * the flow back to it is free), the replies get the original back; -1 if no port is free */
static __always_inline int nat_masquerade(struct xdp_md *ctx, const struct nat_pkt *p,
					  const struct sfc_nat_flow *f, const __be32 *outside)
{
	struct sfc_nat_flow back = {.node = f->node, .sport = f->dport, .dport = f->sport,
				    .proto = f->proto, .family = f->family};
	__u8 slot = f->family == SFC_FAMILY_IPV6 ? SFC_NAT_MASQUERADE6 : SFC_NAT_MASQUERADE;
	struct sfc_nat_xlate in = {.port = f->sport, .side = SFC_NAT_DST, .slot = slot};
	struct sfc_nat_xlate out = {.side = SFC_NAT_SRC, .slot = slot};
	__u32 h = sfc_flow_hash(f->src[0] ^ f->src[1] ^ f->src[2] ^ f->src[3],
				f->dst[0] ^ f->dst[1] ^ f->dst[2] ^ f->dst[3], f->sport, f->dport,
				f->proto, 0), i;
	struct sfc_nat_xlate *had;

	__builtin_memcpy(back.src, f->dst, 16);
	__builtin_memcpy(back.dst, outside, 16);
	__builtin_memcpy(in.addr, f->src, 16);
	__builtin_memcpy(out.addr, outside, 16);
	for (i = 0; i < SFC_NAT_TRIES; i++) {
		if (i) {
			h = sfc_mix(h, i);
			back.dport = bpf_htons(SFC_NAT_PORT_FIRST +
					       h % (SFC_NAT_PORT_LAST - SFC_NAT_PORT_FIRST + 1));
		}
		if (!bpf_map_update_elem(&sfc_nat_conns, &back, &in, BPF_NOEXIST))
			goto found;
		had = bpf_map_lookup_elem(&sfc_nat_conns, &back);
		if (had && had->side == SFC_NAT_DST && nat_same(had->addr, f->src) &&
		    had->port == f->sport)
			goto found; /* this flow's own, whose other half the LRU let go */
	}
	nat_count(SFC_NAT_NO_PORT, p->bytes, 1);
	return -1;
found:
	out.port = back.dport;
	bpf_map_update_elem(&sfc_nat_conns, f, &out, BPF_ANY);
	nat_count(slot, p->bytes, 1);
	return nat_rewrite(ctx, p, f, SFC_NAT_SRC, out.addr, back.dport);
}

/* Translates the IPv4 or IPv6 packet at `ip` in place.  `out_ifindex`: the interface it
 * leaves by, 0 if the kernel's routes are to say.  Returns 0 to send it on, -1 to drop it. */
static __always_inline int nat_packet(struct xdp_md *ctx, void *ip, __u32 out_ifindex)
{
	__u32 k = node_id % SFC_MAX_NODES, i;
	struct sfc_nat_config *cfg = bpf_map_lookup_elem(&sfc_nat_config, &k);
	struct nat_pkt p = {.ip = (__u32)((long)ip - (long)ctx->data)};
	struct sfc_nat_flow f = {};
	struct sfc_nat_xlate *x;
	__be32 outside[4] = {};
	int rc;

	if (!cfg || !cfg->outside_ifindex) /* not configured yet: nothing goes through */
		return -1;
	rc = nat_parse(ctx, &p, &f);
	if (rc) {
		if (rc == -1)
			nat_count(SFC_NAT_OTHER, p.bytes, 0);
		return 0;
	}
	x = bpf_map_lookup_elem(&sfc_nat_conns, &f);
	if (x) {
		nat_count(x->slot < SFC_NAT_SLOTS ? x->slot : SFC_NAT_OTHER, p.bytes, 0);
		return nat_rewrite(ctx, &p, &f, x->side, x->addr, x->port);
	}
	if (nat_outside(cfg, f.family, outside))
		return 0; /* no address of its family outside: nothing to translate it to */
	if (ctx->ingress_ifindex == cfg->outside_ifindex && nat_same(f.dst, outside)) {
		for (i = 0; i < SFC_NAT_MAX_FORWARDS; i++) {
			__u32 fk = k * SFC_NAT_MAX_FORWARDS + i;
			struct sfc_nat_forward *fw;

			if (i >= cfg->nforwards)
				break;
			fw = bpf_map_lookup_elem(&sfc_nat_forwards, &fk);
			if (!fw)
				break;
			if (fw->family == f.family && fw->proto == f.proto &&
			    bpf_htons(fw->port) == f.dport)
				return nat_forward(ctx, &p, &f, outside, fw, SFC_NAT_FORWARD + i);
		}
	}
	if (!out_ifindex)
		out_ifindex = nat_route(ctx, &f, p.bytes);
	if (out_ifindex == cfg->outside_ifindex)
		return nat_masquerade(ctx, &p, &f, outside);
	return 0;
}

SEC("xdp")
int sfc_nat(struct xdp_md *ctx)
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
		return nat_packet(ctx, lse, 0) ? XDP_DROP : XDP_PASS;
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return XDP_PASS;
	if (sfc_function_top(ctx, lse, end, node_id, &ttl, &verdict))
		return verdict;
	/* the chain stops here: on by this node's forward label, under the proxy label */
	ip = sfc_function_packet(lse, end, node_id, &out);
	if (!ip) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	sfc_count(SFC_C_PROXY_IN); /* in and out of the function, as the proxy counts them */
	if (nat_packet(ctx, ip, out.hop->ifindex))
		return XDP_DROP;
	return sfc_function_leave(ctx, &out, ttl);
}

/* the NAT as a stage of a bpf-pipeline node (include/sfc_stage.h): the packet is translated,
 * then handed on; a labelled packet leaves by the node's forward label's interface */
SEC("xdp")
int sfc_nat_stage(struct xdp_md *ctx)
{
	void *ip = NULL, *data, *end;
	int labelled = sfc_stage_ip(ctx, &ip);
	__u32 out_ifindex = 0, label;
	struct sfc_hop *out;
	__be32 *lse;

	if (labelled < 0)
		return XDP_PASS;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (labelled) {
		lse = data + sizeof(struct ethhdr);
		if ((void *)(lse + 2) > end)
			return XDP_DROP;
		label = LSE_LABEL(bpf_ntohl(lse[1]));
		out = sfc_hop_of(label);
		if (!out || out->node != node_id || out->action != SFC_A_FORWARD) {
			sfc_count(SFC_C_ERRORS);
			return XDP_DROP;
		}
		out_ifindex = out->ifindex;
	}
	if (nat_packet(ctx, ip, out_ifindex))
		return XDP_DROP;
	return sfc_stage_next(ctx);
}

char LICENSE[] SEC("license") = "GPL";
