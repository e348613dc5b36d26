/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What sfcgen's C code and its eBPF programs agree on: the probe header every generated packet
 * carries, the sink's latency histogram layout, and the per-flow and total counters the XDP sink
 * keeps in its maps.  Included by native/sfcgen*.c and bpf/sfcgen_*.bpf.c.
 */
#ifndef SFCGEN_SHARED_H
#define SFCGEN_SHARED_H

#include <linux/types.h>

#define PROBE_MAGIC 0x5fc6u
/*
 * The magic of a probe sent inside the measured window (from the end of the sender's ramp to
 * the end of sending): the sink counts these apart, so a trial's received rate covers the same
 * send-time window as its offered rate (see docs/measurement.md, "The measured window").
 */
#define PROBE_MAGIC_WINDOW 0x5fc7u
#define SPORT_BASE 10000u  /* UDP source port of flow f: SPORT_BASE + f */
/* the xdp engine rewrites a frame's Ethernet, IPv4 and UDP headers (42 bytes) in 16-bit words,
 * or its Ethernet, IPv6 and UDP headers (62 bytes) */
#define HEADER_WORDS 21u
#define HEADER_WORDS6 31u
#define MAX_FLOWS 50000u
#define MAX_THREADS 64u
#define SEQ_WINDOW 1024u   /* bits of sequence history per flow at the sink */

/* First bytes of every UDP payload (18 bytes: a 64-byte frame has exactly room for it). */
struct __attribute__((packed)) probe {
	__u16 magic;
	__u16 run;  /* changes with every sender run: the sink restarts a flow's window */
	__u16 flow;
	__u32 seq;  /* per flow, from 0 */
	__u64 ts_ns; /* CLOCK_MONOTONIC send time (bpf_ktime_get_ns() is the same clock) */
};

/* The latency histogram (layout and bucket index) is include/hist.h, shared with C. */
#include "hist.h"

/*
 * Sequence accounting of one flow at the sink.  The window remembers which of the last
 * SEQ_WINDOW sequence numbers arrived: word w holds the bits of one block of 64 numbers, the
 * block named by epoch[w], so moving forward needs no clearing loop (a word of an older block
 * simply stops counting).  A number more than SEQ_WINDOW - 64 below the highest seen is too old to
 * tell a duplicate from a latecomer and counts as reordered.
 */
#define SEQ_WORDS (SEQ_WINDOW / 64)
#define SEQ_TOO_OLD (SEQ_WINDOW - 64)
#define SEQ_NO_EPOCH 0xffffffffu

struct flow_state {
	__u64 received;
	__u64 reordered;
	__u64 duplicated;
	__u32 max_seq;
	__u16 run;
	__u16 seen;
	__u64 window[SEQ_WORDS];
	__u32 epoch[SEQ_WORDS];
};

#ifdef __bpf__
#define SFCGEN_INLINE static __always_inline
#else
#define SFCGEN_INLINE static inline
#endif

SFCGEN_INLINE int seq_seen(const struct flow_state *f, __u32 s)
{
	__u32 w = (s / 64) % SEQ_WORDS;

	return f->epoch[w] == s / 64 && (f->window[w] >> (s % 64) & 1);
}

SFCGEN_INLINE void seq_mark(struct flow_state *f, __u32 s)
{
	__u32 w = (s / 64) % SEQ_WORDS;

	if (f->epoch[w] != s / 64) {
		f->epoch[w] = s / 64;
		f->window[w] = 0;
	}
	f->window[w] |= 1ull << (s % 64);
}

/*
 * Account one probe of this flow (the socket sink and the XDP sink run the same code);
 * 1 if it is a duplicate, else 0.
 */
SFCGEN_INLINE int flow_account(struct flow_state *f, __u16 run, __u32 s)
{
	f->received++;
	if (!f->seen || f->run != run) {
		/* first packet, or a new sender run: start a fresh window */
		for (__u32 i = 0; i < SEQ_WORDS; i++)
			f->epoch[i] = SEQ_NO_EPOCH;
		f->seen = 1;
		f->run = run;
		f->max_seq = s;
		seq_mark(f, s);
		return 0;
	}
	if (s > f->max_seq) {
		f->max_seq = s;
		seq_mark(f, s);
	} else if (f->max_seq - s >= SEQ_TOO_OLD) {
		f->reordered++;
	} else if (seq_seen(f, s)) {
		f->duplicated++;
		return 1;
	} else {
		seq_mark(f, s);
		f->reordered++;
	}
	return 0;
}

/* Totals of the XDP sink, one copy per CPU (summed by the reader). */
struct xdp_sink_totals {
	__u64 received;
	__u64 bytes;   /* frame bytes as RFC 2544 counts them (with the 4-byte FCS) */
	__u64 invalid; /* to the sink's port, but no valid probe */
	__u64 lat_count;
	__u64 lat_sum_ns;
	__u64 lat_min_ns;
	__u64 lat_max_ns;
	__u64 first_ns;
	__u64 last_ns;
	__u64 hist[HIST_BUCKETS];
	__u64 received_window; /* distinct probes sent inside the measured window */
	/*
	 * The receive rate over the window's probes: arrival of the first and of the latest window
	 * probe, and the received count before the first and up to the latest one.
	 */
	__u64 win_first_ns;
	__u64 win_last_ns;
	__u64 win_rx_before;
	__u64 win_rx_last;
};

/* Per sending thread of the XDP (live frames) engine: which owned flow goes next. */
struct xdp_tx_thread {
	__u32 next_owned; /* index into the thread's flows: thread, thread + threads, ... */
	__u32 pad;
	__u64 sent;
	__u64 bytes;
	__u64 sent_window; /* of them, stamped at or after win_start_ns */
};

#endif
