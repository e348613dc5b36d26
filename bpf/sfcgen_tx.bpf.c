// SPDX-License-Identifier: GPL-2.0
/*
 * sfcgen's live-frames engine (`sfcgen send --engine xdp`).
 *
 * The sender hands the kernel one template frame per thread with BPF_PROG_RUN and the flag
 * BPF_F_TEST_XDP_LIVE_FRAMES; the kernel runs this program once per packet on a page-pool copy
 * of the template, and XDP_TX turns into a redirect out of the device named in the run's context.
 * No socket buffer is allocated and nothing is copied from user space per packet.
 *
 * Per packet the program writes the whole header (`headers`, see below: a recycled page may
 * carry what a forwarding hop wrote into it), the UDP source port (the flow), the probe header
 * (flow, per-flow sequence number, bpf_ktime_get_ns() send time) and, for IMIX, the frame length
 * with the IPv4/UDP lengths; then the IPv4 header checksum.  The template's IPv4 ID carries the
 * sending thread's index (no hop changes it); a thread owns flows index, index + threads, ... so
 * one flow's sequence numbers always come from one thread, in order.  An IPv6 template (`ipv6`;
 * fixed sizes only) carries the thread in the low bits of its flow label, and a UDP checksum
 * computed over its zero source port and zero probe: the program adds the words it writes to it.
 *
 * With `classify` set, each stamped frame is handed by tail call to the lab's classifier
 * (bpf/sfc_classify.bpf.c, sfc_classify_xdp), which pushes the label stack of the frame's path
 * and sends it out of the path's first interface, as the sending node's tcx egress would have.
 *
 * Every BPF_PROG_RUN call with more than one repetition adds the program to the kernel's XDP
 * dispatcher and removes it again, and each change waits for an RCU grace period (about 25 ms
 * here).  The sender therefore keeps the program attached to its namespace's loopback device
 * while it runs; there it passes every frame (their ingress device is not tx_ifindex).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfcgen_shared.h"

const volatile __u32 threads = 1;
const volatile __u32 flows = 1;
const volatile __u32 imix = 0; /* 1: sizes cycle through IMIX 7:4:1 of 64/594/1518 */
const volatile __u16 run = 0;
const volatile __u32 tx_ifindex = 0; /* the device the sender's runs name in their context */
/*
 * The Ethernet, IPv4 and UDP headers of every frame (IPv4 ID and checksum 0), written anew into
 * each one: the kernel recycles a frame's page for the next frame of the run without copying the
 * template again, and a page that went through a forwarding hop as a socket buffer comes back
 * with that hop's rewrites (its next hop's MAC, a lower TTL, a label stack, NAT'ed addresses).
 * Frames sent from a recycled page would then die at the first hop as OTHERHOST.
 */
const volatile __u16 headers[HEADER_WORDS6] = {};
/* 1: the template is Ethernet/IPv6/UDP (HEADER_WORDS6 words), else Ethernet/IPv4/UDP */
const volatile __u32 ipv6 = 0;
/* 1: each frame is classified by the lab's classifier (sfc_classify_xdp, in classify_then) */
const volatile __u32 classify = 0;
/* start of the measured window (CLOCK_MONOTONIC ns), set by the sender before it starts */
volatile __u64 win_start_ns = 0;

/* IMIX 7:4:1, in the order the socket engines use: seven 64, four 594, one 1518 */
static __always_inline __u16 imix_size(__u64 n)
{
	__u64 i = n % 12;

	return i < 7 ? 64 : i < 11 ? 594 : 1518;
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct xdp_tx_thread);
} tx_threads SEC(".maps");

/* next sequence number of each flow (= packets of the flow sent so far) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of flows before loading */
	__type(key, __u32);
	__type(value, __u32);
} flow_seq SEC(".maps");

/* the classifier's XDP entry, put here by the sender (see xdp_tx_open()) */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} classify_then SEC(".maps");

static __always_inline __u16 ipv4_checksum(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;

	ip->check = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/*
 * The UDP checksum of an IPv6 probe frame: the template's covered a zero source port and a zero
 * probe, so the new one is the old one with the words now written added (RFC 1624).
 */
static __always_inline void udp6_check_update(struct udphdr *udp, struct probe *p)
{
	__u16 *w = (__u16 *)p;
	__u32 sum = (__u16)~udp->check;
	__u16 c;

	sum += udp->source;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(*p) / 2); i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	c = (__u16)~sum;
	udp->check = c ? c : 0xffff;
}

