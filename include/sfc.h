/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SFC data plane's shared model: label stack entries, the lab-wide maps every program of a
 * lab shares (pinned by name under /sys/fs/bpf/sfclab/<lab>/maps), and the counters.
 *
 * One lab, one set of maps; one program load per node, told its node by `node_id` (the only
 * variable in each program's .rodata, set by sfc-steer before loading).  Labels are unique in a
 * lab, so one label table serves every node: an entry names the node that owns the label, and
 * a node drops a packet whose top label it does not own.
 *
 *   classifier (tc, at the chain's ingress node): 5-tuple and family -> chain, by tuple-space
 *       search (one hash lookup per distinct wildcard mask, best priority wins); chain -> path
 *       by a hash of the flow over weighted slots; pushes the path's whole label stack at once.
 *       IPv4 and IPv6 share one key (struct sfc_class_key: 128-bit addresses, an IPv4 one in
 *       the first word, and the family as a masked field like the protocol), so the lookup,
 *       the masks and the limits are the same for both; a flow of the wrong family never
 *       matches an entry of one family.
 *   forwarder (XDP, every node on a path): pops its own top label and redirects to the next
 *       hop (the last pop delivers plain IPv4 or IPv6, by the version under the stack), or
 *       hands the packet to the proxy.
 *   proxy (XDP + tc at a function node): takes the rest of the stack off, parks it under a
 *       stack id carried by skb->mark through the function (NAT-safe: the mark survives address
 *       rewriting), and puts it back on whatever leaves the function.
 *
 * The packet mark in a node has two owners, each with its own bits; neither writes the other's
 * (the same layout is in src/sfclab/plan/marks.py, checked against this header by a test):
 *
 *   bits 31..28  SFC_MARK_TAG_MASK     the proxy's tag, SFC_MARK_TAG: a stack id is parked
 *   bits 27..12  SFC_MARK_ID_*         the parked stack's id (SFC_MAX_STACKS ids)
 *   bits 11..0   SFC_MARK_TENANT_MASK  the tenancy rules' (nftables, ip rules): the tenant's
 *                                      routing table in a node shared by tenants
 */
#ifndef SFCLAB_SFC_H
#define SFCLAB_SFC_H

#include <linux/types.h>

/* The limits: an enum, not macros, so that they are in the objects' BTF, where user space reads
 * them (src/sfclab/realize/contract.py; the objects are built with every declared type kept). */
enum sfc_limit {
	SFC_MAX_LABELS = 16,      /* deepest stack pushed at once */
	SFC_MAX_MASKS = 32,       /* distinct wildcard masks in a lab's classifiers */
	SFC_MAX_SLOTS = 1024,     /* load-balancing slots per chain (a power of two) */
	SFC_MAX_NODES = 256,
	SFC_MAX_CHAINS = 256,     /* chain directions (a symmetric chain uses two) */
	SFC_MAX_PATHS = 4096,
	SFC_MAX_STACKS = 65536,   /* distinct remaining stacks parked by proxies */
	SFC_MAX_CLASSES = 262144, /* classifier entries (sfc_classes) */
	SFC_MAX_HOPS = 65536,     /* labels (sfc_labels, indexed by label: labels below it) */
	SFC_MAX_FLOWS = 65536,    /* flows pinned to a path (sfc_flows, LRU) */
};

#define SFC_MARK_PROXY_MASK 0xfffff000u  /* every bit the proxy owns */
#define SFC_MARK_TAG_MASK 0xf0000000u
#define SFC_MARK_TAG 0x50000000u
#define SFC_MARK_ID_SHIFT 12
#define SFC_MARK_ID_MASK 0xffffu          /* SFC_MAX_STACKS - 1 */
#define SFC_MARK_TENANT_MASK 0x00000fffu /* the tenancy's; never written by a BPF program */
#define SFC_ETH_P_MPLS_UC 0x8847
#define SFC_ETH_P_IP 0x0800
#define SFC_ETH_P_IPV6 0x86DD
#define SFC_FAMILY_IPV4 4 /* sfc_class_key.family of an IPv4 packet */
#define SFC_FAMILY_IPV6 6
#define SFC_FLOW_MASK 0xffffffffu /* sfc_class_key.mask of a whole flow (sfc_flows) */
/* IPv6 extension headers the parser walks to the upper-layer header (sfc_parse_ip6) */
#define SFC_IPPROTO_HOPOPTS 0
#define SFC_IPPROTO_ROUTING 43
#define SFC_IPPROTO_FRAGMENT 44
#define SFC_IPPROTO_DSTOPTS 60
#define SFC_IPPROTO_ICMPV6 58
#define SFC_IP6_EXT_MAX 4         /* at most this many; a packet with more has no ports */
#define SFC_IP6_FRAG 0x10000      /* sfc_ip6_walk: a fragment header was met ... */
#define SFC_IP6_LATER 0xfff8      /* ... and these bits, its offset, say it is not the first */

/* label stack entry (RFC 3032), host order: label 20 bits, TC 3, bottom of stack 1, TTL 8 */
#define LSE_LABEL(v) ((v) >> 12)
#define LSE_BOS(v) (((v) >> 8) & 1)
#define LSE_TTL(v) ((v) & 0xff)

enum sfc_counter {
	SFC_C_CLASSIFIED,     /* packets matched by a classifier and pushed */
	SFC_C_POPPED,         /* labels taken off by this node */
	SFC_C_FORWARDED,      /* labelled packets sent on to the next hop */
	SFC_C_DELIVERED,      /* last label popped: sent on as plain IPv4 or IPv6 */
	SFC_C_TTL_EXPIRED,
	SFC_C_UNKNOWN_LABEL,  /* top label absent, or owned by another node */
	SFC_C_PROXY_IN,       /* stack taken off before the function */
	SFC_C_PROXY_OUT,      /* stack put back after the function */
	SFC_C_PROXY_MISS,     /* left the function with no parked stack: routed as plain IP */
	SFC_C_ERRORS,         /* malformed stacks, helper failures, full tables */
	SFC_C_GSO,            /* GSO packets a push point could not label */
	SFC_C_NO_INSTANCE,    /* classified onto a path with no instance left: dropped */
	SFC_C_NSH_TTL_EXPIRED, /* NSH: arrived with TTL 1 or 0 (include/sfc_nsh.h) */
	SFC_C_NSH_SI_EXPIRED, /* NSH: the service index would reach 0 after a function */
	SFC_C_NSH_UNKNOWN,    /* NSH: no hop of this node at the (SPI, SI), or a bad header */
	SFC_NCOUNTERS = 16,
};

struct sfc_tuple {            /* an IPv4 or IPv6 5-tuple at one node: the connection keys
			       * of the SFC-aware eBPF functions (sfc_fw.h, sfc_lb.h); the
			       * layout of sfc_class_key, addresses of either family */
	__u32 node;
	__u32 mask;
	__be32 src[4];        /* an IPv4 address in the first word, the rest 0 */
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;           /* IPv6: behind the extension headers (sfc_ip6_walk) */
	__u8 family;          /* SFC_FAMILY_IPV4 or SFC_FAMILY_IPV6 */
	__u8 pad[2];
};

struct sfc_class_key {        /* a masked classifier key at one node (mask: its index); with
			       * mask SFC_FLOW_MASK, a whole flow: the proxy's fallback key */
	__u32 node;
	__u32 mask;
	__be32 src[4];        /* IPv4: src[0], the rest 0 */
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;           /* IPv6: the upper-layer header (sfc_parse_ip6) */
	__u8 family;          /* SFC_FAMILY_IPV4 or SFC_FAMILY_IPV6; 0 under a mask without it */
	__u8 pad[2];
};

struct sfc_mask {             /* one wildcard mask (0 in `used` ends the list) */
	__u32 used;
	__be32 src[4];
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;          /* 0xff: the entry is of one family; 0: of either (no prefix) */
	__u8 pad[2];
};

struct sfc_match {
	__s32 priority;       /* higher wins */
	__u32 chain;          /* chain direction index */
};

struct sfc_chain {
	__u32 nslots;         /* 0: unused */
	__u32 symmetric;      /* 0; 1, 2: forward, reverse of a symmetric chain (sfc_flow_hash) */
	__u32 slot[SFC_MAX_SLOTS]; /* slot -> path index */
};

/* how a path is written on the wire between hops (a chain's `encap`, src/sfclab/plan/encap.py) */
enum sfc_encap { SFC_ENCAP_MPLS = 0, SFC_ENCAP_NSH = 1, SFC_ENCAP_SRV6 = 2 };

struct sfc_path {             /* what the ingress pushes, and where it sends it */
	__u32 depth;
	__u32 ifindex;        /* the ingress node's interface toward the first hop */
	__u8 smac[6];
	__u8 dmac[6];
	__be32 lse[SFC_MAX_LABELS];
	__u32 encap;          /* enum sfc_encap: what lse holds (NSH: its header, depth 2) and
			       * the ethertype pushed */
};

/* forward: pop the label, send on to the next hop; proxy: hand to the function here; unpad:
 * the last label of a padded path (a chain's pad_labels), pop it and every padding entry below
 * it down to the bottom of the stack, and send the plain IPv4 packet on to the next hop.
 * Padding entries carry a label no node owns (SFC_PAD_LABEL in src/sfclab/plan/sfc.py), so a
 * frame whose top is padding is dropped as an unknown label. */
enum sfc_action { SFC_A_FORWARD = 1, SFC_A_PROXY = 2, SFC_A_UNPAD = 3 };

struct sfc_hop {              /* what the owner of a label does with it */
	__u32 node;
	__u32 action;
	__u32 ifindex;        /* forward: out interface, in the owner's namespace */
	__u8 smac[6];
	__u8 dmac[6];
};

struct sfc_stack {            /* a parked remaining stack (top first) */
	__u32 depth;
	__be32 lse[SFC_MAX_LABELS];
};

#ifdef __BPF__
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

const volatile __u32 node_id = 0;

/* The contract's anchors: a type is in an object's BTF only if something typed uses it.  These
 * constants live in a section of their own, which libbpf skips (no map is made, nothing is
 * loaded, and node_id stays the only variable in .rodata); user space reads their types'
 * layouts and values from the object (src/sfclab/realize/contract.py). */
#define SFC_CONTRACT __attribute__((section(".sfc_contract"), used))
const enum sfc_limit sfc_contract_limit SFC_CONTRACT = SFC_MAX_LABELS;
const enum sfc_counter sfc_contract_counter SFC_CONTRACT = SFC_NCOUNTERS;
const enum sfc_action sfc_contract_action SFC_CONTRACT = SFC_A_FORWARD;
const enum sfc_encap sfc_contract_encap SFC_CONTRACT = SFC_ENCAP_MPLS;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_MASKS);
	__type(key, __u32);
	__type(value, struct sfc_mask);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_masks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SFC_MAX_CLASSES);
	__type(key, struct sfc_class_key);
	__type(value, struct sfc_match);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_classes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_CHAINS);
	__type(key, __u32);
	__type(value, struct sfc_chain);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_chains SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_PATHS);
	__type(key, __u32);
	__type(value, struct sfc_path);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_paths SEC(".maps");

