// SPDX-License-Identifier: Apache-2.0
/* The sending engines (packet, ring, udp, xdp) as table entries, the one send loop that runs
 * them (send_loop), their pacing and the start gate. */
#define _GNU_SOURCE
#include "sfcgen.h"

#include <netinet/ip6.h>

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
 * thread is done (deadline passed or every planned packet sent).  n counts the packets of the
 * plan used up (sent or skipped); more than `late` due at once means the thread was not run
 * for a while; *behind keeps the most that were due at once inside the window, *skip says how
 * many of the plan to pass over unsent now.
 */
static int64_t pace(const struct sender *s, double rate, uint64_t n, uint64_t planned,
		    int64_t now, uint64_t late, uint64_t *behind, uint64_t *skip)
{
	int64_t el = now - s->t0;
	uint64_t due;

	if (rate <= 0)
		return el >= (int64_t)(s->cfg.duration * NSEC) ? -1 : (int64_t)s->chunk;
	/* packets already due when the deadline passes (a late wake-up) still go, within a grace */
	if (n >= planned || el >= (int64_t)(s->cfg.duration * NSEC) + PACE_GRACE_NS)
		return -1;
	due = due_packets(s, rate, el, planned);
	if (due > n && due - n > *behind && now >= s->win_start)
		*behind = due - n;
	if (due > n && due - n > late) {
		/* not run for a while: what fell due before the last CATCHUP_FRAMES is not sent
		 * at all, rather than back to back, a burst the chain's first hop was never
		 * offered at the rate (a veth's XDP ring holds 256 frames) */
		*skip = due - n - CATCHUP_FRAMES;
		n += *skip;
	}
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

/*
 * The send-loop skeleton and the engines as table entries.  send_loop() runs every engine the
 * same way: open (sockets, templates), the start gate, then until pace() says done: ask pace()
 * how many packets are due and hand them to the engine's burst(); then the gate again (a
 * thread that failed early must not hold the others), the end time, and close.  An engine is one struct send_engine.
 */
struct ring_state {
	struct ring r;
	struct sockaddr_ll to;
	uint8_t templ[3][64];
	unsigned templ_size[3], ntempl;
	unsigned owned; /* the owned flow of the next frame */
};

struct mmsg_state {
	struct sockaddr_ll to; /* packet engine; unused by udp */
	struct mmsghdr msgs[MAX_BATCH];
	struct iovec iov[MAX_BATCH];
	uint8_t (*bufs)[MAX_FRAME];
	unsigned msg_flow[MAX_BATCH];
	int fd;   /* packet engine */
	int *fds; /* udp engine: one connected socket per owned flow */
	unsigned owned; /* the owned flow of the next packet (udp: of the next batch) */
};

struct xdp_state {
	uint8_t *frame;
	unsigned size;
};

union engine_state {
	struct ring_state ring;
	struct mmsg_state mmsg;
	struct xdp_state xdp;
};

struct send_engine {
	/* Make what the loop needs; 0, or -1 after th_fail(). */
	int (*open)(struct send_thread *t, union engine_state *e);
	/*
	 * Send up to want packets (want >= 1) stamped at now, starting with the thread's packet
	 * n; returns how many packets of the plan this burst used up (0: none, try again), or -1
	 * after th_fail().  Counting sent, bytes, sent_window and per-flow figures is its job.
	 */
	int64_t (*burst)(struct send_thread *t, union engine_state *e, uint64_t want, uint64_t n,
			 int64_t now);
	/* Undo open (also after a failed open); the skeleton has already set end_ns. */
	void (*close)(struct send_thread *t, union engine_state *e);
	/* at a paced rate, the least time between two bursts (0: none); what falls due meanwhile
	 * goes in the next burst */
	int64_t min_gap_ns;
};

/* The next owned flow's index, round-robin. */
static inline unsigned next_owned(const struct send_thread *t, unsigned owned)
{
	return owned + 1 == t->nflows ? 0 : owned + 1;
}

/* Stamp a probe: flow, its sequence number, the send time and whether inside the window. */
static inline void stamp_probe(struct probe *p, const struct sender *s, unsigned flow,
			       uint32_t seq, int64_t now)
{
	p->magic = now >= s->win_start ? PROBE_MAGIC_WINDOW : PROBE_MAGIC;
	p->run = s->cfg.run;
	p->flow = (uint16_t)flow;
	p->seq = seq;
	p->ts_ns = (uint64_t)now;
}

static void link_dst(const struct sender *s, struct sockaddr_ll *to)
{
	memset(to, 0, sizeof(*to));
	to->sll_family = AF_PACKET;
	to->sll_protocol = htons(s->cfg.family == AF_INET6 ? ETH_P_IPV6 : ETH_P_IP);
	to->sll_ifindex = s->path.ifindex;
	to->sll_halen = 6;
	memcpy(to->sll_addr, s->path.dst_mac, 6);
}

/* ---- ring: AF_PACKET with a TX_RING ---------------------------------------------------- */

static int ring_engine_open(struct send_thread *t, union engine_state *u)
{
	struct ring_state *e = &u->ring;
	const struct sender *s = t->s;

	e->r.fd = -1;
	link_dst(s, &e->to);
	e->ntempl = s->cfg.size ? 1 : 3;
	if (e->ntempl == 1) {
		e->templ_size[0] = s->cfg.size;
	} else {
		e->templ_size[0] = 64;
		e->templ_size[1] = 594;
		e->templ_size[2] = 1518;
	}
	for (unsigned i = 0; i < e->ntempl; i++)
		build_headers(e->templ[i], s, e->templ_size[i]);
	return ring_open(t, &e->r);
}

/* Fill free ring slots with up to want frames; returns how many (0: the ring is full). */
static unsigned ring_fill(struct send_thread *t, struct ring_state *e, uint64_t want, uint64_t n,
			  int64_t now, unsigned *owned)
{
	const struct sender *s = t->s;
	const unsigned hdr_off = TPACKET_ALIGN(sizeof(struct tpacket2_hdr));
	struct ring *r = &e->r;
	unsigned filled = 0;

	for (; filled < want; filled++) {
		unsigned i = r->head;
		struct tpacket2_hdr *h = ring_frame(r, i);
		uint8_t *f = (uint8_t *)h + hdr_off;
		unsigned size = frame_size_at(&s->cfg, n + filled), ti = 0;
		unsigned flow = t->index + *owned * s->cfg.threads;

		if (h->tp_status != TP_STATUS_AVAILABLE)
			break; /* still owned by the kernel */
		if (e->ntempl == 3)
			ti = size == 64 ? 0 : size == 594 ? 1 : 2;
		memcpy(f, e->templ[ti], probe_off(s->cfg.family));
		((struct udphdr *)(f + udp_off(s->cfg.family)))->source =
			htons((uint16_t)(SPORT_BASE + flow));
		stamp_probe((struct probe *)(f + probe_off(s->cfg.family)), s, flow,
			    t->flow_seq[*owned]++, now);
		if (s->cfg.family == AF_INET6)
			udp6_checksum(f);
		h->tp_len = size - 4;
		r->slot_flow[i] = (int16_t)*owned;
		__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
		r->head = (i + 1) % r->nframes;
		*owned = next_owned(t, *owned);
	}
	return filled;
}

static int64_t ring_engine_burst(struct send_thread *t, union engine_state *u, uint64_t want,
				 uint64_t n, int64_t now)
{
	struct ring_state *e = &u->ring;
	struct ring *r = &e->r;
	unsigned first = r->head, filled = ring_fill(t, e, want, n, now, &e->owned);
	uint64_t before = t->sent;

	if (!filled) {
		struct pollfd pfd = {.fd = r->fd, .events = POLLOUT};

		poll(&pfd, 1, 1);
		return 0;
	}
	if (sendto(r->fd, NULL, 0, 0, (struct sockaddr *)&e->to, sizeof(e->to)) < 0 &&
	    errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
		th_fail(t, errno, "send frames on the packet socket");
		return -1;
	}
	/* blocking sendto returns once the kernel has taken the frames */
	for (unsigned k = 0; k < filled; k++) {
		struct tpacket2_hdr *h = ring_frame(r, (first + k) % r->nframes);
		int spins = 0;

		while (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) &
		       (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING)) {
			if (++spins > 1000) {
				struct pollfd pfd = {.fd = r->fd, .events = POLLOUT};

				poll(&pfd, 1, 1);
				sendto(r->fd, NULL, 0, MSG_DONTWAIT, (struct sockaddr *)&e->to,
				       sizeof(e->to));
			}
		}
	}
	ring_reap(t, r, first, filled);
	if (now >= t->s->win_start)
		t->sent_window += t->sent - before;
	return filled;
}

