// SPDX-License-Identifier: GPL-2.0
/*
 * The dispatcher of a `bpf-pipeline` node (XDP, on every interface of the node): several
 * SFC-aware eBPF functions in one hook, run in order by tail calls (include/sfc_stage.h).  It
 * takes the place of the forwarder and of the proxy, as a single eBPF function's program does:
 *
 *   plain IPv4 or IPv6: handed to stage 0 (if the node has none yet, passed to the kernel).
 *   labelled, top label this node's proxy label: counted into the function (proxy_in) and
 *       handed to stage 0; the last stage pops the node's two labels and redirects.
 *   labelled, top label this node's forward label: forwarded, as the forwarder does.
 *   any other frame: passed.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sfc.h"
#include "sfc_pop.h"
#include "sfc_stage.h"

SEC("xdp")
int sfc_pipe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be32 *lse = (void *)(eth + 1);
	__u32 ttl;
	int verdict;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP) || eth->h_proto == bpf_htons(SFC_ETH_P_IPV6)) {
		sfc_stage_call(ctx, 0);
		return XDP_PASS; /* no stage yet */
	}
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return XDP_PASS;
	if (sfc_function_top(ctx, lse, end, node_id, &ttl, &verdict))
		return verdict;
	sfc_count(SFC_C_PROXY_IN);
	sfc_stage_call(ctx, 0);
	sfc_count(SFC_C_ERRORS); /* a labelled frame and no stage */
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
