/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The bpf-firewall's model (bpf/fw.bpf.c): an SFC-aware firewall that reads the label stack
 * itself.  Its maps are lab-wide like the data plane's (pinned by name beside them, in
 * /sys/fs/bpf/sfclab/<lab>/maps) and keyed by the node's `node_id`, so every bpf-firewall of a
 * lab shares one set:
 *
 *   sfc_fw_config  node -> its policy, rule count and mode (all zero until configured:
 *                  no rules, policy drop)
 *   sfc_fw_rules   node * SFC_FW_MAX_RULES + i -> rule i, first match wins; one list for
 *                  both families, as the kernel firewall's nftables `inet` table: a rule with
 *                  IPv4 prefixes matches IPv4 packets only, one with IPv6 prefixes IPv6
 *                  packets only, one with neither (a protocol, ports) both
 *   sfc_fw_counts  node * SFC_FW_SLOTS + slot -> packets and bytes (per CPU): slot i < 64 for
 *                  rule i, SFC_FW_POLICY for packets no rule decided, SFC_FW_ESTABLISHED for
 *                  packets passed by the connection map
 *   sfc_fw_conns   LRU: the 5-tuples of accepted flows (stateful mode), key node + tuple as the
 *                  first accepted packet had it (struct sfc_tuple: either family); a packet
 *                  whose tuple or reversed tuple is there passes without the rules (the
 *                  replies of an accepted connection)
 *
 * Addresses and masks are in network order, 128 bits for either family (an IPv4 one in the
 * first word, the rest 0, as in struct sfc_class_key); the ports of a rule in host order, as
 * (first, last).
 * Python writes these layouts from the object's BTF (src/sfclab/realize/contract.py).
 */
#ifndef SFCLAB_SFC_FW_H
#define SFCLAB_SFC_FW_H

#include <linux/types.h>

enum sfc_fw_limit {
	SFC_FW_MAX_RULES = 64,        /* rules per bpf-firewall node */
	SFC_FW_SLOTS = 66,            /* counter slots per node: the rules, policy, established */
	SFC_FW_POLICY = 64,           /* the slot of packets the policy decided */
	SFC_FW_ESTABLISHED = 65,      /* the slot of packets the connection map passed */
	SFC_FW_MAX_CONNS = 65536,     /* connections remembered by a lab's bpf-firewalls (LRU) */
};

enum sfc_fw_verdict { SFC_FW_DROP = 0, SFC_FW_ACCEPT = 1 };

struct sfc_fw_rule {
	__be32 src[4];        /* prefix address, host bits zero; IPv4: src[0], the rest 0 */
	__be32 src_mask[4];
	__be32 dst[4];
	__be32 dst_mask[4];
	__u16 sport_first;    /* host order; (0, 65535): any */
	__u16 sport_last;
	__u16 dport_first;
	__u16 dport_last;
	__u8 proto;           /* 0: any; IPv6: the upper-layer header (sfc_ip6_walk) */
	__u8 action;          /* enum sfc_fw_verdict */
	__u8 family;          /* SFC_FAMILY_IPV4 or SFC_FAMILY_IPV6: the family of its prefixes,
			       * the only one it matches; 0 (no prefix): either */
	__u8 pad;
};

struct sfc_fw_config {
	__u32 nrules;
	__u32 policy;         /* enum sfc_fw_verdict */
	__u32 stateful;       /* 1: remember accepted flows, pass their replies */
};

struct sfc_fw_count {
	__u64 packets;
	__u64 bytes;          /* IP length (IPv4: total length; IPv6: 40 + payload length),
			       * as the kernel's counters count it */
};

#ifdef __BPF__
const enum sfc_fw_limit sfc_contract_fw_limit SFC_CONTRACT = SFC_FW_MAX_RULES;
const enum sfc_fw_verdict sfc_contract_fw_verdict SFC_CONTRACT = SFC_FW_DROP;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_NODES);
	__type(key, __u32);
	__type(value, struct sfc_fw_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_fw_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_FW_MAX_RULES);
	__type(key, __u32);
	__type(value, struct sfc_fw_rule);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_fw_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_FW_SLOTS);
	__type(key, __u32);
	__type(value, struct sfc_fw_count);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_fw_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SFC_FW_MAX_CONNS);
	__type(key, struct sfc_tuple);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_fw_conns SEC(".maps");
#endif /* __BPF__ */

#endif
