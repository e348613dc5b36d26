// SPDX-License-Identifier: GPL-2.0
/*
 * The bpf-nat (XDP, on every interface of a `bpf-nat` node): an SFC-aware NAT, the eBPF twin
 * of the kernel `nat`.  Like the bpf-firewall it takes the place of the forwarder and of the
 * proxy on its node, so a chain's packet never leaves XDP there.  By the frame:
 *
 *   plain IPv4 (routed traffic, replies of a one-way chain): translated in place, then passed
 *       to the kernel, which routes it as it would any packet.
 *   labelled, top label this node's proxy label (the chain stops at this function): the IPv4
 *       packet under the stack is translated, the proxy label and the forward label under it
 *       are popped and the frame redirected to the next hop, as the forwarder would send it.
 *   labelled, top label this node's forward label (a path crossing the node): forwarded
 *       untranslated, as the forwarder does.
 *   any other frame (ARP, IPv6 ...): passed.
 *
 * Translating (include/sfc_nat.h): a packet whose 5-tuple has a translation in the connection
 * map gets it (both directions of a translated flow are there).  Otherwise a packet that came
 * in on the outside interface for the outside address and a forwarded port makes a port
 * forward (DNAT); a packet that leaves through the outside interface -- the next hop's
 * interface for a chain's packet, the kernel's route (bpf_fib_lookup) for a plain one -- makes
 * a masquerade (SNAT).  Anything else passes as it is.  Checksums are updated incrementally
 * (RFC 1624): the IPv4 header's, and TCP's, UDP's (unless 0: none) and ICMP's; they must be
 * whole when the packet arrives, which they are on a chain's interfaces (transmit checksum
 * offload off) -- a partial checksum on a plain packet is completed by the sender's path and
 * never checked between namespaces.  Every translated packet is counted, in packets and
 * IPv4 bytes, by the rule (masquerade or forward) that made its translation; each new
 * translation once more as `new`.
 *
 * Not translated, passed unchanged and counted as SFC_NAT_OTHER: IP fragments, protocols other
 * than TCP, UDP and ICMP, and ICMP other than echo request and reply (errors carry the inner
 * header untranslated).  A new flow for which no port is free is dropped (SFC_NAT_NO_PORT).
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

/* The flow of the IPv4 packet at `ip` (its ICMP echo identifier as the source port of a
 * request, the destination port of a reply) and its total length; -1 if the NAT does not
 * translate it (the header comment), -2 if it is not a whole IPv4 header. */
static __always_inline int nat_flow(void *ip, void *end, struct sfc_nat_flow *f, __u32 *bytes)
{
	__u8 *b = ip, *l4;
	__u32 ihl;

	if ((void *)(b + 20) > end)
		return -2;
	ihl = (b[0] & 0x0f) * 4;
	if ((b[0] >> 4) != 4 || ihl < 20)
		return -2;
	*bytes = bpf_ntohs(*(__be16 *)(b + 2));
	if (*(__be16 *)(b + 6) & bpf_htons(0x3fff)) /* a fragment: more follow, or not the first */
		return -1;
	f->node = node_id;
	f->src = *(__be32 *)(b + 12);
	f->dst = *(__be32 *)(b + 16);
	f->proto = b[9];
	l4 = b + (ihl & 0x3c);
	if (f->proto == 6 || f->proto == 17) {
		if ((void *)(l4 + 4) > end)
			return -1;
		f->sport = *(__be16 *)l4;
		f->dport = *(__be16 *)(l4 + 2);
		return 0;
	}
	if (f->proto != 1 || (void *)(l4 + 8) > end)
		return -1;
	if (l4[0] == 8) {        /* echo request */
		f->sport = *(__be16 *)(l4 + 4);
		f->dport = 0;
	} else if (l4[0] == 0) { /* echo reply */
		f->sport = 0;
		f->dport = *(__be16 *)(l4 + 4);
	} else {
		return -1;
	}
	return 0;
}

/* Writes `addr` and `port` into end `side` of the packet at `ip`, checksums updated; -1 if
 * the packet is too short to hold them (never for a packet nat_flow took). */
