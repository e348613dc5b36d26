/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The bpf-balancer's model (bpf/balancer.bpf.c): an SFC-aware load balancer that reads the
 * label stack itself.  A virtual address (the VIP, with a protocol and a destination port
 * range; IPv4 or IPv6, its backends of its family) is spread over backends by a Maglev table
 * computed in Python (src/sfclab/plan/maglev.py) and written here.  Its maps are lab-wide like
 * the data plane's (pinned by name in /sys/fs/bpf/sfclab/<lab>/maps) and keyed by the node's
 * `node_id`:
 *
 *   sfc_lb_config    node -> the VIP and its family, its protocol and ports, the number of
 *                    backends, the stickiness (all zero until configured: nothing is balanced)
 *   sfc_lb_backends  node * SFC_LB_MAX_BACKENDS + i -> backend i's address (all 0: out)
 *   sfc_lb_tables    node -> its Maglev table: slot -> backend index; a flow's slot is its
 *                    hash (of the 5-tuple, or of the source address alone, an IPv6 address
 *                    folded to one word as the classifier folds it) % SFC_LB_TABLE_SIZE
 *   sfc_lb_counts    node * SFC_LB_SLOTS + slot -> packets and bytes (per CPU): slot i < 16
 *                    for packets sent to backend i, SFC_LB_REPLIES for replies un-NATed,
 *                    SFC_LB_OTHER for packets passed unchanged (not for the VIP, no connection)
 *   sfc_lb_conns     LRU: connections of either family.  Key: node + tuple (struct sfc_tuple),
 *                    `mask` SFC_LB_FORWARD for the
 *                    client's tuple toward the VIP (value: the backend chosen), SFC_LB_REPLY
 *                    for the backend's reply tuple toward the client (value: the backend, so
 *                    the reply's source becomes the VIP again).  An established connection
 *                    keeps its backend while that backend's entry holds the same address,
 *                    whatever the table says (sticky); when it is out, the table chooses again.
 *
 * Addresses and ports in network order except where noted; addresses are 128 bits for either
 * family (an IPv4 one in the first word, the rest 0).  The destination is rewritten with the
 * IPv4 header's checksum and the TCP/UDP checksum (over the pseudo-header, either family)
 * adjusted.  Python writes these layouts from the object's BTF
 * (src/sfclab/realize/contract.py).
 */
#ifndef SFCLAB_SFC_LB_H
#define SFCLAB_SFC_LB_H

#include <linux/types.h>

enum sfc_lb_limit {
	SFC_LB_MAX_BACKENDS = 16,   /* backends per bpf-balancer node */
	SFC_LB_TABLE_SLOTS = 1024,  /* room of a node's Maglev table */
	SFC_LB_TABLE_SIZE = 1021,   /* slots used: the largest prime within the room */
	SFC_LB_SLOTS = 18,          /* counter slots per node: backends, replies, other */
	SFC_LB_REPLIES = 16,        /* the slot of replies un-NATed */
	SFC_LB_OTHER = 17,          /* the slot of packets passed unchanged */
	SFC_LB_MAX_CONNS = 65536,   /* connection entries of a lab's bpf-balancers (LRU) */
};

enum sfc_lb_sticky { SFC_LB_BY_TUPLE = 0, SFC_LB_BY_SOURCE = 1 };

enum sfc_lb_direction { SFC_LB_FORWARD = 1, SFC_LB_REPLY = 2 };

struct sfc_lb_config {
	__be32 vip[4];        /* IPv4: vip[0], the rest 0 */
	__u16 port_first;     /* host order: the VIP's destination ports */
	__u16 port_last;
	__u8 proto;           /* 6, 17, or 0: both */
	__u8 family;          /* SFC_FAMILY_IPV4 or SFC_FAMILY_IPV6: the VIP's and its backends' */
	__u8 pad[2];
	__u32 nbackends;      /* 0: not configured, every packet passes unchanged */
	__u32 sticky;         /* enum sfc_lb_sticky */
};

struct sfc_lb_backend {
	__be32 addr[4];       /* of the VIP's family; all 0: out (no new flow chooses it, its
			       * connections choose again) */
};

struct sfc_lb_table {
	__u32 slot[SFC_LB_TABLE_SLOTS]; /* slot -> backend index (the first SFC_LB_TABLE_SIZE) */
};

struct sfc_lb_conn {
	__u32 backend;        /* index */
	__be32 addr[4];       /* the backend's address when the connection was made */
};

struct sfc_lb_count {
	__u64 packets;
	__u64 bytes;          /* IP length (IPv4: total length; IPv6: 40 + payload length) */
};

#ifdef __BPF__
const enum sfc_lb_limit sfc_contract_lb_limit SFC_CONTRACT = SFC_LB_MAX_BACKENDS;
const enum sfc_lb_sticky sfc_contract_lb_sticky SFC_CONTRACT = SFC_LB_BY_TUPLE;
const enum sfc_lb_direction sfc_contract_lb_direction SFC_CONTRACT = SFC_LB_FORWARD;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_NODES);
	__type(key, __u32);
	__type(value, struct sfc_lb_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_lb_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_LB_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct sfc_lb_backend);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_lb_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_NODES);
	__type(key, __u32);
	__type(value, struct sfc_lb_table);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_lb_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_LB_SLOTS);
	__type(key, __u32);
	__type(value, struct sfc_lb_count);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_lb_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SFC_LB_MAX_CONNS);
	__type(key, struct sfc_tuple);
	__type(value, struct sfc_lb_conn);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_lb_conns SEC(".maps");
#endif /* __BPF__ */

#endif