/* label -> its hop: an array, so the lookup at every hop is an index (the verifier inlines it),
 * not a hash; an entry of node 0 is no label's (node ids start at 1): read through sfc_hop_of */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_HOPS);
	__type(key, __u32);
	__type(value, struct sfc_hop);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_labels SEC(".maps");

/* label -> the device its forward (or unpad) hop sends out of, for bpf_redirect_map: the device
 * is held by the entry, so a redirect looks nothing up by interface index.  Written from inside
 * the owner's namespace (src/sfclab/realize/dataplane.py); an entry missing (or cleared when its
 * device went) falls back to bpf_redirect by the hop's ifindex (sfc_redirect_hop).  Lab-wide,
 * but pinned by sfc-steer itself, not by name: libbpf 1.1 refuses to reuse a pinned devmap
 * (the kernel adds BPF_F_RDONLY_PROG to a devmap's flags, which libbpf then takes for a
 * mismatch), so another loader of these objects (sfcgen's classifier) gets a map of its own,
 * which it never reads. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, SFC_MAX_HOPS);
	__type(key, __u32);
	__type(value, __u32);
} sfc_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SFC_MAX_STACKS);
	__type(key, struct sfc_stack);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_stack_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_STACKS);
	__type(key, __u32);
	__type(value, struct sfc_stack);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_next_stack SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SFC_MAX_FLOWS);
	__type(key, struct sfc_class_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SFC_MAX_PATHS);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_path_counts SEC(".maps");

static __always_inline void sfc_count(__u32 counter)
{
	__u32 k = (node_id % SFC_MAX_NODES) * SFC_NCOUNTERS + counter;
	__u64 *v = bpf_map_lookup_elem(&sfc_counters, &k);

	if (v)
		*v += 1;
}

/* the hop of `label`, or NULL when no node owns it */
static __always_inline struct sfc_hop *sfc_hop_of(__u32 label)
{
	struct sfc_hop *hop = bpf_map_lookup_elem(&sfc_labels, &label);

	return hop && hop->node ? hop : NULL;
}

