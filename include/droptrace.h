/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * Shared between bpf/droptrace.bpf.c and native/sfc-droptrace.c: the key of the drop counters.
 * A drop is counted under the namespace it happened in (its index in the watch list), the
 * kernel's drop reason (enum skb_drop_reason) and the interface the packet was on (0: none).
 */
#ifndef SFCLAB_DROPTRACE_H
#define SFCLAB_DROPTRACE_H

#define DROPTRACE_MAX_NETNS 1024
#define DROPTRACE_MAX_KEYS 16384

struct drop_key {
	__u32 netns;   /* index of the namespace in the watch list */
	__u32 reason;  /* enum skb_drop_reason */
	__u32 ifindex; /* the device the packet was on, 0 if none */
	__u32 pad;
};

#endif
