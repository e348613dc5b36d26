/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * The latency histogram's bucket index, in one place for user space (sfcgen's socket sink) and
 * eBPF (the XDP sink): log-linear, values below 2^HIST_SUB_BITS ns have a bucket each; above,
 * every power of two is split into 2^(HIST_SUB_BITS-1) equal buckets (relative error < 1/64).
 * Written for both compilers: no library calls, no loops the verifier could not bound.
 */
#ifndef SFCLAB_HIST_H
#define SFCLAB_HIST_H

#include <linux/types.h>

#define HIST_SUB_BITS 7u
#define HIST_HALF (1u << (HIST_SUB_BITS - 1))
#define HIST_MAX_MSB 44u /* ~4.9 hours in ns; larger values are clamped */
#define HIST_BUCKETS ((HIST_MAX_MSB - HIST_SUB_BITS + 2u) * HIST_HALF + HIST_HALF)

/* The index of the highest set bit of v (v > 0). */
static inline __attribute__((always_inline)) __u64 hist_msb64(__u64 v)
{
	__u64 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r;
}

static inline __attribute__((always_inline)) __u64 hist_index(__u64 v)
{
	__u64 msb, shift;

	if (v < (1u << HIST_SUB_BITS))
		return v;
	msb = hist_msb64(v);
	if (msb > HIST_MAX_MSB) {
		v = (1ull << (HIST_MAX_MSB + 1)) - 1;
		msb = HIST_MAX_MSB;
	}
	shift = msb - (HIST_SUB_BITS - 1);
	return shift * HIST_HALF + (v >> shift);
}

#endif
