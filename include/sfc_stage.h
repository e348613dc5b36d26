/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Several SFC-aware eBPF functions on one node, run in one XDP hook by tail calls (a
 * `bpf-pipeline` node).  The node's hook runs the dispatcher (bpf/pipeline.bpf.c); each function
 * contributes a *stage* program (`sfc_fw_stage` in bpf/fw.bpf.c, `sfc_lb_stage` in
 * bpf/balancer.bpf.c, `sfc_nat_stage` in bpf/nat.bpf.c) that does its function on the IPv4 or
 * IPv6 packet and hands the frame on:
 *
 *   sfc_stages    PROG_ARRAY, lab-wide: node * SFC_MAX_STAGES + i -> the node's stage i
 *                 (written by sfc-steer when it loads the node's objects)
 *   sfc_stage_at  per CPU: the stage running now (a frame runs to completion on its CPU, so
 *                 the dispatcher sets it to 0 and each stage counts it on before its tail call)
 *
 * The frame is the one the node received: plain IPv4 or IPv6, or labelled with the node's
 * proxy label on top.  After the last stage (a tail call to an empty slot returns),
 * sfc_stage_next sends it on as the single-function programs do: labelled, the node's proxy
 * and forward labels popped and the frame redirected to the next hop; plain, passed to the
 * kernel.  Included after
 * sfc_pop.h, whose helpers it uses (the stack's bottom, the way out, leaving).
 */
#ifndef SFCLAB_SFC_STAGE_H
#define SFCLAB_SFC_STAGE_H

enum sfc_stage_limit {
	SFC_MAX_STAGES = 4,     /* eBPF functions on one node */
};

#ifdef __BPF__
#include <linux/bpf.h>
#include <linux/if_ether.h>

const enum sfc_stage_limit sfc_contract_stage_limit SFC_CONTRACT = SFC_MAX_STAGES;

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SFC_MAX_NODES * SFC_MAX_STAGES);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_stages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sfc_stage_at SEC(".maps");

/* the IP packet of the frame a stage was given: *ip set, 0 for plain IPv4 or IPv6, 1 under
 * the node's proxy label (checked by the dispatcher); -1 for a frame no stage should see */
static __always_inline int sfc_stage_ip(struct xdp_md *ctx, void **ip)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP) || eth->h_proto == bpf_htons(SFC_ETH_P_IPV6)) {
		*ip = eth + 1;
		return 0;
	}
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return -1;
	*ip = sfc_stack_bottom((__be32 *)(eth + 1), end);
	return *ip ? 1 : -1;
}

/* run stage `i` of this node; returns only if there is none */
static __always_inline void sfc_stage_call(struct xdp_md *ctx, __u32 i)
{
	__u32 zero = 0, *at = bpf_map_lookup_elem(&sfc_stage_at, &zero);

	if (!at || i >= SFC_MAX_STAGES)
		return;
	*at = i;
	bpf_tail_call(ctx, &sfc_stages, (node_id % SFC_MAX_NODES) * SFC_MAX_STAGES + i);
}

/* hand the frame to the next stage, or, after the last, send it on (see above) as the
 * single-function programs do (include/sfc_pop.h) */
static __always_inline int sfc_stage_next(struct xdp_md *ctx)
{
	void *data, *end;
	__u32 zero = 0, *at = bpf_map_lookup_elem(&sfc_stage_at, &zero);
	struct sfc_way out;
	__u32 ttl;
	__be32 *lse;

	if (at)
		sfc_stage_call(ctx, *at + 1);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + sizeof(struct ethhdr) > end)
		return XDP_DROP;
	if (((struct ethhdr *)data)->h_proto == bpf_htons(SFC_ETH_P_IP) ||
	    ((struct ethhdr *)data)->h_proto == bpf_htons(SFC_ETH_P_IPV6))
		return XDP_PASS;
	lse = data + sizeof(struct ethhdr);
	if ((void *)(lse + 1) > end ||
	    !sfc_function_packet(lse, end, node_id, &out)) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	ttl = LSE_TTL(bpf_ntohl(lse[0]));
	return sfc_function_leave(ctx, &out, ttl);
}
#endif /* __BPF__ */

#endif
