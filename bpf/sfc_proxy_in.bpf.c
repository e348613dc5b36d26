// SPDX-License-Identifier: GPL-2.0
/*
 * The SFC proxy's inner half, in front of a function (tc ingress of the function node's
 * interfaces, after sfc_forward): the stack id sfc_forward left in XDP metadata goes into the
 * proxy's bits of skb->mark (SFC_MARK_PROXY_MASK; the tenancy's bits are kept), which survive
 * the function's forwarding, filtering and address or port rewriting inside its namespace;
 * sfc_proxy_out reads them back.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "sfc.h"

SEC("tc")
int sfc_proxy_in(struct __sk_buff *skb)
{
	void *meta = (void *)(long)skb->data_meta, *data = (void *)(long)skb->data;
	__u32 m, id;

	if (meta + sizeof(__u32) > data)
		return TC_ACT_OK;
	m = *(__u32 *)meta;
	if (!sfc_mark_id(m, &id))
		skb->mark = (skb->mark & ~SFC_MARK_PROXY_MASK) | sfc_mark_of(id);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
