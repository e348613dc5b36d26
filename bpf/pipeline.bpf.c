// SPDX-License-Identifier: GPL-2.0
/*
 * The dispatcher of a `bpf-pipeline` node (XDP, on every interface of the node): several
 * SFC-aware eBPF functions in one hook, run in order by tail calls (include/sfc_stage.h).  It
 * takes the place of the forwarder and of the proxy, as a single eBPF function's program does:
 *
 *   plain IPv4: handed to stage 0 (if the node has none yet, passed to the kernel).
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
	struct sfc_hop *hop;
	__u32 v, label, ttl, bos;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(SFC_ETH_P_IP)) {
		sfc_stage_call(ctx, 0);
		return XDP_PASS; /* no stage yet */
	}
	if (eth->h_proto != bpf_htons(SFC_ETH_P_MPLS_UC))
		return XDP_PASS;
	if ((void *)(lse + 1) > end) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	v = bpf_ntohl(lse[0]);
	label = LSE_LABEL(v);
	ttl = LSE_TTL(v);
	bos = LSE_BOS(v);
	hop = bpf_map_lookup_elem(&sfc_labels, &label);
	if (!hop || hop->node != node_id) {
		sfc_count(SFC_C_UNKNOWN_LABEL);
		return XDP_DROP;
	}
	if (ttl <= 1) {
		sfc_count(SFC_C_TTL_EXPIRED);
		return XDP_DROP;
	}
	if (hop->action == SFC_A_FORWARD)
		return sfc_pop_and_redirect(ctx, hop, 1, ttl, bos);
	if (hop->action != SFC_A_PROXY || bos) {
		sfc_count(SFC_C_ERRORS);
		return XDP_DROP;
	}
	sfc_count(SFC_C_PROXY_IN);
	sfc_stage_call(ctx, 0);
	sfc_count(SFC_C_ERRORS); /* a labelled frame and no stage */
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
