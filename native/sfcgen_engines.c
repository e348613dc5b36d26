// SPDX-License-Identifier: Apache-2.0
/* The sending engines (packet, ring, udp, xdp), their pacing and the start gate. */
#define _GNU_SOURCE
#include "sfcgen.h"

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
			p->magic = now >= s->win_start ? PROBE_MAGIC_WINDOW : PROBE_MAGIC;
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
		{
			uint64_t before = t->sent;

			ring_reap(t, &r, first, filled);
			if (now >= s->win_start)
				t->sent_window += t->sent - before;
		}
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
			p->magic = now >= s->win_start ? PROBE_MAGIC_WINDOW : PROBE_MAGIC;
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
			if (now >= s->win_start)
				t->sent_window += (uint64_t)done;
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

			p->magic = now >= s->win_start ? PROBE_MAGIC_WINDOW : PROBE_MAGIC;
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
		if (now >= s->win_start)
			t->sent_window += (uint64_t)done;
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
	if (xdp_tx_thread_sent(s->xdp, t->index, &t->sent, &t->bytes, &t->sent_window))
		th_fail(t, errno, "read the generator's counters");
	return ret;
}

void *send_thread_main(void *arg)
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
