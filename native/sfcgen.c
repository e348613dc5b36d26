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
 * receiving interfaces (same accounting: flow_account() in bpf/sfcgen_shared.h).
 * The sink prints {"event":"ready",...} once bound, one JSON snapshot per SIGUSR1 (and then
 * resets its counters), and a final JSON line on SIGTERM/SIGINT before exiting 0.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
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

#define MIN_FRAME 64u
#define MAX_FRAME 1518u
#define WIRE_OVERHEAD (14u + 4u + 20u + 8u) /* Ethernet header + FCS + IPv4 + UDP */
#define DEFAULT_BATCH 64u
#define MAX_BATCH 256u
#define RING_FRAME_SIZE 2048u
#define RING_BLOCK_SIZE (64u * 1024u)
#define RING_BLOCKS 16u
#define NSEC 1000000000LL
#define PACE_GRACE_NS 10000000LL /* 10 ms */
#define XDP_DEFAULT_CHUNK 4096u /* frames per BPF_PROG_RUN call at the maximum rate */

_Static_assert(sizeof(struct probe) == 18, "probe header must fit a 64-byte frame");

static const unsigned imix_sizes[] = {64, 64, 64, 64, 64, 64, 64, 594, 594, 594, 594, 1518};
#define IMIX_LEN (sizeof(imix_sizes) / sizeof(imix_sizes[0]))

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

static void sleep_until_ns(int64_t t)
{
	struct timespec ts = {.tv_sec = t / NSEC, .tv_nsec = t % NSEC};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int parse_uint(const char *s, const char *what, unsigned long min, unsigned long max,
		      unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "sfcgen: invalid %s '%s' (expected an integer in %lu..%lu)\n", what, s,
			min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_double(const char *s, const char *what, double min, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min) || !isfinite(v)) {
		fprintf(stderr, "sfcgen: invalid %s '%s' (expected a number >= %g)\n", what, s, min);
		return -1;
	}
	*out = v;
	return 0;
}

/* CPU list for --cpus: "0,2-3" -> cpus[]; threads are pinned round-robin over it. */
struct cpu_list {
	unsigned n;
	unsigned cpu[CPU_SETSIZE];
};

static int parse_cpus(const char *arg, struct cpu_list *l)
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

static void pin_thread(const struct cpu_list *l, unsigned index)
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

/* ------------------------------------------------------------------------------------------ */
/* Sender                                                                                     */
/* ------------------------------------------------------------------------------------------ */

enum engine { ENGINE_AUTO, ENGINE_PACKET, ENGINE_RING, ENGINE_UDP, ENGINE_XDP };
static const char *const engine_names[] = {"auto", "packet", "ring", "udp", "xdp"};

struct send_cfg {
	struct in_addr dst;
	struct in_addr src;
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
};

/* What the packet engine needs to build frames: resolved once, before the threads start. */
struct l2_path {
	int ifindex;
	char ifname[IF_NAMESIZE];
	uint8_t src_mac[6];
	uint8_t dst_mac[6];
	struct in_addr src;
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
	struct send_thread *th;
	unsigned chunk;     /* most packets per send call */
	struct xdp_tx *xdp; /* the live-frames program (engine xdp) */
};

/* Wait until the main thread sets t0 and lets every sender go (called once per thread). */
static void gate_wait(struct send_thread *t)
{
	struct sender *s = t->s;

	if (t->passed)
		return;
	t->passed = true;
	pthread_mutex_lock(&s->gate_lock);
	s->gate_ready++;
	pthread_cond_broadcast(&s->gate_cond);
	while (!s->gate_open)
		pthread_cond_wait(&s->gate_cond, &s->gate_lock);
	pthread_mutex_unlock(&s->gate_lock);
}

static void th_fail(struct send_thread *t, int err, const char *what)
{
	if (!t->err) {
		t->err = err ? err : EIO;
		snprintf(t->errmsg, sizeof(t->errmsg), "Failed to %s: %s", what, strerror(t->err));
	}
}

static unsigned frame_size_at(const struct send_cfg *c, uint64_t n)
{
	return c->size ? c->size : imix_sizes[n % IMIX_LEN];
}

/* Packets this thread sends in all: the integral of its rate over the duration. */
static uint64_t planned_packets(const struct sender *s, double rate)
{
	double d = s->cfg.duration, ramp = s->cfg.ramp;

	return (uint64_t)llround(rate * (ramp > 0 ? d - ramp / 2 : d));
}

/*
 * Packets due by time t (ns after t0): packet k leaves at the time the rate's integral reaches k
 * (the first at t0), the rate climbing linearly during the ramp.
 */
static uint64_t due_packets(const struct sender *s, double rate, int64_t t, uint64_t planned)
{
	double ts = (double)t / NSEC, ramp = s->cfg.ramp, n;
	uint64_t due;

	if (ts < 0)
		return 0;
	if (ramp > 0 && ts < ramp)
		n = rate * ts * ts / (2 * ramp);
	else if (ramp > 0)
		n = rate * (ts - ramp / 2);
	else
		n = rate * ts;
	due = (uint64_t)(n + 1e-9) + 1;
	return due < planned ? due : planned;
}

/*
 * How many packets to send now: 0 after sleeping until the next one is due, -1 when the
 * thread is done (deadline passed or every planned packet sent).
 */
static int64_t pace(const struct sender *s, double rate, uint64_t n, uint64_t planned,
		    int64_t now)
{
	int64_t el = now - s->t0;
	uint64_t due;

	if (rate <= 0)
		return el >= (int64_t)(s->cfg.duration * NSEC) ? -1 : (int64_t)s->chunk;
	/* packets already due when the deadline passes (a late wake-up) still go, within a grace */
	if (n >= planned || el >= (int64_t)(s->cfg.duration * NSEC) + PACE_GRACE_NS)
		return -1;
	due = due_packets(s, rate, el, planned);
	if (due <= n) {
		/* packet n leaves when the integral reaches n */
		double next = (double)n / rate;
		int64_t at;

		if (s->cfg.ramp > 0 && next < s->cfg.ramp / 2)
			next = sqrt(2 * s->cfg.ramp * (double)n / rate);
		else if (s->cfg.ramp > 0)
			next += s->cfg.ramp / 2;
		at = s->t0 + (int64_t)(next * NSEC);
		if (at > now)
			sleep_until_ns(at);
		return 0;
	}
	return due - n > s->chunk ? s->chunk : (int64_t)(due - n);
}