static __always_inline int nat_rewrite(void *ip, void *end, __u8 side, __be32 addr,
				       __be16 port)
{
	__u8 *b = ip, *l4;
	__u16 *pc, *pp;
	__be32 *pa, old;
	int udp = 0, pseudo = 1;

	if ((void *)(b + 20) > end)
		return -1;
	pa = (__be32 *)(b + (side == SFC_NAT_SRC ? 12 : 16));
	l4 = b + ((b[0] & 0x0f) * 4 & 0x3c);
	if (b[9] == 6) {
		if ((void *)(l4 + 20) > end)
			return -1;
		pc = (__u16 *)(l4 + 16);
		pp = (__u16 *)(l4 + (side == SFC_NAT_SRC ? 0 : 2));
	} else if (b[9] == 17) {
		if ((void *)(l4 + 8) > end)
			return -1;
		pc = (__u16 *)(l4 + 6);
		pp = (__u16 *)(l4 + (side == SFC_NAT_SRC ? 0 : 2));
		udp = 1;
	} else {                 /* ICMP echo: the identifier, no pseudo-header */
		if ((void *)(l4 + 8) > end)
			return -1;
		pc = (__u16 *)(l4 + 2);
		pp = (__u16 *)(l4 + 4);
		pseudo = 0;
	}
	old = *pa;
	nat_csum4((__u16 *)(b + 10), old, addr);
	if (!udp || *pc) {
		if (pseudo)
			nat_csum4(pc, old, addr);
		nat_csum2(pc, *pp, port);
		if (udp && !*pc)
			*pc = 0xffff; /* 0 says "no checksum" in UDP */
	}
	*pa = addr;
	*pp = port;
	return 0;
}

/* the interface the kernel would send the packet of flow `f` out of; 0 if none */
static __always_inline __u32 nat_route(struct xdp_md *ctx, const struct sfc_nat_flow *f,
				       __u32 bytes)
{
	struct bpf_fib_lookup fib = {};
	long rc;

	fib.family = NAT_AF_INET;
	fib.l4_protocol = f->proto;
	fib.sport = f->sport;
	fib.dport = f->dport;
	fib.tot_len = bytes;
	fib.ipv4_src = f->src;
	fib.ipv4_dst = f->dst;
	fib.ifindex = ctx->ingress_ifindex;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return fib.ifindex;
	return 0;
}

/* a port forward: the packet's destination becomes the forward's target, replies get the
 * outside address and port back */
static __always_inline int nat_forward(void *ip, void *end, const struct sfc_nat_flow *f,
				       const struct sfc_nat_config *cfg,
				       const struct sfc_nat_forward *fw, __u8 slot, __u32 bytes)
{
	__be16 to_port = fw->to_port ? bpf_htons(fw->to_port) : f->dport;
	struct sfc_nat_flow back = {.node = f->node, .src = fw->to_addr, .dst = f->src,
				    .sport = to_port, .dport = f->sport, .proto = f->proto};
	struct sfc_nat_xlate in = {.addr = fw->to_addr, .port = to_port, .side = SFC_NAT_DST,
				   .slot = slot};
	struct sfc_nat_xlate out = {.addr = cfg->outside_addr, .port = f->dport,
				    .side = SFC_NAT_SRC, .slot = slot};

	bpf_map_update_elem(&sfc_nat_conns, &back, &out, BPF_ANY);
	bpf_map_update_elem(&sfc_nat_conns, f, &in, BPF_ANY);
	nat_count(slot, bytes, 1);
	return nat_rewrite(ip, end, SFC_NAT_DST, fw->to_addr, to_port);
}

/* masquerading: the packet's source becomes the outside address and a free port (its own if
 * the flow back to it is free), the replies get the original back; -1 if no port is free */
