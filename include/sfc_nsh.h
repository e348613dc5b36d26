/* SPDX-License-Identifier: GPL-2.0 */
/*
 * NSH (RFC 8300) between a chain's hops: a chain of `encap: nsh` carries its planned path as an
 * 8-byte header after the Ethernet header (ethertype 0x894F) instead of a label stack.
 *
 *   base header (32 bits): version 2 (0) | O 1 (0) | U 1 | TTL 6 | length 6 (2 words) | U 4 |
 *                          MD type 4 (2: no context headers, and here no metadata) |
 *                          next protocol 8 (1: IPv4, 2: IPv6)
 *   service path header:   SPI 24 (the path's index in sfc_paths) | SI 8 (255 at the ingress)
 *
 * The hops are those of the planned path and their labels (sfc_labels) say what each does; an
 * NSH frame carries no label, so each node maps (its node id, SPI, SI) to the label of its hop
 * there (sfc_nsh, written by src/sfclab/realize/dataplane.py from the path's label stack by
 * src/sfclab/plan/encap.py:nsh_entries).  The forwarder (sfc_forward) drops a frame that
 * arrives with TTL 1 or less (nsh_ttl_expired) or whose (SPI, SI) names no hop of this node
 * (nsh_unknown), else sends it on with TTL - 1 or, at the path's last hop, plain.  Before a
 * function the header is parked like a label stack (struct sfc_stack, depth SFC_STACK_NSH:
 * lse[0] the base header, lse[1] the service path header) under the stack id in the packet's
 * mark; after it, sfc_proxy_out puts it back with SI - 1 (SI 0: dropped, nsh_si_expired).
 *
 * Included after sfc.h.
 */
#ifndef SFCLAB_SFC_NSH_H
#define SFCLAB_SFC_NSH_H

#include <linux/types.h>

#define SFC_ETH_P_NSH 0x894F
#define SFC_NSH_BYTES 8
#define SFC_NSH_WORDS 2          /* the base header's length field: base + service path */
#define SFC_NSH_MD_TYPE 2
#define SFC_NSH_NP_IPV4 0x1
#define SFC_NSH_NP_IPV6 0x2
/* struct sfc_stack.depth of a parked NSH header: no label stack is this deep */
#define SFC_STACK_NSH 0x4e5348u

/* fields of the base header and of the service path header, both in host order */
#define NSH_VER(w) ((w) >> 30)
#define NSH_TTL(w) (((w) >> 22) & 0x3f)
#define NSH_LEN(w) (((w) >> 16) & 0x3f)
#define NSH_MD(w) (((w) >> 8) & 0xf)
#define NSH_NP(w) ((w) & 0xff)
#define NSH_WITH_TTL(w, t) (((w) & ~(0x3fu << 22)) | (((__u32)(t) & 0x3f) << 22))
#define NSH_SPI(w) ((w) >> 8)
#define NSH_SI(w) ((w) & 0xff)

struct sfc_nsh_key {          /* a node's hop on an NSH path at one service index */
	__u32 node;
	__u32 spi;
	__u32 si;
};

struct sfc_nsh_hop {
	__u32 label;          /* the hop's label in sfc_labels: its action, interface, MACs */
	__u32 last;           /* 1: the path's last label; its owner delivers the packet plain */
};

#ifdef __BPF__
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SFC_MAX_HOPS);
	__type(key, struct sfc_nsh_key);
	__type(value, struct sfc_nsh_hop);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_nsh SEC(".maps");

/* The header at `p` (base and service path words, host order): 0, or -1 when it is cut short
 * or not version 0, MD type 2 of 2 words (what sfclab pushes). */
static __always_inline int sfc_nsh_parse(void *p, void *end, __u32 *base, __u32 *sph)
{
	__be32 *w = p;

	if ((void *)(w + 2) > end)
		return -1;
	*base = bpf_ntohl(w[0]);
	*sph = bpf_ntohl(w[1]);
	if (NSH_VER(*base) || NSH_LEN(*base) != SFC_NSH_WORDS || NSH_MD(*base) != SFC_NSH_MD_TYPE)
		return -1;
	return 0;
}

/* This node's hop at (spi, si) and its label's entry: 0, or -1 when there is none or the
 * label is another node's (the caller counts nsh_unknown). */
static __always_inline int sfc_nsh_hop_at(__u32 spi, __u32 si, struct sfc_nsh_hop **nh,
					  struct sfc_hop **hop)
{
	struct sfc_nsh_key k = {.node = node_id, .spi = spi, .si = si};
	__u32 label;

	*nh = bpf_map_lookup_elem(&sfc_nsh, &k);
	if (!*nh)
		return -1;
	label = (*nh)->label;
	*hop = sfc_hop_of(label);
	if (!*hop || (*hop)->node != node_id)
		return -1;
	return 0;
}

/* The ethertype of the packet under a header whose base word is `base`. */
static __always_inline __u16 sfc_nsh_inner(__u32 base)
{
	return NSH_NP(base) == SFC_NSH_NP_IPV6 ? SFC_ETH_P_IPV6 : SFC_ETH_P_IP;
}

/* The next-protocol value of a packet of classifier family `family`. */
static __always_inline __u8 sfc_nsh_np(__u8 family)
{
	return family == SFC_FAMILY_IPV6 ? SFC_NSH_NP_IPV6 : SFC_NSH_NP_IPV4;
}
#endif /* __BPF__ */

#endif