static uint16_t ip_checksum(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* Write the Ethernet, IPv4 and UDP headers of a frame of `size` bytes (FCS excluded). */
static void build_headers(uint8_t *f, const struct sender *s, unsigned size)
{
	struct iphdr *ip = (struct iphdr *)(f + 14);
	struct udphdr *udp = (struct udphdr *)(f + 34);
	unsigned ip_len = size - 14 - 4;

	memcpy(f, s->path.dst_mac, 6);
	memcpy(f + 6, s->path.src_mac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	memset(ip, 0, sizeof(*ip));
	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = htons((uint16_t)ip_len);
	ip->frag_off = htons(IP_DF);
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->saddr = s->path.src.s_addr;
	ip->daddr = s->cfg.dst.s_addr;
	ip->check = ip_checksum(ip, 20);
	udp->source = 0;
	udp->dest = htons((uint16_t)s->cfg.dport);
	udp->len = htons((uint16_t)(ip_len - 20));
	udp->check = 0; /* optional for IPv4 */
}

struct ring {
	int fd;
	uint8_t *map;
	size_t map_len;
	unsigned nframes;
	unsigned head;
	int16_t *slot_flow; /* owned-flow index of the frame in each slot, -1 if none */
};

static void *ring_frame(struct ring *r, unsigned i)
{
	unsigned per_block = RING_BLOCK_SIZE / RING_FRAME_SIZE;

	return r->map + (size_t)(i / per_block) * RING_BLOCK_SIZE +
	       (size_t)(i % per_block) * RING_FRAME_SIZE;
}

static int ring_open(struct send_thread *t, struct ring *r)
{
	struct sender *s = t->s;
	struct tpacket_req req = {
		.tp_block_size = RING_BLOCK_SIZE,
		.tp_block_nr = RING_BLOCKS,
		.tp_frame_size = RING_FRAME_SIZE,
		.tp_frame_nr = RING_BLOCKS * (RING_BLOCK_SIZE / RING_FRAME_SIZE),
	};
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_ifindex = s->path.ifindex};
	int v = TPACKET_V2, sndbuf = 4 << 20, one = 1;

	r->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); /* protocol 0: never receives */
	if (r->fd < 0) {
		th_fail(t, errno, "create packet socket");
		goto fail;
	}
	if (setsockopt(r->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v))) {
		th_fail(t, errno, "set TPACKET_V2");
		goto fail;
	}
	if (s->cfg.qdisc_bypass &&
	    setsockopt(r->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one))) {
		th_fail(t, errno, "set PACKET_QDISC_BYPASS");
		goto fail;
	}
	if (setsockopt(r->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
		setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (setsockopt(r->fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof(req))) {
		th_fail(t, errno, "set up PACKET_TX_RING");
		goto fail;
	}
	r->map_len = (size_t)req.tp_block_size * req.tp_block_nr;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		th_fail(t, errno, "map the TX ring");
		goto fail;
	}
	if (bind(r->fd, (struct sockaddr *)&sll, sizeof(sll))) {
		th_fail(t, errno, "bind the packet socket");
		goto fail;
	}
	r->nframes = req.tp_frame_nr;
	r->head = 0;
	r->slot_flow = calloc(r->nframes, sizeof(*r->slot_flow));
	if (!r->slot_flow) {
		th_fail(t, errno, "allocate the ring index");
		goto fail;
	}
	for (unsigned i = 0; i < r->nframes; i++)
		r->slot_flow[i] = -1;
	return 0;
fail:
	if (r->map)
		munmap(r->map, r->map_len);
	if (r->fd >= 0)
		close(r->fd);
	r->map = NULL;
	r->fd = -1;
	return -1;
}

static void ring_close(struct ring *r)
{
	free(r->slot_flow);
	if (r->map)
		munmap(r->map, r->map_len);
	if (r->fd >= 0)
		close(r->fd);
}

/* Account for the frames the kernel has finished with since the last call. */
static void ring_reap(struct send_thread *t, struct ring *r, unsigned from, unsigned count)
{
	for (unsigned k = 0; k < count; k++) {
		unsigned i = (from + k) % r->nframes;
		struct tpacket2_hdr *h = ring_frame(r, i);
		int16_t f = r->slot_flow[i];

		if (f < 0)
			continue;
		if (h->tp_status == TP_STATUS_WRONG_FORMAT) {
			t->errors++;
			h->tp_status = TP_STATUS_AVAILABLE;
		} else {
			t->flow_sent[f]++;
			t->sent++;
			t->bytes += h->tp_len + 4;
		}
		r->slot_flow[i] = -1;
	}
}

static int send_loop_packet(struct send_thread *t)
{
	struct sender *s = t->s;
	const unsigned hdr_off = TPACKET_ALIGN(sizeof(struct tpacket2_hdr));
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_IP),
		.sll_ifindex = s->path.ifindex,
		.sll_halen = 6,
	};
	uint8_t templ[3][64];
	unsigned templ_size[3], ntempl = s->cfg.size ? 1 : 3;
	double rate = s->cfg.rate / s->cfg.threads;
	uint64_t planned = 0, n = 0;
	unsigned owned = 0;
	struct ring r = {.fd = -1};
	int ret = -1;

	memcpy(to.sll_addr, s->path.dst_mac, 6);
	if (ntempl == 1) {
		templ_size[0] = s->cfg.size;
	} else {
		templ_size[0] = 64;
		templ_size[1] = 594;
		templ_size[2] = 1518;
	}
	for (unsigned i = 0; i < ntempl; i++)
		build_headers(templ[i], s, templ_size[i]);
	if (ring_open(t, &r))
		goto cleanup;
	if (rate > 0)
		planned = planned_packets(s, rate);

	gate_wait(t);
	for (;;) {
		int64_t now = now_ns(), w;
		uint64_t want;
		unsigned first = r.head, filled = 0;

		w = pace(s, rate, n, planned, now);
		if (w < 0)
			break;
		if (w == 0)
			continue;
		want = (uint64_t)w;
		for (; filled < want; filled++) {
			unsigned i = r.head;
			struct tpacket2_hdr *h = ring_frame(&r, i);
			uint8_t *f = (uint8_t *)h + hdr_off;
			unsigned size = frame_size_at(&s->cfg, n), ti = 0;
			unsigned flow = t->index + owned * s->cfg.threads;
			struct probe *p = (struct probe *)(f + 42);

			if (h->tp_status != TP_STATUS_AVAILABLE)
				break; /* still owned by the kernel */
			if (ntempl == 3)
				ti = size == 64 ? 0 : size == 594 ? 1 : 2;
			memcpy(f, templ[ti], 42);
			((struct udphdr *)(f + 34))->source = htons((uint16_t)(SPORT_BASE + flow));
			p->magic = PROBE_MAGIC;
			p->run = s->cfg.run;
			p->flow = (uint16_t)flow;
			p->seq = t->flow_seq[owned]++;
			p->ts_ns = (uint64_t)now;
			h->tp_len = size - 4;
			r.slot_flow[i] = (int16_t)owned;
			__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
			r.head = (i + 1) % r.nframes;
			n++;
			if (++owned == t->nflows)
				owned = 0;
		}
		if (!filled) {
			struct pollfd pfd = {.fd = r.fd, .events = POLLOUT};

			poll(&pfd, 1, 1);
			continue;
		}
		if (sendto(r.fd, NULL, 0, 0, (struct sockaddr *)&to, sizeof(to)) < 0 &&
		    errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
			th_fail(t, errno, "send frames on the packet socket");
			goto cleanup;
		}
		/* blocking sendto returns once the kernel has taken the frames */
		for (unsigned k = 0; k < filled; k++) {
			struct tpacket2_hdr *h = ring_frame(&r, (first + k) % r.nframes);
			int spins = 0;

			while (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) &
			       (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING)) {
				if (++spins > 1000) {
					struct pollfd pfd = {.fd = r.fd, .events = POLLOUT};

					poll(&pfd, 1, 1);
					sendto(r.fd, NULL, 0, MSG_DONTWAIT, (struct sockaddr *)&to,
					       sizeof(to));
				}
			}
		}
		ring_reap(t, &r, first, filled);
	}
	ret = 0;
cleanup:
	gate_wait(t);
	t->end_ns = now_ns();
	ring_close(&r);
	return ret;
}

/*
 * AF_PACKET with sendmmsg: prebuilt frames, one syscall per batch.  A frame that a qdisc of
 * the egress device drops (ENOBUFS) counts as sent and lost, as it does for UDP sockets.
 */
