/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The bpf-nat's model (bpf/nat.bpf.c): an SFC-aware NAT that reads the label stack itself, the
 * eBPF twin of the kernel `nat` (masquerade toward one neighbour, port forwards inward; NAT44
 * and NAT66, both by masquerade, as the kernel `nat` does).  Its
 * maps are lab-wide like the data plane's (pinned by name beside them, in
 * /sys/fs/bpf/sfclab/<lab>/maps) and keyed by the node's `node_id`:
 *
 *   sfc_nat_config    node -> the outside interface (ifindex, IPv4 and IPv6 address) and the
 *                     forward count (all zero until configured: a node without an outside
 *                     drops everything)
 *   sfc_nat_forwards  node * SFC_NAT_MAX_FORWARDS + i -> port forward i, to an address of
 *                     either family: it takes the packets of its family only
 *   sfc_nat_counts    node * SFC_NAT_SLOTS + slot -> packets, bytes and new translations
 *                     (per CPU): slot SFC_NAT_MASQUERADE (IPv4), SFC_NAT_MASQUERADE6 (IPv6:
 *                     the kernel twin's masquerade rule of its ip6 table), slot
 *                     SFC_NAT_FORWARD + i for forward i, SFC_NAT_NO_PORT for new flows
 *                     dropped for want of a free port, SFC_NAT_OTHER for packets it does not
 *                     translate
 *   sfc_nat_conns     LRU: the translations of both families.  A key is a packet's 5-tuple
 *                     (and family) as it arrives at the node; the value says which end of the
 *                     packet to rewrite, and to what.
 *                     A translation is two entries, one per direction: masquerading S:s -> D:d
 *                     to A:p makes (S:s -> D:d) => source A:p and (D:d -> A:p) => destination
 *                     S:s; a port forward of A:f to T:t makes (D:d -> A:f) => destination T:t
 *                     and (T:t -> D:d) => source A:f.
 *
 * Ports: TCP and UDP ports, and the identifier of an ICMP or ICMPv6 echo request (as the source
 * port) and of its reply (as the destination port).  Masquerading keeps a flow's source port if the
 * translated flow is free, as the kernel does; else it tries up to SFC_NAT_TRIES ports of
 * SFC_NAT_PORT_FIRST..SFC_NAT_PORT_LAST picked by a hash of the flow.
 *
 * Addresses are in network order, 128 bits for either family in the flows, translations and
 * forwards (an IPv4 one in the first word, the rest 0); the ports of a forward in host order.
 * Python writes these layouts from the object's BTF (src/sfclab/realize/contract.py).
 */
#ifndef SFCLAB_SFC_NAT_H
#define SFCLAB_SFC_NAT_H

#include <linux/types.h>

enum sfc_nat_limit {
	SFC_NAT_MAX_FORWARDS = 32,    /* port forwards per bpf-nat node */
	SFC_NAT_SLOTS = 36,           /* counter slots per node */
	SFC_NAT_MASQUERADE = 0,       /* the slot of masqueraded flows (IPv4) */
	SFC_NAT_NO_PORT = 1,          /* the slot of new flows dropped: no free port */
	SFC_NAT_OTHER = 2,            /* the slot of IP packets not translated, passed as they
				       * are: fragments, protocols other than TCP, UDP and ICMP or
				       * ICMPv6 echo (request and reply) */
	SFC_NAT_FORWARD = 3,          /* the slot of forward 0; forward i is SFC_NAT_FORWARD + i */
	SFC_NAT_MASQUERADE6 = 35,     /* the slot of masqueraded IPv6 flows (NAT66) */
	SFC_NAT_PORT_FIRST = 32768,   /* ports given when a flow's own is taken */
	SFC_NAT_PORT_LAST = 65535,
	SFC_NAT_TRIES = 16,           /* ports tried before a new flow is dropped */
	SFC_NAT_MAX_CONNS = 65536,    /* entries of a lab's bpf-nats, two per translation (LRU) */
};

enum sfc_nat_side { SFC_NAT_SRC = 1, SFC_NAT_DST = 2 };

struct sfc_nat_config {
	__u32 outside_ifindex;  /* the interface toward `outside`, in the node's namespace */
	__be32 outside_addr;    /* its IPv4 address: what masquerading writes, where forwards
				 * listen; 0: none (a lab of ip: 6), IPv4 passes untranslated */
	__u32 nforwards;
	__be32 outside_addr6[4]; /* its IPv6 address, the same for IPv6; all 0: none (ip: 4) */
};

struct sfc_nat_forward {
	__be32 to_addr[4];      /* IPv4: to_addr[0], the rest 0 */
	__u16 port;             /* host order: the outside port forwarded */
	__u16 to_port;          /* host order; 0: the same port */
	__u8 proto;             /* 6 or 17 */
	__u8 family;            /* SFC_FAMILY_IPV4 or SFC_FAMILY_IPV6: of to_addr, and of the
				 * packets it forwards */
	__u8 pad[2];
};

struct sfc_nat_flow {         /* a packet's 5-tuple as it arrives, at one node */
	__u32 node;
	__be32 src[4];          /* IPv4: src[0], the rest 0 */
	__be32 dst[4];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;            /* SFC_FAMILY_IPV4 or SFC_FAMILY_IPV6 */
	__u8 pad[2];
};

struct sfc_nat_xlate {        /* what to write into a packet of that flow */
	__be32 addr[4];         /* of the flow's family */
	__be16 port;
	__u8 side;              /* enum sfc_nat_side: the end rewritten */
	__u8 slot;              /* the counter slot of the rule that made the translation */
};

struct sfc_nat_count {
	__u64 packets;
	__u64 bytes;            /* IP length (IPv4: total length; IPv6: 40 + payload length) */
	__u64 new;              /* translations made (the kernel's nat rules count only these) */
};

#ifdef __BPF__
const enum sfc_nat_limit sfc_contract_nat_limit SFC_CONTRACT = SFC_NAT_MAX_FORWARDS;
const enum sfc_nat_side sfc_contract_nat_side SFC_CONTRACT = SFC_NAT_SRC;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_NODES);
	__type(key, __u32);
	__type(value, struct sfc_nat_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_nat_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_NAT_MAX_FORWARDS);
	__type(key, __u32);
	__type(value, struct sfc_nat_forward);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_nat_forwards SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_NAT_SLOTS);
	__type(key, __u32);
	__type(value, struct sfc_nat_count);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_nat_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SFC_NAT_MAX_CONNS);
	__type(key, struct sfc_nat_flow);
	__type(value, struct sfc_nat_xlate);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_nat_conns SEC(".maps");
#endif /* __BPF__ */

#endif
