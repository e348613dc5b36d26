// SPDX-License-Identifier: Apache-2.0
/*
 * `sfcgen sink`: receiving threads or the XDP sink, snapshots on SIGUSR1 (SIGUSR2: the same
 * counters without a reset, so a caller can watch a queue drain), percentiles.
 */
#define _GNU_SOURCE
#include "sfcgen.h"
#include "hist.h"

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
			if (len < sizeof(struct probe) || (p->magic != PROBE_MAGIC && p->magic != PROBE_MAGIC_WINDOW) ||
			    p->flow >= k->flows) {
				t->st.invalid++;
				continue;
			}
			t->st.received++;
			t->st.bytes += len + WIRE_OVERHEAD;
			if (p->magic == PROBE_MAGIC_WINDOW) {
				if (!t->st.win_first_ns) {
					t->st.win_first_ns = now;
					t->st.win_rx_before = t->st.received - 1;
				}
				t->st.win_last_ns = now;
				t->st.win_rx_last = t->st.received;
			}
			if (!flow_account(&t->flows[p->flow], p->run, p->seq) &&
			    p->magic == PROBE_MAGIC_WINDOW)
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
		all->received_window += t->st.received_window;
		if (t->st.win_first_ns) {
			all->win_rx_last += t->st.win_rx_last - t->st.win_rx_before;
			if (!all->win_first_ns || t->st.win_first_ns < all->win_first_ns)
				all->win_first_ns = t->st.win_first_ns;
			if (t->st.win_last_ns > all->win_last_ns)
				all->win_last_ns = t->st.win_last_ns;
		}
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
	       ",\"reordered\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"rx_span_s\":%.6f,"
	       "\"received_window\":%" PRIu64 ",\"rx_window_received\":%" PRIu64
	       ",\"rx_window_s\":%.9f,",
	       event, k->xdp ? xdp_sink_mode(k->xdp) : "socket", number, (double)(now - *since) / NSEC, all->received, all->bytes, all->invalid,
	       all->socket_drops, tot_reo, tot_dup,
	       all->first_ns ? (double)(all->last_ns - all->first_ns) / NSEC : 0.0,
	       all->received_window, all->win_rx_last - all->win_rx_before,
	       all->win_first_ns ? (double)(all->win_last_ns - all->win_first_ns) / NSEC : 0.0);
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

int cmd_sink(int argc, char **argv)
{
	static const struct option opts[] = {
		{"port", required_argument, NULL, 'p'},
		{"flows", required_argument, NULL, 'f'},
		{"threads", required_argument, NULL, 'j'},
		{"bind", required_argument, NULL, 'a'},
		{"cpus", required_argument, NULL, 'c'},
		{"xdp", no_argument, NULL, 'X'},
		{"tc", no_argument, NULL, 'T'},
		{"kernel", no_argument, NULL, 'K'},
		{"xdp-dev", required_argument, NULL, 'D'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct sink k;
	bool xdp = false;
	enum sink_hook hook = SINK_XDP;
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
			if (opt_uint(optarg, "--port", 1, 65535, &v))
				return 2;
			k.port = (unsigned)v;
			have_port = true;
			break;
		case 'f':
			if (opt_uint(optarg, "--flows", 1, MAX_FLOWS, &v))
				return 2;
			k.flows = (unsigned)v;
			break;
		case 'j':
			if (opt_uint(optarg, "--threads", 1, MAX_THREADS, &v))
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
			hook = SINK_XDP;
			break;
		case 'T':
			xdp = true;
			hook = SINK_TC;
			break;
		case 'K':
			xdp = true;
			hook = SINK_KERNEL;
			break;
		case 'D':
			xdp = true;
			xdp_dev = optarg;
			break;
		case 'h':
			printf("usage: sfcgen sink --port PORT [--flows N] [--threads N] [--bind IP] [--cpus LIST]\n"
			       "       sfcgen sink --port PORT [--flows N] --xdp|--tc|--kernel [--xdp-dev IFNAME[,IFNAME]]\n"
			       "  SIGUSR1: print a JSON snapshot and reset; SIGUSR2: print one, no reset;\n"
			       "  SIGTERM/SIGINT: print and exit\n"
			       "  --xdp: count and drop the probes in an XDP program on the receiving\n"
			       "  interfaces (default: every one but loopback) instead of a UDP socket;\n"
			       "  --tc: the same at tcx ingress (after the interface's XDP program);\n"
			       "  --kernel: XDP where the interface has no XDP program, else tcx\n");
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
	sigaddset(&sigs, SIGUSR2);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	if (xdp) {
		k.xdp = xdp_sink_open(hook, k.port, k.flows, xdp_dev, why, sizeof(why));
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
	       "\"pid\":%d", k.xdp ? xdp_sink_mode(k.xdp) : "socket", k.port, k.flows, k.threads, (int)getpid());
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
		if (sig == SIGUSR2) {
			if (sink_report(&k, "peek", ++number, &since, false))
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