static int send_loop_packet_mmsg(struct send_thread *t)
{
	struct sender *s = t->s;
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_IP),
		.sll_ifindex = s->path.ifindex,
		.sll_halen = 6,
	};
	struct mmsghdr msgs[MAX_BATCH];
	struct iovec iov[MAX_BATCH];
	uint8_t (*bufs)[MAX_FRAME] = NULL;
	unsigned msg_flow[MAX_BATCH];
	double rate = s->cfg.rate / s->cfg.threads;
	uint64_t planned = 0, n = 0;
	unsigned owned = 0;
	int fd = -1, one = 1, sndbuf = 4 << 20, ret = -1;

	memcpy(to.sll_addr, s->path.dst_mac, 6);
	bufs = calloc(s->cfg.batch, sizeof(*bufs));
	if (!bufs) {
		th_fail(t, errno, "allocate send buffers");
		goto cleanup;
	}
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); /* protocol 0: never receives */
	if (fd < 0) {
		th_fail(t, errno, "create packet socket");
		goto cleanup;
	}
	if (s->cfg.qdisc_bypass && setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one))) {
		th_fail(t, errno, "set PACKET_QDISC_BYPASS");
		goto cleanup;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	for (unsigned i = 0; i < s->cfg.batch; i++) {
		memset(&msgs[i], 0, sizeof(msgs[i]));
		iov[i].iov_base = bufs[i];
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_hdr.msg_name = &to;
		msgs[i].msg_hdr.msg_namelen = sizeof(to);
	}
	if (rate > 0)
		planned = planned_packets(s, rate);

	gate_wait(t);
	for (;;) {
		int64_t now = now_ns(), w;
		uint64_t want;
		unsigned off = 0;

		w = pace(s, rate, n, planned, now);
		if (w < 0)
			break;
		if (w == 0)
			continue;
		want = (uint64_t)w;
		for (unsigned i = 0; i < want; i++) {
			unsigned size = frame_size_at(&s->cfg, n + i);
			unsigned flow = t->index + owned * s->cfg.threads;
			struct probe *p = (struct probe *)(bufs[i] + 42);

			build_headers(bufs[i], s, size);
			((struct udphdr *)(bufs[i] + 34))->source = htons((uint16_t)(SPORT_BASE + flow));
			p->magic = PROBE_MAGIC;
			p->run = s->cfg.run;
			p->flow = (uint16_t)flow;
			p->seq = t->flow_seq[owned]++;
			p->ts_ns = (uint64_t)now;
			iov[i].iov_len = size - 4;
			msg_flow[i] = owned;
			if (++owned == t->nflows)
				owned = 0;
		}
		while (off < want) {
			int done = sendmmsg(fd, msgs + off, (unsigned)(want - off), 0);

			if (done < 0) {
				if (errno == EINTR)
					continue;
				if (errno != ENOBUFS && errno != EAGAIN) {
					th_fail(t, errno, "send frames on the packet socket");
					goto cleanup;
				}
				/* the first frame was refused by the local qdisc: it is lost */
				t->local_drops++;
				done = 1;
			}
			for (int i = 0; i < done; i++) {
				t->flow_sent[msg_flow[off + i]]++;
				t->bytes += iov[off + i].iov_len + 4;
			}
			t->sent += (uint64_t)done;
			off += (unsigned)done;
		}
		n += want;
	}
	ret = 0;
cleanup:
	gate_wait(t);
	t->end_ns = now_ns();
	if (fd >= 0)
		close(fd);
	free(bufs);
	return ret;
}

static int send_loop_udp(struct send_thread *t)
{
	struct sender *s = t->s;
	struct mmsghdr msgs[MAX_BATCH];
	struct iovec iov[MAX_BATCH];
	uint8_t (*bufs)[MAX_FRAME] = NULL;
	int *fds = NULL;
	double rate = s->cfg.rate / s->cfg.threads;
	uint64_t planned = 0, n = 0;
	unsigned owned = 0;
	int ret = -1;

	fds = calloc(t->nflows, sizeof(*fds));
	bufs = calloc(s->cfg.batch, sizeof(*bufs));
	if (!fds || !bufs) {
		th_fail(t, errno, "allocate send buffers");
		goto cleanup;
	}
	for (unsigned k = 0; k < t->nflows; k++)
		fds[k] = -1;
	for (unsigned k = 0; k < t->nflows; k++) {
		unsigned flow = t->index + k * s->cfg.threads;
		struct sockaddr_in src = {.sin_family = AF_INET,
					  .sin_port = htons((uint16_t)(SPORT_BASE + flow))};
		struct sockaddr_in dst = {.sin_family = AF_INET,
					  .sin_port = htons((uint16_t)s->cfg.dport),
					  .sin_addr = s->cfg.dst};
		int one = 1, sndbuf = 4 << 20;

		if (s->cfg.have_src)
			src.sin_addr = s->cfg.src;
		fds[k] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fds[k] < 0) {
			th_fail(t, errno, "create UDP socket");
			goto cleanup;
		}
		setsockopt(fds[k], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fds[k], IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
		if (setsockopt(fds[k], SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
			setsockopt(fds[k], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
		if (bind(fds[k], (struct sockaddr *)&src, sizeof(src))) {
			th_fail(t, errno, "bind UDP source port");
			goto cleanup;
		}
		if (connect(fds[k], (struct sockaddr *)&dst, sizeof(dst))) {
			th_fail(t, errno, "connect UDP socket");
			goto cleanup;
		}
	}
	for (unsigned i = 0; i < s->cfg.batch; i++) {
		memset(&msgs[i], 0, sizeof(msgs[i]));
		iov[i].iov_base = bufs[i];
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	if (rate > 0)
		planned = planned_packets(s, rate);

	gate_wait(t);
	for (;;) {
		int64_t now = now_ns(), w;
		uint64_t want;
		unsigned flow = t->index + owned * s->cfg.threads;
		int done;

		w = pace(s, rate, n, planned, now);
		if (w < 0)
			break;
		if (w == 0)
			continue;
		want = (uint64_t)w;
		/* one batch per flow: a connected socket carries one source port */
		for (unsigned i = 0; i < want; i++) {
			unsigned size = frame_size_at(&s->cfg, n + i);
			struct probe *p = (struct probe *)bufs[i];

			p->magic = PROBE_MAGIC;
			p->run = s->cfg.run;
			p->flow = (uint16_t)flow;
			p->seq = t->flow_seq[owned] + i;
			p->ts_ns = (uint64_t)now;
			iov[i].iov_len = size - WIRE_OVERHEAD;
		}
		done = sendmmsg(fds[owned], msgs, (unsigned)want, 0);
		if (done < 0) {
			if (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED ||
			    errno == EINTR) {
				t->errors++;
				continue;
			}
			th_fail(t, errno, "send UDP datagrams");
			goto cleanup;
		}
		for (int i = 0; i < done; i++)
			t->bytes += iov[i].iov_len + WIRE_OVERHEAD;
		t->flow_seq[owned] += (uint32_t)done;
		t->flow_sent[owned] += (uint64_t)done;
		t->sent += (uint64_t)done;
		n += (uint64_t)done;
		if (++owned == t->nflows)
			owned = 0;
	}
	ret = 0;
cleanup:
	gate_wait(t);
	t->end_ns = now_ns();
	if (fds)
		for (unsigned k = 0; k < t->nflows; k++)
			if (fds[k] >= 0)
				close(fds[k]);
	free(fds);
	free(bufs);
	return ret;
}

/*
 * Engine xdp: the kernel transmits `w` copies of one template frame per BPF_PROG_RUN call in
 * live-frames mode; bpf/sfcgen_tx.bpf.c stamps each copy (flow, sequence number, send time) as
 * it goes.  The template's IPv4 ID names this thread, so the program uses this thread's flows.
 * No qdisc and no egress hook of the device sees these frames.
 */
static int send_loop_xdp(struct send_thread *t)
{
	struct sender *s = t->s;
	static __thread uint8_t frame[MAX_FRAME];
	struct iphdr *ip = (struct iphdr *)(frame + 14);
	unsigned size = s->cfg.size ? s->cfg.size : MAX_FRAME; /* imix: the program trims */
	double rate = s->cfg.rate / s->cfg.threads;
	uint64_t planned = 0, n = 0;
	int ret = -1;

	memset(frame, 0, sizeof(frame));
	build_headers(frame, s, size);
	ip->id = htons((uint16_t)t->index);
	ip->check = 0;
	ip->check = ip_checksum(ip, 20);
	if (rate > 0)
		planned = planned_packets(s, rate);

	gate_wait(t);
	for (;;) {
		int64_t w = pace(s, rate, n, planned, now_ns());
		int err;

		if (w < 0)
			break;
		if (w == 0)
			continue;
		err = xdp_tx_send(s->xdp, s->path.ifindex, frame, size - 4, (unsigned)w);
		if (err) {
			th_fail(t, -err, "send frames with BPF_PROG_RUN");
			goto cleanup;
		}
		n += (uint64_t)w;
	}
	ret = 0;
cleanup:
	gate_wait(t);
	t->end_ns = now_ns();
	if (xdp_tx_thread_sent(s->xdp, t->index, &t->sent, &t->bytes))
		th_fail(t, errno, "read the generator's counters");
	return ret;
}

static void *send_thread_main(void *arg)
{
	struct send_thread *t = arg;

	pin_thread(&t->s->cfg.cpus, t->index);
	if (t->s->engine == ENGINE_RING)
		send_loop_packet(t);
	else if (t->s->engine == ENGINE_PACKET)
		send_loop_packet_mmsg(t);
	else if (t->s->engine == ENGINE_XDP)
		send_loop_xdp(t);
	else
		send_loop_udp(t);
	return NULL;
}

/* RTM_GETROUTE for dst: egress interface, gateway (0 if on-link), preferred source, type. */
static int route_get(struct in_addr dst, int *oif, struct in_addr *gw, struct in_addr *src,
		     unsigned *type)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attrs[64];
	} req;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct rtattr *rta;
	char buf[8192];
	ssize_t len;
	int fd, ret = -1;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.rt.rtm_family = AF_INET;
	req.rt.rtm_dst_len = 32;
	rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
	rta->rta_type = RTA_DST;
	rta->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(rta), &dst, 4);
	req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);

	*oif = 0;
	gw->s_addr = 0;
	src->s_addr = 0;
	*type = 0;
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		fprintf(stderr, "sfcgen: Failed to open a netlink socket: %s\n", strerror(errno));
		return -1;
	}
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		fprintf(stderr, "sfcgen: Failed to ask for a route: %s\n", strerror(errno));
		goto cleanup;
	}
	len = recv(fd, buf, sizeof(buf), 0);
	if (len < 0) {
		fprintf(stderr, "sfcgen: Failed to read the route: %s\n", strerror(errno));
		goto cleanup;
	}
	for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (unsigned)len);
	     nh = NLMSG_NEXT(nh, len)) {
		struct rtmsg *rt;
		int alen;

		if (nh->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(nh);

			fprintf(stderr, "sfcgen: Failed to find a route to %s: %s\n", inet_ntoa(dst),
				strerror(-e->error));
			goto cleanup;
		}
		if (nh->nlmsg_type != RTM_NEWROUTE)
			continue;
		rt = NLMSG_DATA(nh);
		*type = rt->rtm_type;
		alen = (int)RTM_PAYLOAD(nh);
		for (rta = RTM_RTA(rt); RTA_OK(rta, alen); rta = RTA_NEXT(rta, alen)) {
			if (rta->rta_type == RTA_OIF)
				memcpy(oif, RTA_DATA(rta), 4);
			else if (rta->rta_type == RTA_GATEWAY)
				memcpy(gw, RTA_DATA(rta), 4);
			else if (rta->rta_type == RTA_PREFSRC)
				memcpy(src, RTA_DATA(rta), 4);
		}
		ret = 0;
		break;
	}
