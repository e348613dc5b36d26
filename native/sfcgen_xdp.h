/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The eBPF half of sfcgen: the live-frames sender (engine `xdp`) and the XDP sink.
 * Both programs are compiled from bpf/ and embedded in the binary as libbpf skeletons.
 */
#ifndef SFCGEN_XDP_H
#define SFCGEN_XDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sfcgen_shared.h"

/* ---- sender: BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES ---- */
struct xdp_tx;

/*
 * Load the generator program for `flows` flows over `threads` threads sending out of `ifindex`,
 * every frame with `headers` (Ethernet, IPv4, UDP; IPv4 ID and checksum 0); NULL and a reason
 * on failure.  With `classify_maps` (a lab's bpffs maps directory), every frame is classified
 * by the lab's classifier as node `classify_node` (its node_id) classifies what it sends.
 * `note` tells of a degraded start (empty if none).
 */
struct xdp_tx *xdp_tx_open(int ifindex, unsigned flows, unsigned threads, bool imix, uint16_t run,
			   const uint8_t headers[2 * HEADER_WORDS6], const char *classify_maps,
			   unsigned classify_node, char *why, size_t whylen, char *note,
			   size_t notelen);
/* Send `count` copies of `frame` (stamped per packet by the program) out of `ifindex`. */
int xdp_tx_send(struct xdp_tx *x, int ifindex, const void *frame, unsigned len, unsigned count);
/* Probes stamped at or after `start_ns` (CLOCK_MONOTONIC) carry PROBE_MAGIC_WINDOW. */
void xdp_tx_set_window(struct xdp_tx *x, int64_t start_ns);
/* What thread `index` has sent so far (packets, frame bytes, packets inside the window). */
int xdp_tx_thread_sent(struct xdp_tx *x, unsigned index, uint64_t *sent, uint64_t *bytes,
		       uint64_t *sent_window);
/* Packets sent per flow so far. */
int xdp_tx_flow_sent(struct xdp_tx *x, uint64_t *per_flow, unsigned flows);
void xdp_tx_close(struct xdp_tx *x);

/*
 * Frames a device failed to transmit so far: its tx_dropped (for a veth fed by XDP: the peer's
 * queue was full; frames refused because the peer runs no NAPI are counted nowhere, hence
 * veth_peer_rx_packets()).
 */
int dev_xdp_tx_lost(const char *ifname, uint64_t *lost);

/*
 * Packets the device at the other end of veth `ifname` has received so far (read by netlink,
 * across namespaces); -1 when `ifname` has no peer that netlink can name.
 */
int veth_peer_rx_packets(const char *ifname, uint64_t *packets);

/* ---- sink: an eBPF counter on the receiving interfaces (bpf/sfcgen_rx.bpf.c) ---- */
struct xdp_sink;

/* Where the counter runs on each interface. */
enum sink_hook {
	SINK_XDP,    /* XDP; fails where the interface has an XDP program already */
	SINK_TC,     /* tcx ingress, after the interface's own XDP and tcx programs */
	SINK_KERNEL, /* XDP and tcx ingress behind it (frames redirected into a veth's peer skip
		      * its XDP) where the interface has no XDP program, tcx ingress where it has */
};

/*
 * Attach the sink for UDP `port` at `hook` to the interfaces named in `ifnames`
 * (comma-separated), or to every non-loopback interface when it is NULL or "auto".  The program
 * is attached through BPF links, so it goes away with the process, however that ends.
 */
struct xdp_sink *xdp_sink_open(enum sink_hook hook, unsigned port, unsigned flows,
			       const char *ifnames, char *why, size_t whylen);
/* Names and hooks (native, generic: XDP; tcx) of the attached interfaces, as a JSON array ("[{...},...]"). */
const char *xdp_sink_where(const struct xdp_sink *k);
/* The hook asked for: "xdp", "tc" or "kernel". */
const char *xdp_sink_mode(const struct xdp_sink *k);
/* Sum the totals over CPUs; copy the flow states when `flows` is not NULL; zero all if `reset`. */
int xdp_sink_read(struct xdp_sink *k, struct xdp_sink_totals *sum, struct flow_state *flows,
		  bool reset);
void xdp_sink_close(struct xdp_sink *k);

#endif
