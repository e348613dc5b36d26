// SPDX-License-Identifier: GPL-2.0
/*
 * vxlan_decap: the receiving half of the shortbridge's own VXLAN tunnel end.  Attached at tcx
 * ingress of the host's underlay interface, one load per shortbridged link (several share the
 * interface: each passes what is not its own to the next, TCX_NEXT).  A frame that is
 * IPv4 (no options, not a fragment) from the link's remote underlay address to the local one,
 * UDP to the VXLAN port, with the VNI flag and the link's VNI, loses its outer headers and goes
 * to the node: an inner IPv4 frame straight into the node's side of the port (bpf_redirect_peer:
 * no backlog round), unless the link is shaped (`into_peer` clear: out through the port's
 * egress, where the shaper sits); any other inner frame (ARP) through the port's egress, whose
 * peer parses its type afresh.  Everything else (another VNI, an unknown remote, the underlay's
 * own traffic, a bridged link's tunnel) is passed on untouched to the kernel (a kernel VXLAN
 * device may own it).
 *
 * What arrives here is what the underlay carried: frames of at most its MTU (the sending end's
 * GSO skbs are cut into segments before they leave their host, see vxlan_encap.bpf.c; an
 * emulated underlay's ul0 is set to cut them, and to compute checksums, in software, as a NIC
 * puts complete frames on the wire).  This interface's GRO would merge them only through a
 * kernel UDP tunnel socket on the port (a kernel VXLAN device in the same context, whose GRO
 * takes any VNI): such a GSO skb is still
 * decapsulated and delivered, but this kernel (6.18) has no flag to clear its tunnel GSO state
 * here (BPF_F_ADJ_ROOM_DECAP_L4_UDP is later), so it is counted (`counts.gso_frames`,
 * sfc-shortbridge --counters): fine for the node's own sockets, wrong if the node forwards it
 * to where it must be cut again.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "vxlan_tunnel.h"

const volatile __u32 port_ifindex = 0;
const volatile __u8 into_peer = 0;
const volatile __be32 local_addr = 0;
const volatile __be32 remote_addr = 0;
const volatile __u32 vni = 0;
const volatile __u16 udp_port = 4789;
/* the lab's mark, checked before the program is taken off (never read by the program) */
const volatile char owner[VXLAN_OWNER_LEN] = {};

#define IP_MF_OFFSET 0x3fff

struct vxlan_counts counts = {};

SEC("tc")
int vxlan_decap(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct vxlan_outer *h = data;
	struct ethhdr inner;

	if ((void *)(h + 1) + sizeof(struct ethhdr) > end)
		return TCX_NEXT;
	if (h->eth.h_proto != bpf_htons(ETH_P_IP) || h->ip.ihl != 5 || h->ip.version != 4 ||
	    h->ip.protocol != IPPROTO_UDP || (h->ip.frag_off & bpf_htons(IP_MF_OFFSET)) ||
	    h->udp.dest != bpf_htons(udp_port) || h->ip.saddr != remote_addr ||
	    h->ip.daddr != local_addr || h->vx_vni != bpf_htonl(vni << 8) ||
	    !(h->vx_flags & bpf_htonl(VXLAN_FLAG_VNI)))
		return TCX_NEXT;
	__builtin_memcpy(&inner, (void *)(h + 1), sizeof(inner));
	/* remove outer IPv4, UDP, VXLAN and the inner Ethernet header, then put the inner
	 * Ethernet header where the outer one was */
	if (skb->gso_size) {
		__sync_fetch_and_add(&counts.gso_frames, 1);
		__sync_fetch_and_add(&counts.gso_bytes, skb->len - VXLAN_OUTER_LEN);
	}
	if (bpf_skb_adjust_room(skb, -(VXLAN_OUTER_LEN), BPF_ADJ_ROOM_MAC, 0) ||
	    bpf_skb_store_bytes(skb, 0, &inner, sizeof(inner), 0)) {
		__sync_fetch_and_add(&counts.errors, 1);
		return TC_ACT_SHOT;
	}
	__sync_fetch_and_add(&counts.frames, 1);
	if (inner.h_proto != bpf_htons(ETH_P_IP) && inner.h_proto != bpf_htons(ETH_P_IPV6))
		__sync_fetch_and_add(&counts.other, 1);
	if (into_peer && inner.h_proto == bpf_htons(ETH_P_IP))
		return bpf_redirect_peer(port_ifindex, 0);
	return bpf_redirect(port_ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
