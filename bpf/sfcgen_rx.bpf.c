// SPDX-License-Identifier: GPL-2.0
/*
 * sfcgen's XDP sink (`sfcgen sink --xdp`): counts sfcgen probes where they enter the receiving
 * node and drops them there, so a high packet rate costs the receiver no socket buffers, no
 * IP/UDP stack and no copy to user space.
 *
 * It keeps exactly what the socket sink keeps, with the same code (flow_account() in
 * sfcgen_shared.h): totals and a latency histogram per CPU (`totals`), and per flow the received,
 * reordered and duplicated counts with a window of recent sequence numbers (`flow_states`,
 * memory-mapped by the reader).  Frames that are not
 * IPv4/UDP to the sink's port pass untouched; frames to the port without a valid probe are
 * counted as invalid and dropped.
 *
 * Flow state is updated without locks: it assumes one receive queue per flow, which holds for
 * veth (one NAPI context per queue) and for generic XDP on single-queue devices.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
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

SEC("xdp")
int sfcgen_rx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct xdp_sink_totals *t;
	struct flow_state *f;
	struct iphdr *ip;
	struct udphdr *udp;
	struct probe *p;
	__u32 zero = 0, flow;
	__u64 now, lat, len, idx;

	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x3fff)))
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || udp->dest != port_be)
		return XDP_PASS;
	t = bpf_map_lookup_elem(&totals, &zero);
	if (!t)
		return XDP_PASS;
	now = bpf_ktime_get_ns();
	if (!t->first_ns)
		t->first_ns = now;
	t->last_ns = now;
	p = (void *)(udp + 1);
	if ((void *)(p + 1) > end || (p->magic != PROBE_MAGIC && p->magic != PROBE_MAGIC_WINDOW) ||
	    p->flow >= flows) {
		t->invalid++;
		return XDP_DROP;
	}
	flow = p->flow;
	f = bpf_map_lookup_elem(&flow_states, &flow);
	if (!f) {
		t->invalid++;
		return XDP_DROP;
	}
	len = (__u64)(end - data);
	t->received++;
	t->bytes += len + 4;
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
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