cleanup:
	close(fd);
	return ret;
}

/* Look nexthop up in this namespace's ARP table (complete entries on ifname only). */
static bool arp_lookup(struct in_addr nexthop, const char *ifname, uint8_t mac[6])
{
	char line[256], ip[64], hw[64], dev[64];
	unsigned type, flags;
	bool found = false;
	FILE *f = fopen("/proc/net/arp", "re");

	if (!f)
		return false;
	if (!fgets(line, sizeof(line), f))
		goto cleanup;
	while (!found && fgets(line, sizeof(line), f)) {
		struct in_addr a;
		unsigned m[6];

		if (sscanf(line, "%63s 0x%x 0x%x %63s %*s %63s", ip, &type, &flags, hw, dev) != 5)
			continue;
		if (!inet_aton(ip, &a) || a.s_addr != nexthop.s_addr || strcmp(dev, ifname) ||
		    !(flags & ATF_COM))
			continue;
		if (sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
			continue;
		for (int i = 0; i < 6; i++)
			mac[i] = (uint8_t)m[i];
		found = true;
	}
cleanup:
	fclose(f);
	return found;
}

/* Make the kernel resolve nexthop: a connected UDP socket's first datagram triggers ARP. */
static void neigh_probe(struct in_addr nexthop, const char *ifname)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr = nexthop};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)strlen(ifname));
	sendto(fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
	close(fd);
}

/* Resolve what the packet engine needs.  Returns 0, or -1 with a reason in why. */
static int resolve_l2(struct sender *s, char *why, size_t whylen)
{
	struct l2_path *p = &s->path;
	struct in_addr gw, prefsrc, nexthop;
	struct ifreq ifr;
	unsigned type;
	int fd = -1, oif, ret = -1;

	if (route_get(s->cfg.dst, &oif, &gw, &prefsrc, &type)) {
		snprintf(why, whylen, "no route to %s", inet_ntoa(s->cfg.dst));
		return -1;
	}
	if (type != RTN_UNICAST) {
		snprintf(why, whylen, "route to %s is not unicast (type %u)", inet_ntoa(s->cfg.dst),
			 type);
		return -1;
	}
	if (s->cfg.dev[0]) {
		oif = (int)if_nametoindex(s->cfg.dev);
		if (!oif) {
			snprintf(why, whylen, "no interface %s", s->cfg.dev);
			return -1;
		}
	}
	p->ifindex = oif;
	if (!if_indextoname((unsigned)oif, p->ifname)) {
		snprintf(why, whylen, "interface %d has no name", oif);
		return -1;
	}
	p->src = s->cfg.have_src ? s->cfg.src : prefsrc;
	if (!p->src.s_addr) {
		snprintf(why, whylen, "no source address for %s", inet_ntoa(s->cfg.dst));
		return -1;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", p->ifname);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr)) {
		snprintf(why, whylen, "SIOCGIFHWADDR %s: %s", p->ifname, strerror(errno));
		goto cleanup;
	}
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) {
		snprintf(why, whylen, "%s is not an Ethernet device", p->ifname);
		goto cleanup;
	}
	memcpy(p->src_mac, ifr.ifr_hwaddr.sa_data, 6);
	if (ioctl(fd, SIOCGIFMTU, &ifr)) {
		snprintf(why, whylen, "SIOCGIFMTU %s: %s", p->ifname, strerror(errno));
		goto cleanup;
	}
	p->mtu = (unsigned)ifr.ifr_mtu;
	if (s->cfg.have_dst_mac) {
		memcpy(p->dst_mac, s->cfg.dst_mac, 6);
	} else {
		nexthop = gw.s_addr ? gw : s->cfg.dst;
		for (int i = 0; !arp_lookup(nexthop, p->ifname, p->dst_mac); i++) {
			if (i == 100) {
				snprintf(why, whylen, "next hop %s on %s did not resolve",
					 inet_ntoa(nexthop), p->ifname);
				goto cleanup;
			}
			if (i % 20 == 0)
				neigh_probe(nexthop, p->ifname);
			usleep(10000);
		}
	}
	ret = 0;