/* XDP: send the frame out of `hop`'s interface (the hop of `label`): by the label's device in
 * sfc_ports, or by the hop's interface index where that entry is missing */
static __always_inline int sfc_redirect_hop(__u32 label, const struct sfc_hop *hop)
{
	long verdict = bpf_redirect_map(&sfc_ports, label, 0);

	return verdict == XDP_REDIRECT ? XDP_REDIRECT : (int)bpf_redirect(hop->ifindex, 0);
}

static __always_inline __u32 sfc_mix(__u32 h, __u32 v)
{
	v *= 0xcc9e2d51u;
	v = (v << 15) | (v >> 17);
	v *= 0x1b873593u;
	h ^= v;
	h = (h << 13) | (h >> 19);
	return h * 5 + 0xe6546b64u;
}

/* the flow's hash.  symmetric 0: the whole 5-tuple.  A symmetric chain hashes what a NAT in the
 * chain leaves alone, the server's end and the client's port: its forward direction (1) the
 * destination address and both ports, its reverse direction (2) the source address and both
 * ports swapped -- so a flow and its replies pick the same slot even through masquerading. */
static __always_inline __u32 sfc_flow_hash(__be32 src, __be32 dst, __be16 sport, __be16 dport,
					   __u8 proto, __u32 symmetric)
{
	__u32 h = 0x5fc1u;

	if (symmetric == 1) {
		h = sfc_mix(h, dst);
		h = sfc_mix(h, ((__u32)dport << 16) | sport);
	} else if (symmetric == 2) {
		h = sfc_mix(h, src);
		h = sfc_mix(h, ((__u32)sport << 16) | dport);
	} else {
		h = sfc_mix(h, src);
		h = sfc_mix(h, dst);
		h = sfc_mix(h, ((__u32)sport << 16) | dport);
	}
	h = sfc_mix(h, proto);
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	return h ^ (h >> 16);
}

