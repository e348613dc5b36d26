// SPDX-License-Identifier: GPL-2.0
/*
 * The loss locator's kernel half: counts every packet the kernel frees as dropped
 * (tracepoint skb:kfree_skb, as a BTF-typed tracing program: no tracefs needed) in the
 * namespaces it watches, by namespace, drop reason and interface.  Packets the kernel consumes
 * normally go through consume_skb and are not seen; drops in other namespaces (the root one
 * above all) are ignored.  Attached through a BPF link held by sfc-droptrace: it goes away with
 * that process, whatever ends it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "droptrace.h"

/* namespace inode number -> index in the watch list (filled by user space before attaching) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DROPTRACE_MAX_NETNS);
	__type(key, __u32);
	__type(value, __u32);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, DROPTRACE_MAX_KEYS);
	__type(key, struct drop_key);
	__type(value, __u64);
} drops SEC(".maps");

/* drops that found no free counter slot: said, never silently lost */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} overflow SEC(".maps");

static __always_inline __u32 netns_inum(struct sk_buff *skb, struct net_device *dev)
{
	if (dev)
		return BPF_CORE_READ(dev, nd_net.net, ns.inum);
	struct sock *sk = BPF_CORE_READ(skb, sk);
	if (sk)
		return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(count_drop, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	struct net_device *dev = BPF_CORE_READ(skb, dev);
	__u32 inum = netns_inum(skb, dev);
	__u32 *index = bpf_map_lookup_elem(&watched, &inum);
	if (!index)
		return 0;
	struct drop_key key = {
		.netns = *index,
		.reason = (__u32)reason,
		.ifindex = dev ? BPF_CORE_READ(dev, ifindex) : 0,
	};
	__u64 *n = bpf_map_lookup_elem(&drops, &key);
	if (n) {
		*n += 1;
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&drops, &key, &one, BPF_NOEXIST) != 0) {
		n = bpf_map_lookup_elem(&drops, &key); /* another CPU made it meanwhile */
		if (n) {
			*n += 1;
		} else {
			__u32 zero = 0;
			__u64 *o = bpf_map_lookup_elem(&overflow, &zero);
			if (o)
				*o += 1;
		}
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