static void ring_engine_close(struct send_thread *t, union engine_state *u)
{
	(void)t;
	ring_close(&u->ring.r);
}

/* ---- packet: AF_PACKET with sendmmsg --------------------------------------------------- */

/* The batch's messages over bufs, each addressed to `to` (NULL: a connected socket). */
static int mmsg_prepare(struct send_thread *t, struct mmsg_state *e, struct sockaddr_ll *to)
{
	e->bufs = calloc(t->s->cfg.batch, sizeof(*e->bufs));
	if (!e->bufs) {
		th_fail(t, errno, "allocate send buffers");
		return -1;
	}
	for (unsigned i = 0; i < t->s->cfg.batch; i++) {
		memset(&e->msgs[i], 0, sizeof(e->msgs[i]));
		e->iov[i].iov_base = e->bufs[i];
		e->msgs[i].msg_hdr.msg_iov = &e->iov[i];
		e->msgs[i].msg_hdr.msg_iovlen = 1;
		if (to) {
			e->msgs[i].msg_hdr.msg_name = to;
			e->msgs[i].msg_hdr.msg_namelen = sizeof(*to);
		}
	}
	return 0;
}

static int packet_engine_open(struct send_thread *t, union engine_state *u)
{
	struct mmsg_state *e = &u->mmsg;
	const struct sender *s = t->s;
	int one = 1, sndbuf = 4 << 20;

	e->fd = -1;
	link_dst(s, &e->to);
	if (mmsg_prepare(t, e, &e->to))
		return -1;
	e->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); /* protocol 0: never receives */
	if (e->fd < 0) {
		th_fail(t, errno, "create packet socket");
		return -1;
	}
	if (s->cfg.qdisc_bypass &&
	    setsockopt(e->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one))) {
		th_fail(t, errno, "set PACKET_QDISC_BYPASS");
		return -1;
	}
	if (setsockopt(e->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
		setsockopt(e->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	return 0;
}

/*
 * Prebuilt frames, one syscall per batch.  A frame that a qdisc of the egress device drops
 * (ENOBUFS) counts as sent and lost, as it does for UDP sockets.
 */
static int64_t packet_engine_burst(struct send_thread *t, union engine_state *u, uint64_t want,
				   uint64_t n, int64_t now)
{
	struct mmsg_state *e = &u->mmsg;
	const struct sender *s = t->s;
	unsigned off = 0, owned = e->owned;

	for (unsigned i = 0; i < want; i++) {
		unsigned size = frame_size_at(&s->cfg, n + i);
		unsigned flow = t->index + owned * s->cfg.threads;

		build_headers(e->bufs[i], s, size);
		((struct udphdr *)(e->bufs[i] + udp_off(s->cfg.family)))->source =
			htons((uint16_t)(SPORT_BASE + flow));
		stamp_probe((struct probe *)(e->bufs[i] + probe_off(s->cfg.family)), s, flow,
			    t->flow_seq[owned]++, now);
		if (s->cfg.family == AF_INET6)
			udp6_checksum(e->bufs[i]);
		e->iov[i].iov_len = size - 4;
		e->msg_flow[i] = owned;
		owned = next_owned(t, owned);
	}
	while (off < want) {
		int done = sendmmsg(e->fd, e->msgs + off, (unsigned)(want - off), 0);

		if (done < 0) {
			if (errno == EINTR)
				continue;
			if (errno != ENOBUFS && errno != EAGAIN) {
				th_fail(t, errno, "send frames on the packet socket");
				return -1;
			}
			/* the first frame was refused by the local qdisc: it is lost */
			t->local_drops++;
			done = 1;
		}
		for (int i = 0; i < done; i++) {
			t->flow_sent[e->msg_flow[off + i]]++;
			t->bytes += e->iov[off + i].iov_len + 4;
		}
		t->sent += (uint64_t)done;
		if (now >= s->win_start)
			t->sent_window += (uint64_t)done;
		off += (unsigned)done;
	}
	e->owned = owned;
	return (int64_t)want;
}

static void packet_engine_close(struct send_thread *t, union engine_state *u)
{
	(void)t;
	if (u->mmsg.fd >= 0)
		close(u->mmsg.fd);
	free(u->mmsg.bufs);
}

/* ---- udp: connected UDP sockets, one per flow, and sendmmsg ---------------------------- */

/* The socket addresses of flow's source and of the destination, in the family of --dst. */
static socklen_t udp_addrs(const struct sender *s, unsigned flow, struct sockaddr_storage *src,
			   struct sockaddr_storage *dst)
{
	memset(src, 0, sizeof(*src));
	memset(dst, 0, sizeof(*dst));
	if (s->cfg.family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)src, *b = (struct sockaddr_in6 *)dst;

		a->sin6_family = b->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)(SPORT_BASE + flow));
		if (s->cfg.have_src)
			a->sin6_addr = s->cfg.src6;
		b->sin6_port = htons((uint16_t)s->cfg.dport);
		b->sin6_addr = s->cfg.dst6;
		return sizeof(*a);
	}
	struct sockaddr_in *a = (struct sockaddr_in *)src, *b = (struct sockaddr_in *)dst;

	a->sin_family = b->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)(SPORT_BASE + flow));
	if (s->cfg.have_src)
		a->sin_addr = s->cfg.src;
	b->sin_port = htons((uint16_t)s->cfg.dport);
	b->sin_addr = s->cfg.dst;
	return sizeof(*a);
}