/* the proxy's bits of a mark carrying parked stack `id` */
static __always_inline __u32 sfc_mark_of(__u32 id)
{
	return SFC_MARK_TAG | ((id & SFC_MARK_ID_MASK) << SFC_MARK_ID_SHIFT);
}

/* the parked stack id in `mark`, or -1 if the proxy's tag is not there */
static __always_inline int sfc_mark_id(__u32 mark, __u32 *id)
{
	if ((mark & SFC_MARK_TAG_MASK) != SFC_MARK_TAG)
		return -1;
	*id = (mark >> SFC_MARK_ID_SHIFT) & SFC_MARK_ID_MASK;
	return 0;
}

/* The ethertype of what lies at `ip` once the label stack is off: IPv6 by its version, else
 * IPv4 (what the classifier pushed labels onto is one of the two). */
static __always_inline __u16 sfc_inner_proto(void *ip, void *end)
{
	__u8 *b = ip;

	if ((void *)(b + 1) <= end && (b[0] >> 4) == 6)
		return SFC_ETH_P_IPV6;
	return SFC_ETH_P_IP;
}

/* The upper-layer header of the IPv6 packet at `ip`: its type in *proto and its offset from
 * `ip` in *l4, behind the extension headers (hop-by-hop and destination options, routing,
 * fragment), up to SFC_IP6_EXT_MAX of them: behind more, *proto is the next extension header's
 * type (AH and ESP are upper layers here).  *frag: 0, or SFC_IP6_FRAG for a fragment with its
 * offset in the bits SFC_IP6_LATER (not 0: not the first, nothing upper-layer is there).  0, or
 * -1 if cut short or not IPv6. */