cleanup:
	close(fd);
	return ret;
}

static void print_u64_array(const uint64_t *v, unsigned n)
{
	putchar('[');
	for (unsigned i = 0; i < n; i++)
		printf(i ? ",%" PRIu64 : "%" PRIu64, v[i]);
	putchar(']');
}

static int cmd_send(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dst", required_argument, NULL, 'd'},
		{"src", required_argument, NULL, 's'},
		{"dport", required_argument, NULL, 'p'},
		{"flows", required_argument, NULL, 'f'},
		{"size", required_argument, NULL, 'z'},
		{"rate", required_argument, NULL, 'r'},
		{"duration", required_argument, NULL, 't'},
		{"threads", required_argument, NULL, 'j'},
		{"ramp", required_argument, NULL, 'R'},
		{"batch", required_argument, NULL, 'b'},
		{"engine", required_argument, NULL, 'e'},
		{"dev", required_argument, NULL, 'i'},
		{"dst-mac", required_argument, NULL, 'm'},
		{"qdisc-bypass", no_argument, NULL, 'Q'},
		{"cpus", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct sender s;
	struct send_cfg *c = &s.cfg;
	uint64_t *flow_sent = NULL, sent = 0, bytes = 0, errors = 0, local_drops = 0;
	unsigned started = 0;
	unsigned long v;
	bool gate = false, have_dst = false, have_port = false, have_batch = false;
	uint64_t xmit_errors = 0, peer_rx = 0;
	bool have_peer_rx = false;
	char why[256] = "", note[256] = "";
	int64_t end = 0;
	int opt, ret = 1;

	memset(&s, 0, sizeof(s));
	c->flows = 1;
	c->size = 64;
	c->duration = 1;
	c->threads = 1;
	c->batch = DEFAULT_BATCH;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			if (!inet_aton(optarg, &c->dst)) {
				fprintf(stderr, "sfcgen: invalid --dst '%s'\n", optarg);
				return 2;
			}
			have_dst = true;
			break;
		case 's':
			if (!inet_aton(optarg, &c->src)) {
				fprintf(stderr, "sfcgen: invalid --src '%s'\n", optarg);
				return 2;
			}
			c->have_src = true;
			break;
		case 'p':
			if (parse_uint(optarg, "--dport", 1, 65535, &v))
				return 2;
			c->dport = (unsigned)v;
			have_port = true;
			break;
		case 'f':
			if (parse_uint(optarg, "--flows", 1, MAX_FLOWS, &v))
				return 2;
			c->flows = (unsigned)v;
			break;
		case 'z':
			if (!strcmp(optarg, "imix"))
				c->size = 0;
			else if (parse_uint(optarg, "--size", MIN_FRAME, MAX_FRAME, &v))
				return 2;
			else
				c->size = (unsigned)v;
			break;
		case 'r':
			if (!strcmp(optarg, "max"))
				c->rate = 0;
			else if (parse_double(optarg, "--rate", 1, &c->rate))
				return 2;
			break;
		case 't':
			if (parse_double(optarg, "--duration", 0.001, &c->duration))
				return 2;
			break;
		case 'j':
			if (parse_uint(optarg, "--threads", 1, MAX_THREADS, &v))
				return 2;
			c->threads = (unsigned)v;
			break;
		case 'R':
			if (parse_double(optarg, "--ramp", 0, &c->ramp))
				return 2;
			break;
		case 'b':
			if (parse_uint(optarg, "--batch", 1, MAX_BATCH, &v))
				return 2;
			c->batch = (unsigned)v;
			have_batch = true;
			break;
		case 'e': {
			int found = -1;

			for (int e = ENGINE_AUTO; e <= ENGINE_XDP; e++)
				if (!strcmp(optarg, engine_names[e]))
					found = e;
			if (found < 0) {
				fprintf(stderr, "sfcgen: invalid --engine '%s' (auto|packet|ring|udp|xdp)\n",
					optarg);
				return 2;
			}
			c->engine = (enum engine)found;
			break;
		}
		case 'i':
			snprintf(c->dev, sizeof(c->dev), "%s", optarg);
			break;
		case 'm': {
			unsigned m[6];

			if (sscanf(optarg, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4],
				   &m[5]) != 6) {
				fprintf(stderr, "sfcgen: invalid --dst-mac '%s'\n", optarg);
				return 2;
			}
			for (int i = 0; i < 6; i++)
				c->dst_mac[i] = (uint8_t)m[i];
			c->have_dst_mac = true;
			break;
		}
		case 'Q':
			c->qdisc_bypass = true;
			break;
		case 'c':
			if (parse_cpus(optarg, &c->cpus))
				return 2;
			break;
		case 'h':
			printf("usage: sfcgen send --dst IP [--src IP] --dport PORT [--flows N]\n"
			       "         [--size 64..1518|imix] [--rate PPS|max] [--duration S]\n"
			       "         [--threads N] [--ramp S] [--batch N]\n"
			       "         [--engine auto|packet|ring|udp|xdp]\n"
			       "         [--dev IFNAME] [--dst-mac MAC] [--qdisc-bypass]\n"
			       "         [--cpus LIST]\n"
			       "  engine xdp: BPF_PROG_RUN live frames; the next hop's interface must take\n"
			       "  XDP frames (an XDP program on it, or GRO turned on for a veth)\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sfcgen: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!have_dst || !have_port) {
		fprintf(stderr, "sfcgen send: --dst and --dport are required\n");
		return 2;
	}
	if (c->ramp > 0 && c->rate == 0) {
		fprintf(stderr, "sfcgen send: --ramp needs --rate PPS\n");
		return 2;
	}
	if (c->ramp > c->duration) {
		fprintf(stderr, "sfcgen send: --ramp must not exceed --duration\n");
		return 2;
	}
	if (c->threads > c->flows) {
		/* a flow's sequence numbers come from one thread, or the sink would see reordering */
		fprintf(stderr, "sfcgen send: %u threads for %u flows: using %u threads\n", c->threads,
			c->flows, c->flows);
		c->threads = c->flows;
	}
	c->run = (uint16_t)(now_ns() ^ getpid());

	s.engine = c->engine;
	if (s.engine != ENGINE_UDP && resolve_l2(&s, why, sizeof(why))) {
		if (s.engine != ENGINE_AUTO) {
			fprintf(stderr, "sfcgen send: Failed to set up the packet engine: %s\n", why);
			return 1;
		}
		s.engine = ENGINE_UDP;
	} else if (s.engine != ENGINE_UDP) {
		unsigned largest = c->size ? c->size : MAX_FRAME;

		if (largest - 18 > s.path.mtu) {
			fprintf(stderr, "sfcgen send: %u-byte frames exceed the MTU %u of %s\n",
				largest, s.path.mtu, s.path.ifname);
			return 1;
		}
		if (s.engine == ENGINE_AUTO)
			s.engine = ENGINE_PACKET;
	}
	s.chunk = c->batch;
	if (s.engine == ENGINE_XDP) {
		s.xdp = xdp_tx_open(s.path.ifindex, c->flows, c->threads, c->size == 0, c->run, why,
				    sizeof(why), note, sizeof(note));
		if (!s.xdp) {
			fprintf(stderr, "sfcgen send: Failed to set up the xdp engine: %s\n", why);
			return 1;
		}
		if (!have_batch)
			s.chunk = XDP_DEFAULT_CHUNK;
		dev_xdp_tx_lost(s.path.ifname, &xmit_errors);
		have_peer_rx = !veth_peer_rx_packets(s.path.ifname, &peer_rx);
	}

	{
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	s.th = calloc(c->threads, sizeof(*s.th));
	flow_sent = calloc(c->flows, sizeof(*flow_sent));
	if (!s.th || !flow_sent) {
		fprintf(stderr, "sfcgen send: Failed to allocate thread state: %s\n", strerror(errno));
		goto cleanup;
	}
	for (unsigned i = 0; i < c->threads; i++) {
		struct send_thread *t = &s.th[i];

		t->s = &s;
		t->index = i;
		t->nflows = (c->flows - i + c->threads - 1) / c->threads;
		t->flow_sent = calloc(t->nflows, sizeof(*t->flow_sent));
		t->flow_seq = calloc(t->nflows, sizeof(*t->flow_seq));
		if (!t->flow_sent || !t->flow_seq) {
			fprintf(stderr, "sfcgen send: Failed to allocate flow state: %s\n",
				strerror(errno));
			goto cleanup;
		}
	}
	pthread_mutex_init(&s.gate_lock, NULL);
	pthread_cond_init(&s.gate_cond, NULL);
	gate = true;
	for (; started < c->threads; started++) {
		int err = pthread_create(&s.th[started].tid, NULL, send_thread_main, &s.th[started]);

		if (err) {
			fprintf(stderr, "sfcgen send: Failed to start a thread: %s\n", strerror(err));
			break;
		}
	}
	pthread_mutex_lock(&s.gate_lock);
	while (s.gate_ready < started)
		pthread_cond_wait(&s.gate_cond, &s.gate_lock);
	/* a failed start: let the others go at once with no time left */
	s.t0 = now_ns() + (started < c->threads ? -(int64_t)(c->duration * NSEC) - NSEC : 100000);
	s.gate_open = true;
	pthread_cond_broadcast(&s.gate_cond);
	pthread_mutex_unlock(&s.gate_lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(s.th[i].tid, NULL);
	if (started < c->threads)
		goto cleanup;

	for (unsigned i = 0; i < started; i++) {
		struct send_thread *t = &s.th[i];

		if (t->err) {
			fprintf(stderr, "sfcgen send: %s\n", t->errmsg);
			goto cleanup;
		}
		for (unsigned k = 0; k < t->nflows; k++)
			flow_sent[i + k * c->threads] = t->flow_sent[k];
		sent += t->sent;
		bytes += t->bytes;
		errors += t->errors;
		local_drops += t->local_drops;
		if (t->end_ns > end)
			end = t->end_ns;
	}
	if (s.engine == ENGINE_XDP) {
		uint64_t after = 0;

		/* frames the device could not pass on: the peer's queue was full */
		if (!dev_xdp_tx_lost(s.path.ifname, &after) && after > xmit_errors)
			local_drops = after - xmit_errors;
		if (xdp_tx_flow_sent(s.xdp, flow_sent, c->flows)) {
			fprintf(stderr, "sfcgen send: Failed to read the per-flow counters: %s\n",
				strerror(errno));
			goto cleanup;
		}
		if (have_peer_rx) {
			uint64_t rx = peer_rx;

			/* a veth whose peer runs no NAPI drops XDP frames without counting them */
			usleep(20000);
			if (!veth_peer_rx_packets(s.path.ifname, &rx) && rx == peer_rx && sent)
				local_drops = sent;
		}
		if (sent && local_drops >= sent) {
			fprintf(stderr, "sfcgen send: %s transmitted none of the %" PRIu64 " XDP frames: "
				"the interface at its other end takes XDP frames only with an XDP program "
				"or, for a veth, with GRO on (ethtool -K PEER gro on); or use --engine packet\n",
				s.path.ifname, sent);
			goto cleanup;
		}
	}
	{
		double dur = (double)(end - s.t0) / NSEC;

		if (dur <= 0)
			dur = 1e-9;
		printf("{\"event\":\"sent\",\"engine\":\"%s\",\"sent\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"errors\":%" PRIu64 ",\"local_drops\":%" PRIu64
		       ",\"duration_s\":%.6f,\"achieved_pps\":%.1f,\"qdisc_bypass\":%s,",
		       engine_names[s.engine], sent, bytes, errors, local_drops, dur, (double)sent / dur,
		       (c->qdisc_bypass && s.engine != ENGINE_UDP) || s.engine == ENGINE_XDP ? "true"
											     : "false");
		if (c->rate > 0)
			printf("\"offered_pps\":%.1f,", c->rate);
		else
			printf("\"offered_pps\":null,");
		if (c->size)
			printf("\"size\":%u,", c->size);
		else
			printf("\"size\":\"imix\",");
		printf("\"threads\":%u,\"flows\":%u,\"ramp_s\":%g,\"run\":%u,", c->threads, c->flows,
		       c->ramp, c->run);
		if (s.engine != ENGINE_UDP)
			printf("\"dev\":\"%s\",", s.path.ifname);
		if (why[0])
			printf("\"fallback\":\"%s\",", why);
		if (note[0])
			printf("\"note\":\"%s\",", note);
		printf("\"per_flow_sent\":");
		print_u64_array(flow_sent, c->flows);
		printf("}\n");
		fflush(stdout);
	}
	ret = 0;
cleanup:
	if (gate) {
		pthread_cond_destroy(&s.gate_cond);
		pthread_mutex_destroy(&s.gate_lock);
	}
	if (s.th)
		for (unsigned i = 0; i < c->threads; i++) {
			free(s.th[i].flow_sent);
			free(s.th[i].flow_seq);
		}
	free(s.th);
	free(flow_sent);
	xdp_tx_close(s.xdp);
	return ret;
}

/* ------------------------------------------------------------------------------------------ */
/* Sink                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Latency histogram: the layout (HIST_*) is in bpf/sfcgen_shared.h, the XDP sink fills it too. */
static unsigned hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < (1u << HIST_SUB_BITS))
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	if (msb > HIST_MAX_MSB) {
		v = (1ull << (HIST_MAX_MSB + 1)) - 1;
		msb = HIST_MAX_MSB;
	}
	shift = msb - (HIST_SUB_BITS - 1);
	return shift * HIST_HALF + (unsigned)(v >> shift);
}

