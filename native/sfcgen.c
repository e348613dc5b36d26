// SPDX-License-Identifier: Apache-2.0
/*
 * sfcgen: a UDP/IPv4 packet generator and sink for sfclab trials.
 *
 *   sfcgen send --dst IP --dport PORT [--flows N] [--size BYTES|imix] [--rate PPS|max]
 *               [--duration S] [--threads N] [--ramp S] [--engine auto|packet|ring|udp|xdp]
 *   sfcgen sink --port PORT [--flows N] [--threads N] [--xdp [--xdp-dev IFNAME,...]]
 *
 * Frame sizes count as RFC 2544 does: Ethernet header + IPv4 + UDP + payload + FCS, so a
 * 64-byte frame carries 18 bytes of UDP payload.  Every payload starts with a probe header
 * (magic, run id, flow id, per-flow sequence number, CLOCK_MONOTONIC send time in ns); sender
 * and sink share the host clock, so one-way latency is a subtraction.
 *
 * Engines of the sender:
 *   packet  AF_PACKET socket with a TX_RING: frames are built in the ring and handed to the
 *           device in batches with one sendto(); the next-hop MAC comes from the neighbour
 *           table (probed first), the egress interface from an RTM_GETROUTE lookup.  The
 *           device's qdisc is honoured unless --qdisc-bypass is given.
 *   udp     connected UDP sockets (one per flow) and sendmmsg().
 *   xdp     BPF_PROG_RUN in live-frames mode: the kernel transmits copies of one template frame
 *           and bpf/sfcgen_tx.bpf.c stamps each one (sfcgen_xdp.c); the fastest, and blind to
 *           the device's qdisc.  The next hop must take XDP frames (see --help).
 *   auto    packet when the egress device is Ethernet and the next hop resolves, else udp.
 *
 * Flows vary the UDP source port (base 10000 + flow id); the destination port is fixed, so one
 * sink port receives every flow.
 *
 * The sink counts in user space from a UDP socket, or with --xdp in bpf/sfcgen_rx.bpf.c on the
 * receiving interfaces (same accounting: flow_account() in include/sfcgen_shared.h).
 * The sink prints {"event":"ready",...} once bound, one JSON snapshot per SIGUSR1 (and then
 * resets its counters), the same without a reset per SIGUSR2 ("peek"), and a final JSON line on
 * SIGTERM/SIGINT before exiting 0.
 *
 * The measured window: probes stamped from the end of the ramp (t0 + --ramp) on carry
 * PROBE_MAGIC_WINDOW; the sender reports sent_window and window_s (to the end of sending), the
 * sink received_window (distinct marked probes) and rx_window_received / rx_window_s (everything
 * that arrived from the first marked probe to the latest one, and that span), so rates hold over
 * a span where the sender ran at the asked rate (src/sfclab/traffic/window.py).
 *
 * Structure: both commands run in four stages, each a function of its own.
 *   stage    send (sfcgen_send.c)                  sink (sfcgen_sink.c)
 *   parse    send_parse: option table send_opttab   sink_parse: option table sink_opttab
 *   set-up   send_setup: engine, next hop, state    sink_setup, sink_start: sockets or XDP,
 *                                                   threads
 *   run      send_run: threads, start gate, join    sink_serve: "ready", a snapshot per signal
 *   report   send_collect, send_report              sink_report (also on SIGTERM), sink_stop
 * An option table (lib/opttab.c) names a setter per long option; the setter checks its value
 * with lib/opt.c.  Every engine is one entry of the engines[] table in sfcgen_engines.c
 * (open, burst, close), all run by one loop, send_loop(): open, the start gate, then pace()
 * says how many packets are due and the engine's burst() sends them, until the plan or the
 * duration is done.
 */
#define _GNU_SOURCE
#include "sfcgen.h"

const char *const engine_names[5] = {"auto", "packet", "ring", "udp", "xdp"};

int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

void sleep_until_ns(int64_t t)
{
	struct timespec ts = {.tv_sec = t / NSEC, .tv_nsec = t % NSEC};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}



int parse_cpus(const char *arg, struct cpu_list *l)
{
	const char *p = arg;

	l->n = 0;
	while (*p) {
		char *end;
		unsigned long a, b;

		errno = 0;
		a = strtoul(p, &end, 10);
		if (errno || end == p || a >= CPU_SETSIZE)
			goto bad;
		b = a;
		if (*end == '-') {
			p = end + 1;
			b = strtoul(p, &end, 10);
			if (errno || end == p || b >= CPU_SETSIZE || b < a)
				goto bad;
		}
		for (unsigned long c = a; c <= b && l->n < CPU_SETSIZE; c++)
			l->cpu[l->n++] = (unsigned)c;
		if (*end == ',')
			end++;
		else if (*end)
			goto bad;
		p = end;
	}
	if (l->n)
		return 0;
bad:
	fprintf(stderr, "sfcgen: invalid --cpus '%s' (expected e.g. 0,2-3)\n", arg);
	return -1;
}

void pin_thread(const struct cpu_list *l, unsigned index)
{
	cpu_set_t set;
	int err;

	if (!l->n)
		return;
	CPU_ZERO(&set);
	CPU_SET(l->cpu[index % l->n], &set);
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err)
		fprintf(stderr, "sfcgen: Failed to pin a thread to CPU %u: %s\n", l->cpu[index % l->n],
			strerror(err));
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: sfcgen send --dst IP --dport PORT [options]   (sfcgen send --help)\n"
			"       sfcgen sink --port PORT [options]             (sfcgen sink --help)\n");
		return argc < 2 ? 2 : 0;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (!strcmp(argv[1], "send"))
		return cmd_send(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sink"))
		return cmd_sink(argc - 1, argv + 1);
	fprintf(stderr, "sfcgen: unknown mode '%s' (send|sink)\n", argv[1]);
	return 2;
}