static int udp_socket(struct send_thread *t, unsigned flow, int *fd)
{
	const struct sender *s = t->s;
	struct sockaddr_storage src, dst;
	socklen_t alen = udp_addrs(s, flow, &src, &dst);
	int one = 1, sndbuf = 4 << 20;

	*fd = socket(s->cfg.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (*fd < 0) {
		th_fail(t, errno, "create UDP socket");
		return -1;
	}
	setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s->cfg.family == AF_INET6)
		setsockopt(*fd, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof(one));
	else
		setsockopt(*fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
	if (setsockopt(*fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
		setsockopt(*fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (bind(*fd, (struct sockaddr *)&src, alen)) {
		th_fail(t, errno, "bind UDP source port");
		return -1;
	}
	if (connect(*fd, (struct sockaddr *)&dst, alen)) {
		th_fail(t, errno, "connect UDP socket");
		return -1;
	}
	return 0;
}

static int udp_engine_open(struct send_thread *t, union engine_state *u)
{
	struct mmsg_state *e = &u->mmsg;

	e->fd = -1;
	e->fds = calloc(t->nflows, sizeof(*e->fds));
	if (!e->fds) {
		th_fail(t, errno, "allocate send buffers");
		return -1;
	}
	for (unsigned k = 0; k < t->nflows; k++)
		e->fds[k] = -1;
	if (mmsg_prepare(t, e, NULL))
		return -1;
	for (unsigned k = 0; k < t->nflows; k++)
		if (udp_socket(t, t->index + k * t->s->cfg.threads, &e->fds[k]))
			return -1;
	return 0;
}

/* One batch per flow: a connected socket carries one source port. */
static int64_t udp_engine_burst(struct send_thread *t, union engine_state *u, uint64_t want,
				uint64_t n, int64_t now)
{
	struct mmsg_state *e = &u->mmsg;
	const struct sender *s = t->s;
	unsigned owned = e->owned;
	unsigned flow = t->index + owned * s->cfg.threads;
	int done;

	for (unsigned i = 0; i < want; i++) {
		unsigned size = frame_size_at(&s->cfg, n + i);

		stamp_probe((struct probe *)e->bufs[i], s, flow, t->flow_seq[owned] + i, now);
		e->iov[i].iov_len = size - wire_overhead(s->cfg.family);
	}
	done = sendmmsg(e->fds[owned], e->msgs, (unsigned)want, 0);
	if (done < 0) {
		if (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED || errno == EINTR) {
			t->errors++;
			return 0;
		}
		th_fail(t, errno, "send UDP datagrams");
		return -1;
	}
	for (int i = 0; i < done; i++)
		t->bytes += e->iov[i].iov_len + wire_overhead(s->cfg.family);
	t->flow_seq[owned] += (uint32_t)done;
	t->flow_sent[owned] += (uint64_t)done;
	t->sent += (uint64_t)done;
	if (now >= s->win_start)
		t->sent_window += (uint64_t)done;
	e->owned = next_owned(t, owned);
	return done;
}

static void udp_engine_close(struct send_thread *t, union engine_state *u)
{
	if (u->mmsg.fds)
		for (unsigned k = 0; k < t->nflows; k++)
			if (u->mmsg.fds[k] >= 0)
				close(u->mmsg.fds[k]);
	free(u->mmsg.fds);
	free(u->mmsg.bufs);
}

/* ---- xdp: BPF_PROG_RUN live frames ---------------------------------------------------- */

/*
 * The kernel transmits `want` copies of one template frame per BPF_PROG_RUN call in
 * live-frames mode; bpf/sfcgen_tx.bpf.c stamps each copy (flow, sequence number, send time) as
 * it goes.  Each call makes a page pool whose memory id (one of 65,534 for the whole machine)
 * stays taken until the last of its frames comes back, a second or more after the call when
 * frames are still in flight at its end.  Paced at one frame per call, 40 kpps through a
 * labelled chain used them up within 9 s (BPF_PROG_RUN failed with ENOSPC); so at a paced rate
 * calls are at least XDP_MIN_GAP_NS apart, or the time XDP_GAP_FRAMES frames take if that is
 * less (bursts stay far below a veth's 256-frame ring), each sending what fell due meanwhile:
 * at most 10,000 calls a second up to 640 kpps; below 10 kpps nothing changes.  The template's IPv4 ID (IPv6: flow label) names this thread, so the program uses
 * this thread's flows.  An IPv6 template carries the UDP checksum of its zero probe and source
 * port; the program adds what it stamps to it.
 * No qdisc and no egress hook of the device sees these frames.
 */
static int xdp_engine_open(struct send_thread *t, union engine_state *u)
{
	static __thread uint8_t frame[MAX_FRAME];
	struct xdp_state *e = &u->xdp;
	const struct sender *s = t->s;
	struct iphdr *ip = (struct iphdr *)(frame + 14);

	e->frame = frame;
	e->size = s->cfg.size ? s->cfg.size : MAX_FRAME; /* imix: the program trims */
	memset(frame, 0, sizeof(frame));
	build_headers(frame, s, e->size);
	if (s->cfg.family == AF_INET6) {
		struct ip6_hdr *ip6 = (struct ip6_hdr *)(frame + 14);

		ip6->ip6_flow = htonl(6u << 28 | t->index);
		udp6_checksum(frame);
		return 0;
	}
	ip->id = htons((uint16_t)t->index);
	ip->check = 0;
	ip->check = ip_checksum(ip, 20);
	return 0;
}

static int64_t xdp_engine_burst(struct send_thread *t, union engine_state *u, uint64_t want,
				uint64_t n, int64_t now)
{
	const struct sender *s = t->s;
	int err = xdp_tx_send(s->xdp, s->path.ifindex, u->xdp.frame, u->xdp.size - 4,
			      (unsigned)want);

	(void)n;
	(void)now;
	if (err) {
		th_fail(t, -err, "send frames with BPF_PROG_RUN");
		return -1;
	}
	return (int64_t)want;
}

/* The program counted what this thread sent. */
static void xdp_engine_close(struct send_thread *t, union engine_state *u)
{
	(void)u;
	if (xdp_tx_thread_sent(t->s->xdp, t->index, &t->sent, &t->bytes, &t->sent_window))
		th_fail(t, errno, "read the generator's counters");
}

/* ---- the table and the skeleton ------------------------------------------------------- */

static const struct send_engine engines[] = {
	[ENGINE_RING] = {ring_engine_open, ring_engine_burst, ring_engine_close},
	[ENGINE_PACKET] = {packet_engine_open, packet_engine_burst, packet_engine_close},
	[ENGINE_UDP] = {udp_engine_open, udp_engine_burst, udp_engine_close},
	[ENGINE_XDP] = {xdp_engine_open, xdp_engine_burst, xdp_engine_close, XDP_MIN_GAP_NS},
};

static int send_loop(struct send_thread *t, const struct send_engine *eng)
{
	struct sender *s = t->s;
	union engine_state *e = calloc(1, sizeof(*e));
	double rate = s->cfg.rate / s->cfg.threads;
	uint64_t planned = 0, n = 0, late = CATCHUP_FRAMES;
	int64_t last = 0, gap = 0, call_ns = 0;
	int ret = -1;

	if (!e) {
		th_fail(t, errno, "allocate send state");
		goto cleanup;
	}
	if (eng->open(t, e))
		goto cleanup;
	if (rate > 0) {
		planned = planned_packets(s, rate);
		/* a burst of at most XDP_GAP_FRAMES frames per gap: far below a veth's ring */
		if (eng->min_gap_ns) {
			gap = (int64_t)fmin((double)eng->min_gap_ns, XDP_GAP_FRAMES * NSEC / rate);
			/* its calls come up to a few hundred microseconds apart at high rates: that
			 * much lateness is its pacing, not a stall */
			late = (uint64_t)fmax(CATCHUP_FRAMES, rate * STALL_NS / NSEC);
		}
	}

	gate_wait(t);
	for (;;) {
		uint64_t skip = 0;
		int64_t now = now_ns(), used;
		/* a send call that itself took long was held by the device (a qdisc of the
		 * sender's own interface that queues, a full ring): the sender is paced by it, not
		 * left behind, and what fell due meanwhile still goes, as the device takes it */
		int64_t w = pace(s, rate, n + t->skipped, planned, now,
				 call_ns < SEND_HELD_NS ? late : UINT64_MAX, &t->max_behind, &skip);

		t->skipped += skip;
		if (now >= s->win_start)
			t->skipped_window += skip;
		if (w < 0)
			break;
		if (w == 0)
			continue;
		if (gap && last && now - last < gap) {
			sleep_until_ns(last + gap);
			continue; /* pace again: more fell due */
		}
		last = now;
		used = eng->burst(t, e, (uint64_t)w, n, now);
		call_ns = now_ns() - now;
		if (used < 0)
			goto cleanup;
		n += (uint64_t)used;
	}
	ret = 0;
cleanup:
	gate_wait(t);
	t->end_ns = now_ns();
	if (e)
		eng->close(t, e);
	free(e);
	return ret;
}

void *send_thread_main(void *arg)
{
	struct send_thread *t = arg;

	pin_thread(&t->s->cfg.cpus, t->index);
	send_loop(t, &engines[t->s->engine]);
	return NULL;
}

/* RTM_GETROUTE for dst: egress interface, gateway (0 if on-link), preferred source, type. */