/* The middle of bucket i's value range, in ns. */
static double hist_value(unsigned i)
{
	unsigned shift, m;

	if (i < (1u << HIST_SUB_BITS))
		return i;
	shift = i / HIST_HALF - 1;
	m = i - shift * HIST_HALF;
	return ((double)((uint64_t)m << shift) + (double)((uint64_t)(m + 1) << shift) - 1) / 2;
}

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
};

struct sink_thread {
	pthread_t tid;
	int fd;
	pthread_mutex_t lock;
	struct flow_state *flows;
	struct sink_stats st;
	uint32_t last_ovfl;
	bool have_ovfl;
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

static void stats_reset(struct sink_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->lat_min = UINT64_MAX;
}

#define RX_BATCH 64u
#define RX_BUF 2048u

static void *sink_thread_main(void *arg)
{
	struct sink_thread *t = ((void **)arg)[0];
	struct sink *k = ((void **)arg)[1];
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	static __thread uint8_t bufs[RX_BATCH][RX_BUF];
	static __thread char ctl[RX_BATCH][CMSG_SPACE(sizeof(uint32_t))];

	free(arg);
	pin_thread(&k->cpus, (unsigned)(t - k->th));
	for (unsigned i = 0; i < RX_BATCH; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = RX_BUF;
	}
	while (!atomic_load_explicit(&k->stop, memory_order_relaxed)) {
		int n;
		int64_t now;

		for (unsigned i = 0; i < RX_BATCH; i++) {
			memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_control = ctl[i];
			msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i]);
		}
		n = recvmmsg(t->fd, msgs, RX_BATCH, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			t->err = errno;
			break;
		}
		if (n == 0)
			continue;
		now = now_ns();
		pthread_mutex_lock(&t->lock);
		if (!t->st.first_ns)
			t->st.first_ns = now;
		t->st.last_ns = now;
		for (int i = 0; i < n; i++) {
			const struct probe *p = (const struct probe *)bufs[i];
			unsigned len = msgs[i].msg_len;
			struct cmsghdr *cm;
			uint64_t lat;

			for (cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
			     cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
				if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
					uint32_t d;

					memcpy(&d, CMSG_DATA(cm), sizeof(d));
					if (t->have_ovfl)
						t->st.socket_drops += (uint32_t)(d - t->last_ovfl);
					t->last_ovfl = d;
					t->have_ovfl = true;
				}
			}
			if (len < sizeof(struct probe) || p->magic != PROBE_MAGIC || p->flow >= k->flows) {
				t->st.invalid++;
				continue;
			}
			t->st.received++;
			t->st.bytes += len + WIRE_OVERHEAD;
			flow_account(&t->flows[p->flow], p->run, p->seq);
			lat = (int64_t)p->ts_ns < now ? (uint64_t)(now - (int64_t)p->ts_ns) : 0;
			t->st.hist[hist_index(lat)]++;
			t->st.lat_count++;
			t->st.lat_sum += (double)lat;
			if (lat > t->st.lat_max)
				t->st.lat_max = lat;
			if (lat < t->st.lat_min)
				t->st.lat_min = lat;
		}
		pthread_mutex_unlock(&t->lock);
	}
	return NULL;
}

