/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sfcgen's parts and what they share (see sfcgen.c for the model):
 *   sfcgen.c          command line (send|sink), clocks, CPU lists
 *   sfcgen_probe.c    frames: sizes (fixed or IMIX), Ethernet/IPv4|IPv6/UDP headers, the probe
 *   sfcgen_engines.c  the sending engines (packet, ring, udp, xdp), pacing and the start gate
 *   sfcgen_send.c     `sfcgen send`: options, next hop and MAC, threads, the JSON report
 *   sfcgen_route6.c   the IPv6 route and neighbour look-ups (rtnetlink)
 *   sfcgen_sink.c     `sfcgen sink`: receiving threads or the XDP sink, snapshots, percentiles
 *   sfcgen_xdp.c      the eBPF halves (live-frames engine, XDP sink)
 *   lib/              shared with the other tools: netlink, checked options, logging, histogram
 */
#ifndef SFCGEN_H
#define SFCGEN_H

#include <sched.h>
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/if_packet.h>
#include <linux/rtnetlink.h>
#include <math.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sfcgen_xdp.h" /* struct probe, the histogram layout, the eBPF engines */


#include "log.h"
#include "nl.h"
#include "opt.h"

#define MIN_FRAME 64u
#define MIN_FRAME6 84u /* IPv6: Ethernet 14 + IPv6 40 + UDP 8 + probe 18 + FCS 4 */
#define MAX_FRAME 1518u
#define WIRE_OVERHEAD (14u + 4u + 20u + 8u) /* Ethernet header + FCS + IPv4 + UDP */
#define WIRE_OVERHEAD6 (14u + 4u + 40u + 8u) /* Ethernet header + FCS + IPv6 + UDP */

/*
 * Where the headers of a generated frame sit, by address family (AF_INET or AF_INET6): the
 * UDP header after Ethernet and IPv4 (20) or IPv6 (40, no extension headers), the probe after it.
 */
static inline unsigned udp_off(int family)
{
	return family == AF_INET6 ? 14u + 40u : 14u + 20u;
}

static inline unsigned probe_off(int family)
{
	return udp_off(family) + 8u;
}

static inline unsigned wire_overhead(int family)
{
	return family == AF_INET6 ? WIRE_OVERHEAD6 : WIRE_OVERHEAD;
}

static inline unsigned min_frame(int family)
{
	return family == AF_INET6 ? MIN_FRAME6 : MIN_FRAME;
}
#define DEFAULT_BATCH 64u
#define MAX_BATCH 256u
#define RING_FRAME_SIZE 2048u
#define RING_BLOCK_SIZE (64u * 1024u)
#define RING_BLOCKS 16u
#define NSEC 1000000000LL
#define PACE_GRACE_NS 10000000LL /* 10 ms */
/* a paced sender with more than CATCHUP_FRAMES due at once (what one NAPI poll takes) was not
 * run for a while: it sends only the last CATCHUP_FRAMES and skips the older ones (back to back
 * they are a burst, not the rate).  The xdp engine's calls send up to a few hundred
 * microseconds of frames each at high rates, so for it the bound is STALL_NS of frames if that
 * is more; the socket engines' batches are at most --batch (64) frames */
#define CATCHUP_FRAMES 64u
#define STALL_NS 1000000LL /* 1 ms */
/* ... unless its last send call itself took this long: then the device held it (a queueing
 * qdisc on its own interface), and it catches up as the device takes frames */
#define SEND_HELD_NS 250000LL /* 250 us */
#define XDP_DEFAULT_CHUNK 4096u /* frames per BPF_PROG_RUN call at the maximum rate */
#define XDP_MIN_GAP_NS 100000LL /* least time between two paced BPF_PROG_RUN calls (100 us) */
#define XDP_GAP_FRAMES 64.0     /* ... unless that many frames fall due sooner */

_Static_assert(sizeof(struct probe) == 18, "probe header must fit a 64-byte frame");

extern const unsigned imix_sizes[12];
#define IMIX_LEN 12u

/* CPU list for --cpus: "0,2-3" -> cpus[]; threads are pinned round-robin over it. */
struct cpu_list {
	unsigned n;
	unsigned cpu[CPU_SETSIZE];
};

/* ------------------------------------------------------------------------------------------ */
/* Sender                                                                                     */
/* ------------------------------------------------------------------------------------------ */

enum engine { ENGINE_AUTO, ENGINE_PACKET, ENGINE_RING, ENGINE_UDP, ENGINE_XDP };
extern const char *const engine_names[5];

