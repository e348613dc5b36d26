// SPDX-License-Identifier: GPL-2.0
/*
 * shortbridge: Trellis's "shortbridge" without a kernel patch.  Attached at tcx ingress of one
 * interface of a host context, it hands every frame to the other interface of the pair
 * (`peer_ifindex`, set at load time) with no MAC learning, no lookup and no copy.  A point-to-
 * point virtual link is two loads of this program: tunnel -> node port and node port -> tunnel
 * (native/sfc-shortbridge.c).
 *
 * Toward a node's veth (`into_peer` set), the frame is delivered straight to the veth's other
 * end inside the node (bpf_redirect_peer: no second pass through the per-CPU backlog); that
 * skips the port's qdisc, so a shaped link loads it with `into_peer` clear and the frame leaves
 * through the port's egress path, where the shaper sits.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 peer_ifindex = 0;
const volatile __u8 into_peer = 0;

SEC("tc")
int shortbridge(struct __sk_buff *skb)
{
	if (into_peer)
		return bpf_redirect_peer(peer_ifindex, 0);
	return bpf_redirect(peer_ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