static double hist_percentile(const uint64_t *h, uint64_t count, double q, uint64_t max)
{
	uint64_t want = (uint64_t)ceil(q * (double)count), acc = 0;
	double v;

	if (!count)
		return 0;
	if (want < 1)
		want = 1;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		acc += h[i];
		if (acc >= want) {
			v = hist_value(i);
			return v > (double)max ? (double)max : v;
		}
	}
	return (double)max;
}

/* The XDP sink's counters in the socket sink's shape. */
static int sink_collect_xdp(struct sink *k, struct sink_stats *all, uint64_t *received,
			    uint64_t *reordered, uint64_t *duplicated, uint64_t *highest, bool reset)
{
	struct xdp_sink_totals *sum = malloc(sizeof(*sum));
	struct flow_state *fl = calloc(k->flows, sizeof(*fl));
	int ret = -1;

	if (!sum || !fl || xdp_sink_read(k->xdp, sum, fl, reset)) {
		fprintf(stderr, "sfcgen sink: Failed to read the XDP counters: %s\n", strerror(errno));
		goto out;
	}
	all->received = sum->received;
	all->bytes = sum->bytes;
	all->invalid = sum->invalid;
	all->lat_count = sum->lat_count;
	all->lat_sum = (double)sum->lat_sum_ns;
	all->lat_max = sum->lat_max_ns;
	all->lat_min = sum->lat_count ? sum->lat_min_ns : UINT64_MAX;
	all->first_ns = (int64_t)sum->first_ns;
	all->last_ns = (int64_t)sum->last_ns;
	memcpy(all->hist, sum->hist, sizeof(all->hist));
	for (unsigned f = 0; f < k->flows; f++) {
		received[f] = fl[f].received;
		reordered[f] = fl[f].reordered;
		duplicated[f] = fl[f].duplicated;
		highest[f] = fl[f].seen ? fl[f].max_seq + 1ull : 0; /* stored +1: 0 means none seen */
	}
	ret = 0;
out:
	free(sum);
	free(fl);
	return ret;
}

/* Print one JSON line of every counter since the last reset, then reset if asked. */
static int sink_report(struct sink *k, const char *event, uint64_t number, int64_t *since,
		       bool reset)
{
	struct sink_stats *all = NULL;
	uint64_t *received = NULL, *reordered = NULL, *duplicated = NULL, *highest = NULL;
	uint64_t tot_reo = 0, tot_dup = 0;
	int64_t now = now_ns();
	int ret = -1;

	all = calloc(1, sizeof(*all));
	received = calloc(k->flows, sizeof(*received));
	reordered = calloc(k->flows, sizeof(*reordered));
	duplicated = calloc(k->flows, sizeof(*duplicated));
	highest = calloc(k->flows, sizeof(*highest));
	if (!all || !received || !reordered || !duplicated || !highest) {
		fprintf(stderr, "sfcgen sink: Failed to allocate a snapshot: %s\n", strerror(errno));
		goto cleanup;
	}
	stats_reset(all);
	if (k->xdp && sink_collect_xdp(k, all, received, reordered, duplicated, highest, reset))
		goto cleanup;
	for (unsigned i = 0; !k->xdp && i < k->threads; i++) {
		struct sink_thread *t = &k->th[i];

		pthread_mutex_lock(&t->lock);
		all->received += t->st.received;
		all->bytes += t->st.bytes;
		all->invalid += t->st.invalid;
		all->socket_drops += t->st.socket_drops;
		all->lat_count += t->st.lat_count;
		all->lat_sum += t->st.lat_sum;
		if (t->st.lat_max > all->lat_max)
			all->lat_max = t->st.lat_max;
		if (t->st.lat_min < all->lat_min)
			all->lat_min = t->st.lat_min;
		if (t->st.first_ns && (!all->first_ns || t->st.first_ns < all->first_ns))
			all->first_ns = t->st.first_ns;
		if (t->st.last_ns > all->last_ns)
			all->last_ns = t->st.last_ns;
		for (unsigned b = 0; b < HIST_BUCKETS; b++)
			all->hist[b] += t->st.hist[b];
		for (unsigned f = 0; f < k->flows; f++) {
			struct flow_state *fs = &t->flows[f];

			received[f] += fs->received;
			reordered[f] += fs->reordered;
			duplicated[f] += fs->duplicated;
			if (fs->seen && fs->max_seq + 1ull > highest[f])
				highest[f] = fs->max_seq + 1ull; /* stored +1: 0 means none seen */
			if (reset)
				memset(fs, 0, sizeof(*fs));
		}
		if (reset)
			stats_reset(&t->st);
		pthread_mutex_unlock(&t->lock);
	}
	for (unsigned f = 0; f < k->flows; f++) {
		tot_reo += reordered[f];
		tot_dup += duplicated[f];
	}
	printf("{\"event\":\"%s\",\"mode\":\"%s\",\"number\":%" PRIu64
	       ",\"interval_s\":%.6f,\"received\":%" PRIu64
	       ",\"bytes\":%" PRIu64 ",\"invalid\":%" PRIu64 ",\"socket_drops\":%" PRIu64
	       ",\"reordered\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"rx_span_s\":%.6f,",
	       event, k->xdp ? "xdp" : "socket", number, (double)(now - *since) / NSEC, all->received, all->bytes, all->invalid,
	       all->socket_drops, tot_reo, tot_dup,
	       all->first_ns ? (double)(all->last_ns - all->first_ns) / NSEC : 0.0);
	if (all->lat_count) {
		printf("\"latency_us\":{\"count\":%" PRIu64 ",\"min\":%.3f,\"mean\":%.3f,\"p50\":%.3f,"
		       "\"p90\":%.3f,\"p99\":%.3f,\"p99.9\":%.3f,\"max\":%.3f},",
		       all->lat_count, (double)all->lat_min / 1e3, all->lat_sum / all->lat_count / 1e3,
		       hist_percentile(all->hist, all->lat_count, 0.50, all->lat_max) / 1e3,
		       hist_percentile(all->hist, all->lat_count, 0.90, all->lat_max) / 1e3,
		       hist_percentile(all->hist, all->lat_count, 0.99, all->lat_max) / 1e3,
		       hist_percentile(all->hist, all->lat_count, 0.999, all->lat_max) / 1e3,
		       (double)all->lat_max / 1e3);
	} else {
		printf("\"latency_us\":{\"count\":0},");
	}
	printf("\"flows\":%u,\"per_flow\":{\"received\":", k->flows);
	print_u64_array(received, k->flows);
	printf(",\"reordered\":");
	print_u64_array(reordered, k->flows);
	printf(",\"duplicated\":");
	print_u64_array(duplicated, k->flows);
	printf(",\"highest_seq\":[");
	for (unsigned f = 0; f < k->flows; f++) {
		if (highest[f])
			printf(f ? ",%" PRIu64 : "%" PRIu64, highest[f] - 1);
		else
			printf(f ? ",null" : "null");
	}
	printf("]}}\n");
	fflush(stdout);
	if (reset)
		*since = now;
	ret = 0;
cleanup:
	free(all);
	free(received);
	free(reordered);
	free(duplicated);
	free(highest);
	return ret;
}