static __always_inline int sfc_ip6_walk(void *ip, void *end, __u8 *proto, __u32 *l4,
					__u32 *frag)
{
	__u8 *b = ip, *h;
	__u32 off = 40;

	if ((void *)(b + 40) > end || (b[0] >> 4) != 6)
		return -1;
	*proto = b[6];
	*frag = 0;
	for (__u32 i = 0; i < SFC_IP6_EXT_MAX; i++) {
		__u8 nh = *proto;

		if (nh != SFC_IPPROTO_HOPOPTS && nh != SFC_IPPROTO_ROUTING &&
		    nh != SFC_IPPROTO_FRAGMENT && nh != SFC_IPPROTO_DSTOPTS)
			break;
		h = b + off;
		if ((void *)(h + 8) > end)
			return -1;
		*proto = h[0];
		if (nh == SFC_IPPROTO_FRAGMENT) {
			*frag |= SFC_IP6_FRAG | (bpf_ntohs(*(__be16 *)(h + 2)) & SFC_IP6_LATER);
			off += 8;
		} else {
			off += 8 + 8 * (__u32)h[1];
		}
	}
	*l4 = off;
	return 0;
}

/* whether the IPv6 packet at `ip` (its 40 bytes there) is sent to a link-local (fe80::/10) or
 * multicast (ff00::/8) address */
static __always_inline int sfc_ip6_link_dst(const __u8 *b)
{
	return b[24] == 0xff || (b[24] == 0xfe && (b[25] & 0xc0) == 0x80);
}

/* Whether the IPv6 packet at `ip`, its upper-layer header `proto` at `l4` (sfc_ip6_walk), never
 * leaves its link: sent to a link-local or multicast address (sfc_ip6_link_dst), or neighbour
 * discovery (ICMPv6 types 133 to 137, also unicast).  1 if so, 0 if not, -1 if cut short. */
static __always_inline int sfc_ip6_link_scope(void *ip, void *end, __u8 proto, __u32 l4,
					      __u32 frag)
{
	__u8 *b = ip, *h = b + l4;

	if ((void *)(b + 40) > end)
		return -1;
	if (sfc_ip6_link_dst(b))
		return 1;
	if (proto != SFC_IPPROTO_ICMPV6 || (frag & SFC_IP6_LATER))
		return 0;
	if ((void *)(h + 1) > end)
		return -1;
	return h[0] >= 133 && h[0] <= 137;
}

/* The ports of an IPv6 packet whose upper-layer header `proto` is at `l4` (sfc_ip6_walk): TCP's
 * and UDP's, 0 for other protocols and later fragments.  0, or -1 if cut short. */
static __always_inline int sfc_ip6_ports(void *ip, void *end, __u8 proto, __u32 l4, __u32 frag,
					 __be16 *sport, __be16 *dport)
{
	__u8 *h = (__u8 *)ip + l4;

	*sport = 0;
	*dport = 0;
	if ((proto != 6 && proto != 17) || (frag & SFC_IP6_LATER))
		return 0;
	if ((void *)(h + 4) > end)
		return -1;
	*sport = *(__be16 *)h;
	*dport = *(__be16 *)(h + 2);
	return 0;
}

/* The IPv6 5-tuple of the packet whose IPv6 header starts at `ip`: addresses, the upper-layer
 * protocol as the protocol, ports when that is TCP or UDP (sfc_ip6_walk: behind more than
 * SFC_IP6_EXT_MAX extension headers, the protocol is the next one's type and the ports 0; a
 * fragment after the first has its protocol and no ports, as an IPv4 one).  Returns 0, or -1
 * if cut short, or if the packet never leaves its link (sfc_ip6_link_scope): no chain carries
 * it, as none carries ARP. */
static __always_inline int sfc_parse_ip6(void *ip, void *end, __be32 *src, __be32 *dst,
					 __be16 *sport, __be16 *dport, __u8 *proto)
{
	__u32 l4, frag;

	if (sfc_ip6_walk(ip, end, proto, &l4, &frag) ||
	    sfc_ip6_link_scope(ip, end, *proto, l4, frag))
		return -1;
	__builtin_memcpy(src, (__u8 *)ip + 8, 16);
	__builtin_memcpy(dst, (__u8 *)ip + 24, 16);
	return sfc_ip6_ports(ip, end, *proto, l4, frag, sport, dport);
}

