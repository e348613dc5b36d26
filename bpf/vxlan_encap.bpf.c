// SPDX-License-Identifier: GPL-2.0
/*
 * vxlan_encap: the sending half of the shortbridge's own VXLAN tunnel end.  Attached at tcx
 * ingress of a shortbridged link's port (the host-context end of the node's veth), it puts
 * the link's outer headers in front of every frame the node sends and sends it out of the
 * host's underlay interface: no VXLAN device, no UDP socket, no routing in the host context.
 *
 * Outer headers (load-time settings, set by native/sfc-shortbridge.c): Ethernet from the
 * underlay interface's MAC to the remote host's (resolved when the link is made), IPv4 local
 * -> remote (TTL 64, no DF, as the kernel's VXLAN device sends by default), UDP to the VXLAN
 * port with a source port from the inner flow's hash (entropy for the underlay's ECMP, in the
 * kernel's default range 32768-60999 as udp_flow_src_port picks it), UDP checksum 0 (as the
 * kernel's VXLAN over IPv4 by default), VXLAN with the link's VNI.
 *
 * A frame is one frame on the wire unless it is a GSO skb (TCP segments GRO merged at the
 * port, or a node's TSO/GSO frame): the 50 bytes are pushed in front of it
 * (bpf_skb_change_head, ARP and IPv6 alike) and it goes as it is; a partial checksum of the
 * inner frame keeps its absolute offsets, so whoever finishes it finishes the inner one.
 * A GSO skb of IPv4 or IPv6 instead gets its room opened behind its Ethernet header by
 * bpf_skb_adjust_room with the encapsulation flags (outer IPv4, UDP, an inner Ethernet header
 * 14 bytes before the inner network header): the kernel then knows it as a UDP tunnel packet
 * (skb->encapsulation, inner header offsets, SKB_GSO_UDP_TUNNEL), so it is cut into segments
 * that each get their own outer headers (IPv4 length, ID and checksum, UDP length) where it
 * leaves the host: by the underlay device if it can, else in software before it.  Its segment
 * size is kept (BPF_F_ADJ_ROOM_FIXED_GSO): the node's MTU already leaves the 50 bytes.  Only
 * GSO skbs are marked so: the receiving end cannot clear the mark on this kernel (see
 * vxlan_decap.bpf.c), and a frame still marked is refused by the next encapsulation with
 * these flags (-EALREADY).  A GSO skb that cannot be marked (not IP, or marked already) is
 * dropped and counted as an error rather than sent oversize.
 * What passed is counted in `counts` (struct vxlan_counts, sfc-shortbridge --counters).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "vxlan_tunnel.h"

const volatile __u32 underlay_ifindex = 0;
const volatile __u8 local_mac[ETH_ALEN] = {0};
const volatile __u8 remote_mac[ETH_ALEN] = {0};
const volatile __be32 local_addr = 0;
const volatile __be32 remote_addr = 0;
const volatile __u32 vni = 0;
const volatile __u16 udp_port = 4789;

#define SPORT_MIN 32768
#define SPORT_MAX 61000

static __always_inline __u16 ip_checksum(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

struct vxlan_counts counts = {};

#define ENCAP_FLAGS                                                                             \
	(BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP | \
	 BPF_F_ADJ_ROOM_ENCAP_L2_ETH | BPF_F_ADJ_ROOM_ENCAP_L2(sizeof(struct ethhdr)))

static __always_inline int fail(void)
{
	__sync_fetch_and_add(&counts.errors, 1);
	return TC_ACT_SHOT;
}

SEC("tc")
int vxlan_encap(struct __sk_buff *skb)
{
	struct vxlan_outer h = {};
	struct iphdr ip = {};
	struct ethhdr inner;
	__u32 len = skb->len;
	__u32 hash = bpf_get_hash_recalc(skb);
	int is_ip;

	if (bpf_skb_load_bytes(skb, 0, &inner, sizeof(inner)))
		return fail();
	is_ip = inner.h_proto == bpf_htons(ETH_P_IP) || inner.h_proto == bpf_htons(ETH_P_IPV6);
	hash ^= hash << 16;
	/* byte by byte: a copy through a non-volatile pointer would be folded to the zeros
	 * these load-time settings hold at compile time */
#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++) {
		h.eth.h_dest[i] = remote_mac[i];
		h.eth.h_source[i] = local_mac[i];
	}
	h.eth.h_proto = bpf_htons(ETH_P_IP);
	ip.version = 4;
	ip.ihl = 5;
	ip.ttl = 64;
	ip.protocol = IPPROTO_UDP;
	/* of a GSO skb: the whole, rewritten for each segment when it is cut */
	ip.tot_len = bpf_htons(len + VXLAN_OUTER_LEN - sizeof(struct ethhdr));
	ip.id = (__u16)bpf_get_prandom_u32();
	ip.saddr = local_addr;
	ip.daddr = remote_addr;
	ip.check = ip_checksum(&ip);
	h.ip = ip;
	h.udp.source = bpf_htons((__u16)((((__u64)hash * (SPORT_MAX - SPORT_MIN)) >> 32) + SPORT_MIN));
	h.udp.dest = bpf_htons(udp_port);
	h.udp.len = bpf_htons(len + VXLAN_OUTER_LEN - sizeof(struct ethhdr) - sizeof(struct iphdr));
	h.udp.check = 0;
	h.vx_flags = bpf_htonl(VXLAN_FLAG_VNI);
	h.vx_vni = bpf_htonl(vni << 8);
	if (skb->gso_size) {
		if (!is_ip)
			return fail();
		/* outer IPv4, UDP and VXLAN and the inner Ethernet header open behind the frame's
		 * Ethernet header, which becomes the outer one: the inner one is put back behind
		 * them */
		if (bpf_skb_adjust_room(skb, VXLAN_OUTER_LEN, BPF_ADJ_ROOM_MAC, ENCAP_FLAGS))
			return fail();
		if (bpf_skb_store_bytes(skb, VXLAN_OUTER_LEN, &inner, sizeof(inner), 0))
			return fail();
	} else {
		if (bpf_skb_change_head(skb, VXLAN_OUTER_LEN, 0))
			return fail();
		if (!is_ip)
			__sync_fetch_and_add(&counts.other, 1);
	}
	if (bpf_skb_store_bytes(skb, 0, &h, VXLAN_OUTER_LEN, 0))
		return fail();
	__sync_fetch_and_add(&counts.frames, 1);
	if (skb->gso_size) {
		__sync_fetch_and_add(&counts.gso_frames, 1);
		__sync_fetch_and_add(&counts.gso_bytes, len);
	}
	return bpf_redirect(underlay_ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