static int cmd_sink(int argc, char **argv)
{
	static const struct option opts[] = {
		{"port", required_argument, NULL, 'p'},
		{"flows", required_argument, NULL, 'f'},
		{"threads", required_argument, NULL, 'j'},
		{"bind", required_argument, NULL, 'a'},
		{"cpus", required_argument, NULL, 'c'},
		{"xdp", no_argument, NULL, 'X'},
		{"xdp-dev", required_argument, NULL, 'D'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct sink k;
	bool xdp = false;
	const char *xdp_dev = NULL;
	char why[256] = "";
	struct in_addr bind_addr = {.s_addr = htonl(INADDR_ANY)};
	unsigned long v;
	unsigned started = 0, opened = 0;
	bool have_port = false;
	sigset_t sigs;
	int64_t since;
	uint64_t number = 0;
	int opt, ret = 1;

	memset(&k, 0, sizeof(k));
	k.flows = 1;
	k.threads = 1;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (parse_uint(optarg, "--port", 1, 65535, &v))
				return 2;
			k.port = (unsigned)v;
			have_port = true;
			break;
		case 'f':
			if (parse_uint(optarg, "--flows", 1, MAX_FLOWS, &v))
				return 2;
			k.flows = (unsigned)v;
			break;
		case 'j':
			if (parse_uint(optarg, "--threads", 1, MAX_THREADS, &v))
				return 2;
			k.threads = (unsigned)v;
			break;
		case 'a':
			if (!inet_aton(optarg, &bind_addr)) {
				fprintf(stderr, "sfcgen: invalid --bind '%s'\n", optarg);
				return 2;
			}
			break;
		case 'c':
			if (parse_cpus(optarg, &k.cpus))
				return 2;
			break;
		case 'X':
			xdp = true;
			break;
		case 'D':
			xdp = true;
			xdp_dev = optarg;
			break;
		case 'h':
			printf("usage: sfcgen sink --port PORT [--flows N] [--threads N] [--bind IP] [--cpus LIST]\n"
			       "       sfcgen sink --port PORT [--flows N] --xdp [--xdp-dev IFNAME[,IFNAME]]\n"
			       "  SIGUSR1: print a JSON snapshot and reset; SIGTERM/SIGINT: print and exit\n"
			       "  --xdp: count and drop the probes in an XDP program on the receiving\n"
			       "  interfaces (default: every one but loopback) instead of a UDP socket\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sfcgen: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!have_port) {
		fprintf(stderr, "sfcgen sink: --port is required\n");
		return 2;
	}

	/* every thread inherits this mask; only the main thread takes these signals */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	if (xdp) {
		k.xdp = xdp_sink_open(k.port, k.flows, xdp_dev, why, sizeof(why));
		if (!k.xdp) {
			fprintf(stderr, "sfcgen sink: Failed to set up the XDP sink: %s\n", why);
			goto cleanup;
		}
		k.threads = 0;
	}
	k.th = calloc(k.threads ? k.threads : 1, sizeof(*k.th));
	if (!k.th) {
		fprintf(stderr, "sfcgen sink: Failed to allocate thread state: %s\n", strerror(errno));
		goto cleanup;
	}
	for (; opened < k.threads; opened++) {
		struct sink_thread *t = &k.th[opened];
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)k.port),
					.sin_addr = bind_addr};
		struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
		int one = 1, rcvbuf = 16 << 20;

		t->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (t->fd < 0) {
			fprintf(stderr, "sfcgen sink: Failed to create a UDP socket: %s\n",
				strerror(errno));
			goto cleanup;
		}
		pthread_mutex_init(&t->lock, NULL);
		stats_reset(&t->st);
		t->flows = calloc(k.flows, sizeof(*t->flows));
		if (!t->flows) {
			fprintf(stderr, "sfcgen sink: Failed to allocate flow state: %s\n",
				strerror(errno));
			opened++;
			goto cleanup;
		}
		if (setsockopt(t->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
		    setsockopt(t->fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)) ||
		    setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
			fprintf(stderr, "sfcgen sink: Failed to set socket options: %s\n",
				strerror(errno));
			opened++;
			goto cleanup;
		}
		if (setsockopt(t->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
			setsockopt(t->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		if (bind(t->fd, (struct sockaddr *)&a, sizeof(a))) {
			fprintf(stderr, "sfcgen sink: Failed to bind UDP port %u: %s\n", k.port,
				strerror(errno));
			opened++;
			goto cleanup;
		}
	}
	for (; started < k.threads; started++) {
		void **arg = malloc(2 * sizeof(void *));
		int err;

		if (!arg) {
			fprintf(stderr, "sfcgen sink: Failed to allocate: %s\n", strerror(errno));
			goto cleanup;
		}
		arg[0] = &k.th[started];
		arg[1] = &k;
		err = pthread_create(&k.th[started].tid, NULL, sink_thread_main, arg);
		if (err) {
			free(arg);
			fprintf(stderr, "sfcgen sink: Failed to start a thread: %s\n", strerror(err));
			goto cleanup;
		}
	}
	since = now_ns();
	printf("{\"event\":\"ready\",\"mode\":\"%s\",\"port\":%u,\"flows\":%u,\"threads\":%u,"
	       "\"pid\":%d", k.xdp ? "xdp" : "socket", k.port, k.flows, k.threads, (int)getpid());
	if (k.xdp)
		printf(",\"xdp\":%s", xdp_sink_where(k.xdp));
	printf("}\n");
	fflush(stdout);

	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&sigs, &si);

		if (sig < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "sfcgen sink: Failed to wait for signals: %s\n", strerror(errno));
			goto cleanup;
		}
		if (sig == SIGUSR1) {
			if (sink_report(&k, "snapshot", ++number, &since, true))
				goto cleanup;
			continue;
		}
		break; /* SIGTERM, SIGINT, SIGHUP */
	}
	atomic_store(&k.stop, true);
	for (unsigned i = 0; i < started; i++)
		shutdown(k.th[i].fd, SHUT_RDWR); /* wakes a blocked recvmmsg */
	for (unsigned i = 0; i < started; i++)
		pthread_join(k.th[i].tid, NULL);
	started = 0;
	if (sink_report(&k, "final", ++number, &since, false))
		goto cleanup;
	for (unsigned i = 0; i < k.threads; i++)
		if (k.th[i].err)
			fprintf(stderr, "sfcgen sink: receive failed: %s\n", strerror(k.th[i].err));
	ret = 0;
cleanup:
	if (started) {
		atomic_store(&k.stop, true);
		for (unsigned i = 0; i < started; i++)
			shutdown(k.th[i].fd, SHUT_RDWR);
		for (unsigned i = 0; i < started; i++)
			pthread_join(k.th[i].tid, NULL);
	}
	for (unsigned i = 0; i < opened; i++) {
		if (k.th[i].fd >= 0)
			close(k.th[i].fd);
		free(k.th[i].flows);
		pthread_mutex_destroy(&k.th[i].lock);
	}
	free(k.th);
	xdp_sink_close(k.xdp);
	return ret;
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
