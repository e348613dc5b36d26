// SPDX-License-Identifier: Apache-2.0
/*
 * `sfcgen sink`: receiving threads or the XDP sink, snapshots on SIGUSR1 (SIGUSR2: the same
 * counters without a reset, so a caller can watch a queue drain), percentiles.
 *
 * cmd_sink() in four stages: parse (sink_parse: the option table sink_opttab), set-up
 * (sink_setup: signals, the XDP sink or one SO_REUSEPORT socket per thread; sink_start: the
 * receiving threads), run (sink_serve: the "ready" line, then a snapshot per signal) and report
 * (sink_report: the counters collected and printed as one JSON line); sink_stop() and
 * sink_free() undo set-up.
 */
#define _GNU_SOURCE
#include "sfcgen.h"
#include "hist.h"
#include "opttab.h"

/* ------------------------------------------------------------------------------------------ */
/* Sink                                                                                       */
/* ------------------------------------------------------------------------------------------ */
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


static void stats_reset(struct sink_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->lat_min = UINT64_MAX;
}

#define RX_BATCH 64u
#define RX_BUF 2048u

/* The socket's drop count from the datagram's SO_RXQ_OVFL, since it was made. */
static void sink_count_overflow(struct sink_thread *t, struct msghdr *h)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
			uint32_t d;

			/* the kernel sends none while it is 0: count from 0 */
			memcpy(&d, CMSG_DATA(cm), sizeof(d));
			t->st.socket_drops += (uint32_t)(d - t->last_ovfl);
			t->last_ovfl = d;
		}
	}
}

/* Bytes a datagram's frame had beyond its UDP payload: IPv6 unless its source is IPv4 (a plain
 * IPv4 socket, or an IPv4-mapped address on the dual-stack one). */