/* the IPv4 5-tuple of the packet whose IP header starts at `ip`; ports 0 for other protocols
 * and for fragments after the first.  Returns 0, or -1 if the header is cut short. */
static __always_inline int sfc_parse_ip(void *ip, void *end, __be32 *src, __be32 *dst,
					__be16 *sport, __be16 *dport, __u8 *proto)
{
	__u8 *b = ip;
	__u32 ihl;

	if ((void *)(b + 20) > end)
		return -1;
	ihl = (b[0] & 0x0f) * 4;
	if ((b[0] >> 4) != 4 || ihl < 20)
		return -1;
	*src = *(__be32 *)(b + 12);
	*dst = *(__be32 *)(b + 16);
	*proto = b[9];
	*sport = 0;
	*dport = 0;
	/* first fragment or unfragmented: the ports are there */
	if ((*proto == 6 || *proto == 17) && !(*(__be16 *)(b + 6) & bpf_htons(0x1fff))) {
		__u8 *l4 = b + (ihl & 0x3c);

		if ((void *)(l4 + 4) > end)
			return -1;
		*sport = *(__be16 *)l4;
		*dport = *(__be16 *)(l4 + 2);
	}
	return 0;
}

/* The key in sfc_flows of the IPv4 or IPv6 packet at `ip` (by its version) at this node: its
 * 5-tuple and family, mask SFC_FLOW_MASK (the proxy's fallback for functions that lose the
 * packet mark).  0, or -1 when it is cut short. */
static __always_inline int sfc_flow_key(void *ip, void *end, struct sfc_class_key *k)
{
	__u8 *b = ip;
	__u8 proto = 0;
	int bad;

	if ((void *)(b + 1) > end)
		return -1;
	k->node = node_id;
	k->mask = SFC_FLOW_MASK;
	if ((b[0] >> 4) == 6) {
		k->family = SFC_FAMILY_IPV6;
		bad = sfc_parse_ip6(ip, end, k->src, k->dst, &k->sport, &k->dport, &proto);
	} else {
		k->family = SFC_FAMILY_IPV4;
		bad = sfc_parse_ip(ip, end, &k->src[0], &k->dst[0], &k->sport, &k->dport, &proto);
	}
	k->proto = proto;
	return bad ? -1 : 0;
}

/* The 5-tuple of the IPv4 or IPv6 packet at `ip` (by its version) into *t, the node and mask
 * left as they are, and its length as the kernel's counters count it (IPv4: the total length;
 * IPv6: the payload length and the 40 bytes of its header) into *bytes.  0; 1 for an IPv6
 * packet that never leaves its link (sfc_ip6_link_scope: neighbour discovery, link-local,
 * multicast), its tuple filled all the same; -1 when it is cut short. */
static __always_inline int sfc_tuple_of(void *ip, void *end, struct sfc_tuple *t, __u32 *bytes)
{
	__u8 *b = ip;
	__u32 l4, frag;
	int scope;

	if ((void *)(b + 20) > end)
		return -1;
	if ((b[0] >> 4) != 6) {
		t->family = SFC_FAMILY_IPV4;
		*bytes = bpf_ntohs(*(__be16 *)(b + 2));
		return sfc_parse_ip(ip, end, &t->src[0], &t->dst[0], &t->sport, &t->dport,
				    &t->proto);
	}
	t->family = SFC_FAMILY_IPV6;
	if (sfc_ip6_walk(ip, end, &t->proto, &l4, &frag))
		return -1;
	scope = sfc_ip6_link_scope(ip, end, t->proto, l4, frag);
	if (scope < 0 || sfc_ip6_ports(ip, end, t->proto, l4, frag, &t->sport, &t->dport))
		return -1;
	__builtin_memcpy(t->src, b + 8, 16);
	__builtin_memcpy(t->dst, b + 24, 16);
	*bytes = 40 + bpf_ntohs(*(__be16 *)(b + 4));
	return scope;
}
#endif /* __BPF__ */

#endif
