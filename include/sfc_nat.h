/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The bpf-nat's model (bpf/nat.bpf.c): an SFC-aware NAT that reads the label stack itself, the
 * eBPF twin of the kernel `nat` (masquerade toward one neighbour, port forwards inward).  Its
 * maps are lab-wide like the data plane's (pinned by name beside them, in
 * /sys/fs/bpf/sfclab/<lab>/maps) and keyed by the node's `node_id`:
 *
 *   sfc_nat_config    node -> the outside interface (ifindex, address) and the forward count
 *                     (all zero until configured: a node without an outside drops everything)
 *   sfc_nat_forwards  node * SFC_NAT_MAX_FORWARDS + i -> port forward i
 *   sfc_nat_counts    node * SFC_NAT_SLOTS + slot -> packets, bytes and new translations
 *                     (per CPU): slot SFC_NAT_MASQUERADE, slot SFC_NAT_FORWARD + i for forward
 *                     i, SFC_NAT_NO_PORT for new flows dropped for want of a free port,
 *                     SFC_NAT_OTHER for packets it does not translate
 *   sfc_nat_conns     LRU: the translations.  A key is a packet's 5-tuple as it arrives at the
 *                     node; the value says which end of the packet to rewrite, and to what.
 *                     A translation is two entries, one per direction: masquerading S:s -> D:d
 *                     to A:p makes (S:s -> D:d) => source A:p and (D:d -> A:p) => destination
 *                     S:s; a port forward of A:f to T:t makes (D:d -> A:f) => destination T:t
 *                     and (T:t -> D:d) => source A:f.
 *
 * Ports: TCP and UDP ports, and the identifier of an ICMP echo request (as the source port) and
 * of its reply (as the destination port).  Masquerading keeps a flow's source port if the
 * translated flow is free, as the kernel does; else it tries up to SFC_NAT_TRIES ports of
 * SFC_NAT_PORT_FIRST..SFC_NAT_PORT_LAST picked by a hash of the flow.
 *
 * Addresses are in network order; the ports of a forward in host order.  Python writes these
 * layouts from the object's BTF (src/sfclab/realize/contract.py).
 */
#ifndef SFCLAB_SFC_NAT_H
#define SFCLAB_SFC_NAT_H

#include <linux/types.h>

enum sfc_nat_limit {
	SFC_NAT_MAX_FORWARDS = 32,    /* port forwards per bpf-nat node */
	SFC_NAT_SLOTS = 35,           /* counter slots per node */
	SFC_NAT_MASQUERADE = 0,       /* the slot of masqueraded flows */
	SFC_NAT_NO_PORT = 1,          /* the slot of new flows dropped: no free port */
	SFC_NAT_OTHER = 2,            /* the slot of IPv4 packets not translated, passed as they
				       * are: fragments, protocols other than TCP, UDP and ICMP
				       * echo (request and reply) */
	SFC_NAT_FORWARD = 3,          /* the slot of forward 0; forward i is SFC_NAT_FORWARD + i */
	SFC_NAT_PORT_FIRST = 32768,   /* ports given when a flow's own is taken */
	SFC_NAT_PORT_LAST = 65535,
	SFC_NAT_TRIES = 16,           /* ports tried before a new flow is dropped */
	SFC_NAT_MAX_CONNS = 65536,    /* entries of a lab's bpf-nats, two per translation (LRU) */
};

enum sfc_nat_side { SFC_NAT_SRC = 1, SFC_NAT_DST = 2 };

struct sfc_nat_config {
	__u32 outside_ifindex;  /* the interface toward `outside`, in the node's namespace */
	__be32 outside_addr;    /* its address: what masquerading writes, where forwards listen */
	__u32 nforwards;
};

struct sfc_nat_forward {
	__be32 to_addr;
	__u16 port;             /* host order: the outside port forwarded */
	__u16 to_port;          /* host order; 0: the same port */
	__u8 proto;             /* 6 or 17 */
	__u8 pad[3];
};

struct sfc_nat_flow {         /* a packet's 5-tuple as it arrives, at one node */
	__u32 node;
	__be32 src;
	__be32 dst;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct sfc_nat_xlate {        /* what to write into a packet of that flow */
	__be32 addr;
	__be16 port;
	__u8 side;              /* enum sfc_nat_side: the end rewritten */
	__u8 slot;              /* the counter slot of the rule that made the translation */
};

struct sfc_nat_count {
	__u64 packets;
	__u64 bytes;            /* IPv4 total length */
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
