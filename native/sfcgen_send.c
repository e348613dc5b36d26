// SPDX-License-Identifier: Apache-2.0
/* `sfcgen send`: options, the next hop and its MAC, the threads, the JSON report. */
#define _GNU_SOURCE
#include "sfcgen.h"

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

	if (nl_route_get(s->cfg.dst, &oif, &gw, &prefsrc, &type)) {
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

void print_u64_array(const uint64_t *v, unsigned n)
{
	putchar('[');
	for (unsigned i = 0; i < n; i++)
		printf(i ? ",%" PRIu64 : "%" PRIu64, v[i]);
	putchar(']');
}

int cmd_send(int argc, char **argv)
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
	uint64_t *flow_sent = NULL, sent = 0, sent_window = 0, bytes = 0, errors = 0, local_drops = 0;
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
			if (opt_uint(optarg, "--dport", 1, 65535, &v))
				return 2;
			c->dport = (unsigned)v;
			have_port = true;
			break;
		case 'f':
			if (opt_uint(optarg, "--flows", 1, MAX_FLOWS, &v))
				return 2;
			c->flows = (unsigned)v;
			break;
		case 'z':
			if (!strcmp(optarg, "imix"))
				c->size = 0;
			else if (opt_uint(optarg, "--size", MIN_FRAME, MAX_FRAME, &v))
				return 2;
			else
				c->size = (unsigned)v;
			break;
		case 'r':
			if (!strcmp(optarg, "max"))
				c->rate = 0;
			else if (opt_double(optarg, "--rate", 1, &c->rate))
				return 2;
			break;
		case 't':
			if (opt_double(optarg, "--duration", 0.001, &c->duration))
				return 2;
			break;
		case 'j':
			if (opt_uint(optarg, "--threads", 1, MAX_THREADS, &v))
				return 2;
			c->threads = (unsigned)v;
			break;
		case 'R':
			if (opt_double(optarg, "--ramp", 0, &c->ramp))
				return 2;
			break;
		case 'b':
			if (opt_uint(optarg, "--batch", 1, MAX_BATCH, &v))
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
	s.win_start = s.t0 + (int64_t)(c->ramp * NSEC);
	if (s.xdp)
		xdp_tx_set_window(s.xdp, s.win_start);
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
		sent_window += t->sent_window;
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
		/* the measured window: from the end of the ramp to the end of sending */
		printf("\"sent_window\":%" PRIu64 ",\"window_s\":%.6f,", sent_window,
		       end > s.win_start ? (double)(end - s.win_start) / NSEC : 0.0);
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

