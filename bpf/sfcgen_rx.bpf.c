// SPDX-License-Identifier: GPL-2.0
/*
 * sfcgen's in-kernel receiver: counts sfcgen probes where they enter the receiving node and
 * drops them there, in the softirq that delivers them, so a high packet rate costs the receiver
 * no socket buffers, no IP/UDP stack and no copy to user space, and no user-space thread can be
 * starved of its core by the chain's receive processing (receive livelock).
 *
 * One counting step, two hooks: `sfcgen_rx` at XDP (`sfcgen sink --xdp`), and `sfcgen_rx_tc`
 * at tcx ingress (`--tc`), which runs after any XDP program of the interface (the SFC data
 * plane's, on a steered lab's egress) has passed the frame to the stack.  `sfcgen sink
 * --kernel` (the default of `sfclab traffic`) takes tcx ingress where the interface has an XDP
 * program, and both where it has none: XDP, and tcx ingress for the frames that skip a veth's
 * XDP (handed into it by bpf_redirect_peer, as the shortbridge's tunnel end does); XDP drops
 * what it counts, so no frame is counted twice.  A probe dropped at tcx ingress is freed with drop reason
 * TC_INGRESS, one dropped by XDP on a veth with NOT_SPECIFIED: the loss locator knows both as
 * the receiver's.
 *
 * It keeps exactly what the socket sink keeps, with the same code (flow_account() in
 * sfcgen_shared.h): totals and a latency histogram per CPU (`totals`), and per flow the received,
 * reordered and duplicated counts with a window of recent sequence numbers (`flow_states`,
 * memory-mapped by the reader).  Probes come over IPv4 (no options) or IPv6 (UDP as the first
 * next header, no extension headers), with the same probe after the UDP header.  Frames that are
 * not UDP to the sink's port pass untouched; frames to the port without a valid probe are
 * counted as invalid and dropped.
 *
 * Flow state is updated without locks: it assumes one receive queue per flow, which holds for
 * veth (one NAPI context per queue) and for generic XDP on single-queue devices.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfcgen_shared.h"

const volatile __u16 port_be = 0; /* UDP destination port, network byte order */
const volatile __u32 flows = 1;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xdp_sink_totals);
} totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of flows before loading */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct flow_state);
} flow_states SEC(".maps");

enum verdict { NOT_OURS, COUNTED };

/*
 * Count the frame from `data` to `end` (its headers; `frame_len` bytes in all, FCS excluded) if
 * it is a probe to the sink's port.
 */
static __always_inline enum verdict count_probe(void *data, void *end, __u64 frame_len)
{
	struct ethhdr *eth = data;
	struct xdp_sink_totals *t;
	struct flow_state *f;
	struct udphdr *udp;
	struct probe *p;
	__u32 zero = 0, flow;
	__u64 now, lat, idx;

	if ((void *)(eth + 1) > end)
		return NOT_OURS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
		    (ip->frag_off & bpf_htons(0x3fff)))
			return NOT_OURS;
		udp = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
			return NOT_OURS;
		udp = (void *)(ip6 + 1);
	} else {
		return NOT_OURS;
	}
	if ((void *)(udp + 1) > end || udp->dest != port_be)
		return NOT_OURS;
	t = bpf_map_lookup_elem(&totals, &zero);
	if (!t)
		return NOT_OURS;
	now = bpf_ktime_get_ns();
	if (!t->first_ns)
		t->first_ns = now;
	t->last_ns = now;
	p = (void *)(udp + 1);
	if ((void *)(p + 1) > end || (p->magic != PROBE_MAGIC && p->magic != PROBE_MAGIC_WINDOW) ||
	    p->flow >= flows) {
		t->invalid++;
		return COUNTED;
	}
	flow = p->flow;
	f = bpf_map_lookup_elem(&flow_states, &flow);
	if (!f) {
		t->invalid++;
		return COUNTED;
	}
	t->received++;
	t->bytes += frame_len + 4;
	if (!flow_account(f, p->run, p->seq) && p->magic == PROBE_MAGIC_WINDOW)
		t->received_window++;
	if (p->magic == PROBE_MAGIC_WINDOW) {
		if (!t->win_first_ns) {
			t->win_first_ns = now;
			t->win_rx_before = t->received - 1;
		}
		t->win_last_ns = now;
		t->win_rx_last = t->received;
	}
	lat = p->ts_ns < now ? now - p->ts_ns : 0;
	idx = hist_index(lat);
	barrier_var(idx); /* bound-check the register that indexes */
	if (idx < HIST_BUCKETS)
		t->hist[idx]++;
	t->lat_count++;
	t->lat_sum_ns += lat;
	if (lat > t->lat_max_ns)
		t->lat_max_ns = lat;
	if (!t->lat_min_ns || lat < t->lat_min_ns)
		t->lat_min_ns = lat;
	return COUNTED;
}

SEC("xdp")
int sfcgen_rx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	return count_probe(data, end, (__u64)(end - data)) == COUNTED ? XDP_DROP : XDP_PASS;
}

#define TCX_NEXT (-1)
#define TCX_DROP 2
/* Ethernet, IPv4 without options or IPv6, UDP and the probe: what count_probe() reads. */
#define PROBE_HEADROOM (14 + 20 + 8 + 18)
#define PROBE_HEADROOM6 (14 + 40 + 8 + 18)

SEC("tc")
int sfcgen_rx_tc(struct __sk_buff *skb)
{
	__u32 need = skb->protocol == bpf_htons(ETH_P_IPV6) ? PROBE_HEADROOM6 : PROBE_HEADROOM;
	void *data, *end;

	if (skb->len < need)
		return TCX_NEXT;
	if ((long)skb->data_end - (long)skb->data < need && bpf_skb_pull_data(skb, need))
		return TCX_NEXT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	/* only the headers were pulled into the linear part: the frame is skb->len long */
	return count_probe(data, end, skb->len) == COUNTED ? TCX_DROP : TCX_NEXT;
}

char LICENSE[] SEC("license") = "GPL";
