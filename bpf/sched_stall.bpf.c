// SPDX-License-Identifier: GPL-2.0
/*
 * sched_stall: how long given threads were kept from running once they had work, to the
 * nanosecond, from the BTF-typed tracepoints sched:sched_waking and sched:sched_switch (no
 * tracefs needed).  A watched thread is *held* from the moment it is woken (sched_waking runs
 * in the waker's context, so a wake-up that reaches its core late counts too) or preempted
 * while runnable, until it is switched in.  For a chain's first hop, a NAPI thread pinned to
 * the chain's core, a hold longer than its receive ring lasts at the offered rate is frames
 * lost that the chain did not lose: its core was not run (on these virtual machines, for up to
 * several milliseconds at a time).  Attached through BPF links held by native/sfc-stall.c:
 * they go away with that process.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define MAX_WATCHED 64

struct held {
	__u64 since; /* when it became runnable and not running (0: running or asleep) */
	__u64 gen;   /* the reading `max` belongs to */
	__u64 max;   /* the longest hold ended since reading `gen` began (ns) */
	__u64 total; /* ns held, all holds together, since watching began */
	__u64 count; /* holds ended since watching began */
};

/* thread id -> its holds; sfc-stall fills the keys */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WATCHED);
	__type(key, __u32);
	__type(value, struct held);
} watched SEC(".maps");

/* the current reading: user space moves it on, which starts every `max` again */
volatile __u64 reading;

SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	__u32 tid = p->pid;
	struct held *h = bpf_map_lookup_elem(&watched, &tid);

	if (h && !h->since)
		h->since = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 tid = prev->pid;
	struct held *h = bpf_map_lookup_elem(&watched, &tid);
	__u64 now = bpf_ktime_get_ns();

	/* switched out still runnable (preempted, or it yielded) is held from now on; going to
	 * sleep is not */
	if (h)
		h->since = preempt || prev_state == 0 ? now : 0;
	tid = next->pid;
	h = bpf_map_lookup_elem(&watched, &tid);
	if (h && h->since) {
		__u64 d = now - h->since;

		if (h->gen != reading) {
			h->gen = reading;
			h->max = 0;
		}
		if (d > h->max)
			h->max = d;
		h->total += d;
		h->count++;
		h->since = 0;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
