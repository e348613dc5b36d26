// SPDX-License-Identifier: GPL-2.0
/*
 * shortbridge: Trellis's "shortbridge" without a kernel patch.  Attached at tcx ingress of one
 * interface of a host context, it hands every frame to the other interface of the pair
 * (`peer_ifindex`, set at load time) with no MAC learning, no lookup and no copy: the frame
 * leaves through the peer's egress path, so a shaper on the peer still applies.  A point-to-
 * point virtual link is two loads of this program: tunnel -> node port and node port -> tunnel
 * (native/sfc-shortbridge.c).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 peer_ifindex = 0;

SEC("tc")
int shortbridge(struct __sk_buff *skb)
{
	return bpf_redirect(peer_ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