/* The sending thread the frame's template names: IPv4 ID, or the IPv6 flow label's low bits. */
static __always_inline int template_thread(void *data, void *end, __u32 *tid)
{
	if (ipv6) {
		struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);

		if ((void *)(ip6 + 1) > end)
			return -1;
		*tid = ip6->flow_lbl[2] | (__u32)ip6->flow_lbl[1] << 8;
	} else {
		struct iphdr *ip = data + sizeof(struct ethhdr);

		if ((void *)(ip + 1) > end)
			return -1;
		*tid = bpf_ntohs(ip->id);
	}
	return 0;
}

/*
 * The template's headers written over the frame's (see `headers`), with the sending thread in
 * them and, for IPv4, the IMIX size and the header checksum.  The UDP header, or NULL when the
 * frame is too short.
 */
static __always_inline struct udphdr *write_headers(void *data, void *end, __u32 tid, __u16 size)
{
	struct iphdr *ip;

	if (ipv6) {
		struct ipv6hdr *ip6;

		if (data + 2 * HEADER_WORDS6 > end)
			return NULL;
#pragma unroll
		for (int i = 0; i < HEADER_WORDS6; i++)
			((__u16 *)data)[i] = headers[i];
		ip6 = data + sizeof(struct ethhdr);
		ip6->flow_lbl[1] = (__u8)(tid >> 8);
		ip6->flow_lbl[2] = (__u8)tid;
		return (void *)(ip6 + 1);
	}
	if (data + 2 * HEADER_WORDS > end)
		return NULL;
#pragma unroll
	for (int i = 0; i < HEADER_WORDS; i++)
		((__u16 *)data)[i] = headers[i];
	ip = data + sizeof(struct ethhdr);
	ip->id = bpf_htons((__u16)tid);
	if (imix)
		ip->tot_len = bpf_htons(size - 4 - sizeof(struct ethhdr));
	ip->check = ipv4_checksum(ip);
	return (void *)(ip + 1);
}

SEC("xdp")
int sfcgen_tx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct xdp_tx_thread *th;
	struct udphdr *udp;
	struct probe *p;
	__u32 tid, flow, owned, nflows, *seq;
	__u64 now;
	__u16 size;

	/* attached to loopback only to stay loaded (see xdp_tx_open()): real frames pass */
	if (ctx->ingress_ifindex != tx_ifindex)
		return XDP_PASS;
	if (template_thread(data, end, &tid))
		return XDP_ABORTED;
	th = bpf_map_lookup_elem(&tx_threads, &tid);
	if (!th || tid >= threads)
		return XDP_ABORTED;
	size = (__u16)(end - data) + 4;
	if (imix && !ipv6) {
		int delta;

		size = imix_size(th->sent);
		delta = (int)size - 4 - (int)(end - data);
		if (delta && bpf_xdp_adjust_tail(ctx, delta))
			return XDP_ABORTED;
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
	}
	udp = write_headers(data, end, tid, size);
	if (!udp)
		return XDP_ABORTED;
	p = (void *)(udp + 1);
	if ((void *)(p + 1) > end)
		return XDP_ABORTED;

	nflows = (flows - tid + threads - 1) / threads;
	owned = th->next_owned;
	flow = tid + owned * threads;
	th->next_owned = owned + 1 >= nflows ? 0 : owned + 1;
	seq = bpf_map_lookup_elem(&flow_seq, &flow);
	if (!seq)
		return XDP_ABORTED;

	if (imix && !ipv6)
		udp->len = bpf_htons(size - 4 - sizeof(struct ethhdr) - sizeof(struct iphdr));
	udp->source = bpf_htons((__u16)(SPORT_BASE + flow));
	now = bpf_ktime_get_ns();
	p->magic = now >= win_start_ns ? PROBE_MAGIC_WINDOW : PROBE_MAGIC;
	p->run = run;
	p->flow = (__u16)flow;
	p->seq = (*seq)++;
	p->ts_ns = now;
	if (ipv6)
		udp6_check_update(udp, p);
	th->sent++;
	if (now >= win_start_ns)
		th->sent_window++;
	th->bytes += size;
	if (classify) {
		bpf_tail_call(ctx, &classify_then, 0);
		return XDP_ABORTED; /* the classifier is missing: never send unclassified */
	}
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