static __always_inline int nat_masquerade(void *ip, void *end, const struct sfc_nat_flow *f,
					  const struct sfc_nat_config *cfg, __u32 bytes)
{
	struct sfc_nat_flow back = {.node = f->node, .src = f->dst, .dst = cfg->outside_addr,
				    .sport = f->dport, .dport = f->sport, .proto = f->proto};
	struct sfc_nat_xlate in = {.addr = f->src, .port = f->sport, .side = SFC_NAT_DST,
				   .slot = SFC_NAT_MASQUERADE};
	struct sfc_nat_xlate out = {.addr = cfg->outside_addr, .side = SFC_NAT_SRC,
				    .slot = SFC_NAT_MASQUERADE};
	__u32 h = sfc_flow_hash(f->src, f->dst, f->sport, f->dport, f->proto, 0), i;
	struct sfc_nat_xlate *had;

	for (i = 0; i < SFC_NAT_TRIES; i++) {
		if (i) {
			h = sfc_mix(h, i);
			back.dport = bpf_htons(SFC_NAT_PORT_FIRST +
					       h % (SFC_NAT_PORT_LAST - SFC_NAT_PORT_FIRST + 1));
		}
		if (!bpf_map_update_elem(&sfc_nat_conns, &back, &in, BPF_NOEXIST))
			goto found;
		had = bpf_map_lookup_elem(&sfc_nat_conns, &back);
		if (had && had->side == SFC_NAT_DST && had->addr == f->src &&
		    had->port == f->sport)
			goto found; /* this flow's own, whose other half the LRU let go */
	}
	nat_count(SFC_NAT_NO_PORT, bytes, 1);
	return -1;
found:
	out.port = back.dport;
	bpf_map_update_elem(&sfc_nat_conns, f, &out, BPF_ANY);
	nat_count(SFC_NAT_MASQUERADE, bytes, 1);
	return nat_rewrite(ip, end, SFC_NAT_SRC, cfg->outside_addr, back.dport);
}

/* Translates the IPv4 packet at `ip` in place.  `out_ifindex`: the interface it leaves by,
 * 0 if the kernel's routes are to say.  Returns 0 to send it on, -1 to drop it. */
static __always_inline int nat_packet(struct xdp_md *ctx, void *ip, void *end,
				      __u32 out_ifindex)
{
	__u32 k = node_id % SFC_MAX_NODES, bytes = 0, i;
	struct sfc_nat_config *cfg = bpf_map_lookup_elem(&sfc_nat_config, &k);
	struct sfc_nat_flow f = {};
	struct sfc_nat_xlate *x;
	int rc;

	if (!cfg || !cfg->outside_ifindex) /* not configured yet: nothing goes through */
		return -1;
	rc = nat_flow(ip, end, &f, &bytes);
	if (rc) {
		if (rc == -1)
			nat_count(SFC_NAT_OTHER, bytes, 0);
		return 0;
	}
	x = bpf_map_lookup_elem(&sfc_nat_conns, &f);
	if (x) {
		nat_count(x->slot < SFC_NAT_SLOTS ? x->slot : SFC_NAT_OTHER, bytes, 0);
		return nat_rewrite(ip, end, x->side, x->addr, x->port);
	}
	if (ctx->ingress_ifindex == cfg->outside_ifindex && f.dst == cfg->outside_addr) {
		for (i = 0; i < SFC_NAT_MAX_FORWARDS; i++) {
			__u32 fk = k * SFC_NAT_MAX_FORWARDS + i;
			struct sfc_nat_forward *fw;

			if (i >= cfg->nforwards)
				break;
			fw = bpf_map_lookup_elem(&sfc_nat_forwards, &fk);
			if (!fw)
				break;
			if (fw->proto == f.proto && bpf_htons(fw->port) == f.dport)
				return nat_forward(ip, end, &f, cfg, fw, SFC_NAT_FORWARD + i, bytes);
		}
	}
	if (!out_ifindex)
		out_ifindex = nat_route(ctx, &f, bytes);
	if (out_ifindex == cfg->outside_ifindex)
		return nat_masquerade(ip, end, &f, cfg, bytes);
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
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP))
		return nat_packet(ctx, lse, end, 0) ? XDP_DROP : XDP_PASS;
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
	if (nat_packet(ctx, ip, end, out.hop->ifindex))
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
	if (nat_packet(ctx, ip, end, out_ifindex))
		return XDP_DROP;
	return sfc_stage_next(ctx);
}

char LICENSE[] SEC("license") = "GPL";