static inline unsigned datagram_overhead(const struct msghdr *h)
{
	const struct sockaddr_in6 *a = h->msg_name;

	if (h->msg_namelen >= sizeof(*a) && a->sin6_family == AF_INET6 &&
	    !IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
		return WIRE_OVERHEAD6;
	return WIRE_OVERHEAD;
}

/* Count one datagram that arrived at now (t->lock held): the probe, its flow, its latency. */
static inline void sink_account(struct sink_thread *t, const struct sink *k, struct mmsghdr *m,
				const uint8_t *buf, int64_t now)
{
	const struct probe *p = (const struct probe *)buf;
	unsigned len = m->msg_len;
	uint64_t lat;

	sink_count_overflow(t, &m->msg_hdr);
	if (len < sizeof(struct probe) ||
	    (p->magic != PROBE_MAGIC && p->magic != PROBE_MAGIC_WINDOW) || p->flow >= k->flows) {
		t->st.invalid++;
		return;
	}
	t->st.received++;
	t->st.bytes += len + datagram_overhead(&m->msg_hdr);
	if (p->magic == PROBE_MAGIC_WINDOW) {
		if (!t->st.win_first_ns) {
			t->st.win_first_ns = now;
			t->st.win_rx_before = t->st.received - 1;
		}
		t->st.win_last_ns = now;
		t->st.win_rx_last = t->st.received;
	}
	if (!flow_account(&t->flows[p->flow], p->run, p->seq) && p->magic == PROBE_MAGIC_WINDOW)
		t->st.received_window++;
	lat = (int64_t)p->ts_ns < now ? (uint64_t)(now - (int64_t)p->ts_ns) : 0;
	t->st.hist[hist_index(lat)]++;
	t->st.lat_count++;
	t->st.lat_sum += (double)lat;
	if (lat > t->st.lat_max)
		t->st.lat_max = lat;
	if (lat < t->st.lat_min)
		t->st.lat_min = lat;
}

static void *sink_thread_main(void *arg)
{
	struct sink_thread *t = ((void **)arg)[0];
	struct sink *k = ((void **)arg)[1];
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	static __thread uint8_t bufs[RX_BATCH][RX_BUF];
	static __thread char ctl[RX_BATCH][CMSG_SPACE(sizeof(uint32_t))];
	static __thread struct sockaddr_in6 from[RX_BATCH];

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
			msgs[i].msg_hdr.msg_name = &from[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
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
		for (int i = 0; i < n; i++)
			sink_account(t, k, &msgs[i], bufs[i], now);
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
	all->received_window = sum->received_window;
	all->win_first_ns = (int64_t)sum->win_first_ns;
	all->win_last_ns = (int64_t)sum->win_last_ns;
	all->win_rx_last = sum->win_rx_last; /* already the count: win_rx_before stays 0 */
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

/* Every counter since the last reset, summed over the threads (or read from the XDP sink). */
struct sink_snapshot {
	struct sink_stats all;
	uint64_t *received, *reordered, *duplicated, *highest; /* per flow; highest: seq + 1 */
};

static void snapshot_free(struct sink_snapshot *sn)
{
	if (!sn)
		return;
	free(sn->received);
	free(sn->reordered);
	free(sn->duplicated);
	free(sn->highest);
	free(sn);
}

static struct sink_snapshot *snapshot_alloc(unsigned flows)
{
	struct sink_snapshot *sn = calloc(1, sizeof(*sn));

	if (!sn)
		return NULL;
	sn->received = calloc(flows, sizeof(*sn->received));
	sn->reordered = calloc(flows, sizeof(*sn->reordered));
	sn->duplicated = calloc(flows, sizeof(*sn->duplicated));
	sn->highest = calloc(flows, sizeof(*sn->highest));
	if (!sn->received || !sn->reordered || !sn->duplicated || !sn->highest) {
		snapshot_free(sn);
		return NULL;
	}
	stats_reset(&sn->all);
	return sn;
}

/* Add one thread's counters to all. */
static void stats_add(struct sink_stats *all, const struct sink_stats *st)
{
	all->received += st->received;
	all->received_window += st->received_window;
	if (st->win_first_ns) {
		all->win_rx_last += st->win_rx_last - st->win_rx_before;
		if (!all->win_first_ns || st->win_first_ns < all->win_first_ns)
			all->win_first_ns = st->win_first_ns;
		if (st->win_last_ns > all->win_last_ns)
			all->win_last_ns = st->win_last_ns;
	}
	all->bytes += st->bytes;
	all->invalid += st->invalid;
	all->socket_drops += st->socket_drops;
	all->lat_count += st->lat_count;
	all->lat_sum += st->lat_sum;
	if (st->lat_max > all->lat_max)
		all->lat_max = st->lat_max;
	if (st->lat_min < all->lat_min)
		all->lat_min = st->lat_min;
	if (st->first_ns && (!all->first_ns || st->first_ns < all->first_ns))
		all->first_ns = st->first_ns;
	if (st->last_ns > all->last_ns)
		all->last_ns = st->last_ns;
	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		all->hist[b] += st->hist[b];
}

/* Sum the receiving threads' counters into sn, resetting them if asked. */
static void sink_collect_threads(struct sink *k, struct sink_snapshot *sn, bool reset)
{
	for (unsigned i = 0; i < k->threads; i++) {
		struct sink_thread *t = &k->th[i];

		pthread_mutex_lock(&t->lock);
		stats_add(&sn->all, &t->st);
		for (unsigned f = 0; f < k->flows; f++) {
			struct flow_state *fs = &t->flows[f];

			sn->received[f] += fs->received;
			sn->reordered[f] += fs->reordered;
			sn->duplicated[f] += fs->duplicated;
			if (fs->seen && fs->max_seq + 1ull > sn->highest[f])
				sn->highest[f] = fs->max_seq + 1ull; /* stored +1: 0 means none seen */
			if (reset)
				memset(fs, 0, sizeof(*fs));
		}
		if (reset)
			stats_reset(&t->st);
		pthread_mutex_unlock(&t->lock);
	}
}

/* "latency_us" (count, min, mean, percentiles, max) and the sparse "latency_hist". */
static void print_latency(const struct sink_stats *all)
{
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
	/* the histogram itself, sparse [[bucket, count], ...]: sfclab makes the statistics */
	printf("\"latency_hist\":[");
	for (unsigned b = 0, first = 1; b < HIST_BUCKETS; b++) {
		if (!all->hist[b])
			continue;
		printf(first ? "[%u,%" PRIu64 "]" : ",[%u,%" PRIu64 "]", b, all->hist[b]);
		first = 0;
	}
	printf("],");
}

/* "flows" and "per_flow": received, reordered, duplicated, highest_seq (null: none seen). */
static void print_per_flow(const struct sink_snapshot *sn, unsigned flows)
{
	printf("\"flows\":%u,\"per_flow\":{\"received\":", flows);
	print_u64_array(sn->received, flows);
	printf(",\"reordered\":");
	print_u64_array(sn->reordered, flows);
	printf(",\"duplicated\":");
	print_u64_array(sn->duplicated, flows);
	printf(",\"highest_seq\":[");
	for (unsigned f = 0; f < flows; f++) {
		if (sn->highest[f])
			printf(f ? ",%" PRIu64 : "%" PRIu64, sn->highest[f] - 1);
		else
			printf(f ? ",null" : "null");
	}
	printf("]}");
}

/* Print one JSON line of every counter since the last reset, then reset if asked. */
static int sink_report(struct sink *k, const char *event, uint64_t number, int64_t *since,
		       bool reset)
{
	struct sink_snapshot *sn = snapshot_alloc(k->flows);
	const struct sink_stats *all;
	uint64_t tot_reo = 0, tot_dup = 0;
	int64_t now = now_ns();

	if (!sn) {
		fprintf(stderr, "sfcgen sink: Failed to allocate a snapshot: %s\n", strerror(errno));
		return -1;
	}
	all = &sn->all;
	if (k->xdp) {
		if (sink_collect_xdp(k, &sn->all, sn->received, sn->reordered, sn->duplicated,
				     sn->highest, reset)) {
			snapshot_free(sn);
			return -1;
		}
	} else {
		sink_collect_threads(k, sn, reset);
	}
	for (unsigned f = 0; f < k->flows; f++) {
		tot_reo += sn->reordered[f];
		tot_dup += sn->duplicated[f];
	}
	printf("{\"event\":\"%s\",\"mode\":\"%s\",\"number\":%" PRIu64
	       ",\"interval_s\":%.6f,\"received\":%" PRIu64
	       ",\"bytes\":%" PRIu64 ",\"invalid\":%" PRIu64 ",\"socket_drops\":%" PRIu64
	       ",\"reordered\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"rx_span_s\":%.6f,"
	       "\"received_window\":%" PRIu64 ",\"rx_window_received\":%" PRIu64
	       ",\"rx_window_s\":%.9f,",
	       event, k->xdp ? xdp_sink_mode(k->xdp) : "socket", number,
	       (double)(now - *since) / NSEC, all->received, all->bytes, all->invalid,
	       all->socket_drops, tot_reo, tot_dup,
	       all->first_ns ? (double)(all->last_ns - all->first_ns) / NSEC : 0.0,
	       all->received_window, all->win_rx_last - all->win_rx_before,
	       all->win_first_ns ? (double)(all->win_last_ns - all->win_first_ns) / NSEC : 0.0);
	print_latency(all);
	print_per_flow(sn, k->flows);
	printf("}\n");
	fflush(stdout);
	if (reset)
		*since = now;
	snapshot_free(sn);
	return 0;
}

/* ---- parse --------------------------------------------------------------------------- */

/* The command line as parsed: the sink's settings and how to receive. */
struct sink_args {
	struct sink *k;
	bool xdp;
	enum sink_hook hook;
	const char *xdp_dev;
	int bind_family; /* AF_INET, AF_INET6, or 0: both (an IPv6 socket taking IPv4 too) */
	struct in_addr bind_addr;
	struct in6_addr bind_addr6;
	bool have_port;
};

static int sink_set_uint(const char *arg, const char *what, unsigned long max, unsigned *out)
{
	unsigned long v;

	if (opt_uint(arg, what, 1, max, &v))
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int set_port(void *p, const char *arg)
{
	struct sink_args *a = p;

	a->have_port = true;
	return sink_set_uint(arg, "--port", 65535, &a->k->port);
}

static int set_flows(void *p, const char *arg)
{
	return sink_set_uint(arg, "--flows", MAX_FLOWS, &((struct sink_args *)p)->k->flows);
}

static int set_threads(void *p, const char *arg)
{
	return sink_set_uint(arg, "--threads", MAX_THREADS, &((struct sink_args *)p)->k->threads);
}

static int set_bind(void *p, const char *arg)
{
	struct sink_args *a = p;

	if (inet_pton(AF_INET, arg, &a->bind_addr) == 1)
		a->bind_family = AF_INET;
	else if (inet_pton(AF_INET6, arg, &a->bind_addr6) == 1)
		a->bind_family = AF_INET6;
	else {
		fprintf(stderr, "sfcgen: invalid --bind '%s' (an IPv4 or IPv6 address)\n", arg);
		return -1;
	}
	return 0;
}

static int set_cpus(void *p, const char *arg)
{
	return parse_cpus(arg, &((struct sink_args *)p)->k->cpus);
}

static int set_hook(struct sink_args *a, enum sink_hook hook)
{
	a->xdp = true;
	a->hook = hook;
	return 0;
}

static int set_xdp(void *p, const char *arg)
{
	(void)arg;
	return set_hook(p, SINK_XDP);
}

static int set_tc(void *p, const char *arg)
{
	(void)arg;
	return set_hook(p, SINK_TC);
}

static int set_kernel(void *p, const char *arg)
{
	(void)arg;
	return set_hook(p, SINK_KERNEL);
}

static int set_xdp_dev(void *p, const char *arg)
{
	struct sink_args *a = p;

	a->xdp = true;
	a->xdp_dev = arg;
	return 0;
}

static int sink_help(void *p, const char *arg)
{
	(void)p;
	(void)arg;
	printf("usage: sfcgen sink --port PORT [--flows N] [--threads N] [--bind IP] [--cpus LIST]\n"
	       "       sfcgen sink --port PORT [--flows N] --xdp|--tc|--kernel [--xdp-dev IFNAME[,IFNAME]]\n"
	       "  SIGUSR1: print a JSON snapshot and reset; SIGUSR2: print one, no reset;\n"
	       "  SIGTERM/SIGINT: print and exit\n"
	       "  --xdp: count and drop the probes in an XDP program on the receiving\n"
	       "  interfaces (default: every one but loopback) instead of a UDP socket;\n"
	       "  --tc: the same at tcx ingress (after the interface's XDP program);\n"
	       "  --kernel: XDP and tcx behind it where the interface has no XDP program,\n"
	       "  else tcx\n");
	return OPTTAB_DONE;
}

static const struct opttab sink_opttab[] = {
	{"port", true, set_port},
	{"flows", true, set_flows},
	{"threads", true, set_threads},
	{"bind", true, set_bind},
	{"cpus", true, set_cpus},
	{"xdp", false, set_xdp},
	{"tc", false, set_tc},
	{"kernel", false, set_kernel},
	{"xdp-dev", true, set_xdp_dev},
	{"help", false, sink_help},
};

/* Returns -1 to go on, or the exit status: 0 after --help, 2 for bad input. */
static int sink_parse(int argc, char **argv, struct sink_args *a, struct sink *k)
{
	int r;

	memset(k, 0, sizeof(*k));
	k->flows = 1;
	k->threads = 1;
	memset(a, 0, sizeof(*a));
	a->k = k;
	a->hook = SINK_XDP;
	a->bind_addr.s_addr = htonl(INADDR_ANY);
	a->bind_addr6 = in6addr_any;
	r = opttab_parse("sfcgen", argc, argv, sink_opttab,
			 sizeof(sink_opttab) / sizeof(sink_opttab[0]), a);
	if (r)
		return r == OPTTAB_DONE ? 0 : 2;
	if (!a->have_port) {
		fprintf(stderr, "sfcgen sink: --port is required\n");
		return 2;
	}
	return -1;
}

/* ---- set-up ------------------------------------------------------------------------- */

/* What set-up made, for sink_stop() and sink_free(). */
struct sink_made {
	unsigned opened;  /* threads whose socket, lock and flow state exist */
	unsigned started; /* threads running */
};

/* One receiving thread's socket (SO_REUSEPORT on the shared port), lock and flow state. */
static int sink_open_socket(struct sink *k, struct sink_thread *t, const struct sink_args *sa,
			    struct sink_made *m)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)k->port),
				.sin_addr = sa->bind_addr};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons((uint16_t)k->port),
				  .sin6_addr = sa->bind_addr6};
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
	int one = 1, zero = 0, rcvbuf = 16 << 20, family = sa->bind_family;

	/* no --bind: one IPv6 socket for both families, or IPv4 where IPv6 sockets cannot be */
	t->fd = socket(family == AF_INET ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (t->fd < 0 && family == 0) {
		family = AF_INET;
		t->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	} else if (family == 0) {
		family = AF_INET6;
		if (setsockopt(t->fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)))
			fprintf(stderr, "sfcgen sink: IPv6 socket takes no IPv4: %s\n", strerror(errno));
	}
	if (t->fd < 0) {
		fprintf(stderr, "sfcgen sink: Failed to create a UDP socket: %s\n", strerror(errno));
		return -1;
	}
	pthread_mutex_init(&t->lock, NULL);
	stats_reset(&t->st);
	m->opened++;
	t->flows = calloc(k->flows, sizeof(*t->flows));
	if (!t->flows) {
		fprintf(stderr, "sfcgen sink: Failed to allocate flow state: %s\n", strerror(errno));
		return -1;
	}
	if (setsockopt(t->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    setsockopt(t->fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)) ||
	    setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		fprintf(stderr, "sfcgen sink: Failed to set socket options: %s\n", strerror(errno));
		return -1;
	}
	if (setsockopt(t->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		setsockopt(t->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (family == AF_INET6 ? bind(t->fd, (struct sockaddr *)&a6, sizeof(a6))
			       : bind(t->fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "sfcgen sink: Failed to bind UDP port %u: %s\n", k->port,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* Block the signals the main thread waits for (every thread inherits the mask), then open
 * the XDP sink or the sockets.  Returns 0 or -1. */
static int sink_setup(struct sink *k, const struct sink_args *a, sigset_t *sigs,
		      struct sink_made *m)
{
	char why[256] = "";

	sigemptyset(sigs);
	sigaddset(sigs, SIGUSR1);
	sigaddset(sigs, SIGUSR2);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	if (a->xdp) {
		k->xdp = xdp_sink_open(a->hook, k->port, k->flows, a->xdp_dev, why, sizeof(why));
		if (!k->xdp) {
			fprintf(stderr, "sfcgen sink: Failed to set up the XDP sink: %s\n", why);
			return -1;
		}
		k->threads = 0;
	}
	k->th = calloc(k->threads ? k->threads : 1, sizeof(*k->th));
	if (!k->th) {
		fprintf(stderr, "sfcgen sink: Failed to allocate thread state: %s\n", strerror(errno));
		return -1;
	}
	while (m->opened < k->threads)
		if (sink_open_socket(k, &k->th[m->opened], a, m))
			return -1;
	return 0;
}

static int sink_start(struct sink *k, struct sink_made *m)
{
	for (; m->started < k->threads; m->started++) {
		void **arg = malloc(2 * sizeof(void *));
		int err;

		if (!arg) {
			fprintf(stderr, "sfcgen sink: Failed to allocate: %s\n", strerror(errno));
			return -1;
		}
		arg[0] = &k->th[m->started];
		arg[1] = k;
		err = pthread_create(&k->th[m->started].tid, NULL, sink_thread_main, arg);
		if (err) {
			free(arg);
			fprintf(stderr, "sfcgen sink: Failed to start a thread: %s\n", strerror(err));
			return -1;
		}
	}
	return 0;
}

/* Stop and join the receiving threads that run. */
static void sink_stop(struct sink *k, struct sink_made *m)
{
	atomic_store(&k->stop, true);
	for (unsigned i = 0; i < m->started; i++)
		shutdown(k->th[i].fd, SHUT_RDWR); /* wakes a blocked recvmmsg */
	for (unsigned i = 0; i < m->started; i++)
		pthread_join(k->th[i].tid, NULL);
	m->started = 0;
}

static void sink_free(struct sink *k, struct sink_made *m)
{
	if (m->started)
		sink_stop(k, m);
	for (unsigned i = 0; i < m->opened; i++) {
		if (k->th[i].fd >= 0)
			close(k->th[i].fd);
		free(k->th[i].flows);
		pthread_mutex_destroy(&k->th[i].lock);
	}
	free(k->th);
	xdp_sink_close(k->xdp);
}

/* ---- run ---------------------------------------------------------------------------- */

/* Print the "ready" line, then a snapshot per SIGUSR1 (reset) or SIGUSR2 (peek) until
 * SIGTERM, SIGINT or SIGHUP.  Returns 0, or -1 when a report or the wait failed. */
static int sink_serve(struct sink *k, const sigset_t *sigs, uint64_t *number, int64_t *since)
{
	*since = now_ns();
	printf("{\"event\":\"ready\",\"mode\":\"%s\",\"port\":%u,\"flows\":%u,\"threads\":%u,"
	       "\"pid\":%d", k->xdp ? xdp_sink_mode(k->xdp) : "socket", k->port, k->flows,
	       k->threads, (int)getpid());
	if (k->xdp)
		printf(",\"xdp\":%s", xdp_sink_where(k->xdp));
	printf("}\n");
	fflush(stdout);
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(sigs, &si);

		if (sig < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "sfcgen sink: Failed to wait for signals: %s\n", strerror(errno));
			return -1;
		}
		if (sig == SIGUSR1 || sig == SIGUSR2) {
			bool reset = sig == SIGUSR1;

			if (sink_report(k, reset ? "snapshot" : "peek", ++*number, since, reset))
				return -1;
			continue;
		}
		return 0; /* SIGTERM, SIGINT, SIGHUP */
	}
}

int cmd_sink(int argc, char **argv)
{
	static struct sink k; /* large (a CPU list): not on the stack */
	struct sink_args a;
	struct sink_made m = {0};
	sigset_t sigs;
	int64_t since;
	uint64_t number = 0;
	int ret = sink_parse(argc, argv, &a, &k);

	if (ret >= 0)
		return ret;
	ret = 1;
	if (sink_setup(&k, &a, &sigs, &m) || sink_start(&k, &m) ||
	    sink_serve(&k, &sigs, &number, &since))
		goto cleanup;
	sink_stop(&k, &m);
	if (sink_report(&k, "final", ++number, &since, false))
		goto cleanup;
	for (unsigned i = 0; i < k.threads; i++)
		if (k.th[i].err)
			fprintf(stderr, "sfcgen sink: receive failed: %s\n", strerror(k.th[i].err));
	ret = 0;
cleanup:
	sink_free(&k, &m);
	return ret;
}
