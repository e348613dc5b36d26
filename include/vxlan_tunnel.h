/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The VXLAN outer headers (RFC 7348) the shortbridge's own tunnel end writes and strips
 * (vxlan_encap.bpf.c, vxlan_decap.bpf.c): Ethernet, IPv4 without options, UDP, VXLAN, then
 * the inner Ethernet frame.  The wire format is the kernel VXLAN device's, so either end may
 * be a kernel VXLAN device.
 */
#ifndef SFCLAB_VXLAN_TUNNEL_H
#define SFCLAB_VXLAN_TUNNEL_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

struct vxlan_outer {
	struct ethhdr eth;
	struct iphdr ip;
	struct udphdr udp;
	__be32 vx_flags; /* 0x08000000: the VNI is valid */
	__be32 vx_vni;   /* VNI << 8 */
} __attribute__((packed));

#define VXLAN_OUTER_LEN 50 /* sizeof(struct vxlan_outer) */
#define VXLAN_FLAG_VNI 0x08000000
#define TCX_NEXT -1

/* the room for a decapsulation program's owner mark ("sfclab:LAB:tunnel:VNI", NUL-terminated),
 * a load-time constant of its .rodata: a real host's underlay interface outlives the lab, and
 * its teardown takes off only the program that carries the lab's mark */
#define VXLAN_OWNER_LEN 64

/* what a tunnel end has seen, its only zero-initialised global (so its whole .bss map),
 * read by sfc-shortbridge --counters */
struct vxlan_counts {
	__u64 frames;     /* frames encapsulated (or decapsulated) */
	__u64 gso_frames; /* of them GSO frames (GRO-merged or sent so), each one skb */
	__u64 gso_bytes;  /* their length before the tunnel's headers */
	__u64 other;      /* of them frames that are neither IPv4 nor IPv6 (ARP): header pushed */
	__u64 errors;     /* frames dropped because a helper failed */
};

#endif
