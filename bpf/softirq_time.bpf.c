// SPDX-License-Identifier: GPL-2.0
/*
 * softirq_time: the time each CPU spends in the network softirqs (NET_RX and NET_TX), to the
 * nanosecond, from the BTF-typed tracepoints irq:softirq_entry and irq:softirq_exit (no
 * tracefs needed).  This kernel has no IRQ time accounting, so /proc/stat only samples softirq
 * time at ticks; a benchmark that steers a host's receive processing to one core reads that
 * host's whole cost here (native/sfc-softirq.c).  Attached through BPF links held by
 * sfc-softirq: they go away with that process.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define NET_TX 2
#define NET_RX 3

struct cpu_time {
	__u64 since; /* when the running network softirq began (0: none) */
	__u64 total; /* ns spent in network softirqs so far */
	__u64 count; /* network softirq runs */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_time);
} times SEC(".maps");

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	__u32 zero = 0;
	struct cpu_time *t;

	if (vec != NET_RX && vec != NET_TX)
		return 0;
	t = bpf_map_lookup_elem(&times, &zero);
	if (t)
		t->since = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	__u32 zero = 0;
	struct cpu_time *t;

	if (vec != NET_RX && vec != NET_TX)
		return 0;
	t = bpf_map_lookup_elem(&times, &zero);
	if (t && t->since) {
		t->total += bpf_ktime_get_ns() - t->since;
		t->count++;
		t->since = 0;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