struct send_cfg {
	int family; /* AF_INET or AF_INET6, of --dst (and --src, which must match) */
	struct in_addr dst;
	struct in_addr src;
	struct in6_addr dst6;
	struct in6_addr src6;
	bool have_src;
	unsigned dport;
	unsigned flows;
	unsigned size; /* 0: imix */
	double rate;   /* packets per second in total; 0: as fast as possible */
	double duration;
	double ramp;
	unsigned threads;
	unsigned batch;
	enum engine engine;
	struct cpu_list cpus;
	bool qdisc_bypass;
	char dev[IF_NAMESIZE];
	uint8_t dst_mac[6];
	bool have_dst_mac;
	uint16_t run;
	char classify_maps[PATH_MAX]; /* engine xdp: the lab's maps directory, or empty */
	unsigned classify_node;       /* engine xdp: classify as this node (its node_id) */
	bool have_classify_node;
};

/* What the packet engine needs to build frames: resolved once, before the threads start. */
struct l2_path {
	int ifindex;
	char ifname[IF_NAMESIZE];
	uint8_t src_mac[6];
	uint8_t dst_mac[6];
	struct in_addr src;
	struct in6_addr src6;
	unsigned mtu;
};

struct sender;

struct send_thread {
	struct sender *s;
	unsigned index;
	pthread_t tid;
	unsigned nflows; /* flows owned: index, index + threads, ... */
	uint64_t *flow_sent;  /* per owned flow */
	uint32_t *flow_seq;   /* next sequence number per owned flow */
	uint64_t sent;
	uint64_t bytes;
	uint64_t errors;
	uint64_t local_drops; /* refused by a qdisc of the sender's own device: sent, then lost */
	uint64_t sent_window; /* of `sent`, the packets stamped inside the measured window */
	/* the most packets that were due and not yet sent at once inside the measured window
	 * (paced rates): a thread that fell behind (not run for a while) sends them back to
	 * back, a burst, not the rate */
	uint64_t max_behind;
	uint64_t skipped;        /* frames of the plan not sent: fell due too long before */
	uint64_t skipped_window; /* of those, inside the measured window */
	int64_t end_ns;
	bool passed; /* went through the start gate */
	int err; /* errno of a fatal failure, 0 if none */
	char errmsg[160];
};

struct sender {
	struct send_cfg cfg;
	struct l2_path path;
	enum engine engine;
	pthread_mutex_t gate_lock;
	pthread_cond_t gate_cond;
	unsigned gate_ready;
	bool gate_open;
	int64_t t0;
	int64_t win_start; /* t0 + ramp: probes stamped from here on carry PROBE_MAGIC_WINDOW */
	struct send_thread *th;
	unsigned chunk;     /* most packets per send call */
	struct xdp_tx *xdp; /* the live-frames program (engine xdp) */
};

/* Wait until the main thread sets t0 and lets every sender go (called once per thread). */

struct sink_stats {
	uint64_t received;
	uint64_t bytes;
	uint64_t invalid;
	uint64_t socket_drops;
	uint64_t lat_count;
	uint64_t lat_max;
	uint64_t lat_min;
	double lat_sum;
	uint64_t hist[HIST_BUCKETS];
	int64_t first_ns;
	int64_t last_ns;
	uint64_t received_window; /* distinct probes sent inside the measured window */
	/* arrivals of the first and latest window probe; received before the first, up to the latest */
	int64_t win_first_ns;
	int64_t win_last_ns;
	uint64_t win_rx_before;
	uint64_t win_rx_last;
};

struct sink_thread {
	pthread_t tid;
	int fd;
	pthread_mutex_t lock;
	struct flow_state *flows;
	struct sink_stats st;
	uint32_t last_ovfl;
	int err;
};

struct sink {
	struct cpu_list cpus;
	unsigned port;
	unsigned flows;
	unsigned threads;
	atomic_bool stop;
	struct sink_thread *th;
	struct xdp_sink *xdp; /* --xdp: counting is done by bpf/sfcgen_rx.bpf.c, no threads */
};

/* ---- functions shared between the parts ---- */
void *send_thread_main(void *arg);
int64_t now_ns(void);
void sleep_until_ns(int64_t t);
int parse_cpus(const char *arg, struct cpu_list *l);
void pin_thread(const struct cpu_list *l, unsigned index);
unsigned frame_size_at(const struct send_cfg *c, uint64_t n);
uint16_t ip_checksum(const void *data, size_t len);
void build_headers(uint8_t *f, const struct sender *s, unsigned size);
void udp6_checksum(uint8_t *f);
int route6_get(const struct in6_addr *dst, int *oif, struct in6_addr *gw, struct in6_addr *src,
	       unsigned *type);
bool neigh6_lookup(const struct in6_addr *addr, int ifindex, uint8_t mac[6]);
void neigh6_probe(const struct in6_addr *nexthop, const char *ifname, int ifindex);
void print_u64_array(const uint64_t *v, unsigned n);
int cmd_send(int argc, char **argv);
int cmd_sink(int argc, char **argv);

#endif
