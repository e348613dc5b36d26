// SPDX-License-Identifier: Apache-2.0
/*
 * `sfcgen send` in four stages, each its own function called by cmd_send():
 *   parse   send_parse(): the option table (send_opttab) into a struct send_cfg, then the
 *           checks between options
 *   set-up  send_setup(): the engine and its next hop (resolve_l2), the xdp program, the
 *           per-thread and per-flow state
 *   run     send_run(): the threads through the start gate, the send loops, the join
 *   report  send_collect() and send_report(): the threads' counters summed (the xdp engine's
 *           corrected by the device's), one {"event":"sent",...} line
 * send_job_free() undoes whatever set-up made.
 */
#define _GNU_SOURCE
#include "sfcgen.h"
#include "opttab.h"

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

/* The IPv6 route to --dst: output interface, source address and the next hop's MAC from the
 * neighbour table (neighbour discovery started first).  Returns 0, or -1 with a reason. */
static int resolve_route6(struct sender *s, int *oif, struct in6_addr *nexthop, char *why,
			  size_t whylen)
{
	struct l2_path *p = &s->path;
	struct in6_addr gw, prefsrc;
	char dst[INET6_ADDRSTRLEN];
	unsigned type;

	inet_ntop(AF_INET6, &s->cfg.dst6, dst, sizeof(dst));
	if (route6_get(&s->cfg.dst6, oif, &gw, &prefsrc, &type)) {
		snprintf(why, whylen, "no route to %s", dst);
		return -1;
	}
	if (type != RTN_UNICAST) {
		snprintf(why, whylen, "route to %s is not unicast (type %u)", dst, type);
		return -1;
	}
	p->src6 = s->cfg.have_src ? s->cfg.src6 : prefsrc;
	if (IN6_IS_ADDR_UNSPECIFIED(&p->src6)) {
		snprintf(why, whylen, "no source address for %s", dst);
		return -1;
	}
	*nexthop = IN6_IS_ADDR_UNSPECIFIED(&gw) ? s->cfg.dst6 : gw;
	return 0;
}

/* The next hop's MAC on p->ifname, waiting up to a second for neighbour discovery. */
static int resolve_mac6(struct sender *s, const struct in6_addr *nexthop, char *why,
			size_t whylen)
{
	struct l2_path *p = &s->path;
	char hop[INET6_ADDRSTRLEN];

	for (int i = 0; !neigh6_lookup(nexthop, p->ifindex, p->dst_mac); i++) {
		if (i == 100) {
			inet_ntop(AF_INET6, nexthop, hop, sizeof(hop));
			snprintf(why, whylen, "next hop %s on %s did not resolve", hop, p->ifname);
			return -1;
		}
		if (i % 20 == 0)
			neigh6_probe(nexthop, p->ifname, p->ifindex);
		usleep(10000);
	}
	return 0;
}

/* The IPv4 route to --dst: output interface, source address and next hop.  0 or -1. */
static int resolve_route4(struct sender *s, int *oif, struct in_addr *nexthop, char *why,
			  size_t whylen)
{
	struct in_addr gw = {0}, prefsrc;
	unsigned type;

	if (nl_route_get(s->cfg.dst, oif, &gw, &prefsrc, &type)) {
		snprintf(why, whylen, "no route to %s", inet_ntoa(s->cfg.dst));
		return -1;
	}
	if (type != RTN_UNICAST) {
		snprintf(why, whylen, "route to %s is not unicast (type %u)", inet_ntoa(s->cfg.dst),
			 type);
		return -1;
	}
	s->path.src = s->cfg.have_src ? s->cfg.src : prefsrc;
	if (!s->path.src.s_addr) {
		snprintf(why, whylen, "no source address for %s", inet_ntoa(s->cfg.dst));
		return -1;
	}
	*nexthop = gw.s_addr ? gw : s->cfg.dst;
	return 0;
}

/* The next hop's MAC on p->ifname from the ARP table, waiting up to a second for ARP. */
static int resolve_mac4(struct sender *s, struct in_addr nexthop, char *why, size_t whylen)
{
	struct l2_path *p = &s->path;

	for (int i = 0; !arp_lookup(nexthop, p->ifname, p->dst_mac); i++) {
		if (i == 100) {
			snprintf(why, whylen, "next hop %s on %s did not resolve", inet_ntoa(nexthop),
				 p->ifname);
			return -1;
		}
		if (i % 20 == 0)
			neigh_probe(nexthop, p->ifname);
		usleep(10000);
	}
	return 0;
}

/* Resolve what the packet engine needs.  Returns 0, or -1 with a reason in why. */
static int resolve_l2(struct sender *s, char *why, size_t whylen)
{
	struct l2_path *p = &s->path;
	struct in_addr nexthop = {0};
	struct in6_addr nexthop6 = IN6ADDR_ANY_INIT;
	struct ifreq ifr;
	int fd = -1, oif, ret = -1;
	bool v6 = s->cfg.family == AF_INET6;

	if (v6 ? resolve_route6(s, &oif, &nexthop6, why, whylen)
	       : resolve_route4(s, &oif, &nexthop, why, whylen))
		return -1;
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
	if (s->cfg.have_dst_mac)
		memcpy(p->dst_mac, s->cfg.dst_mac, 6);
	else if (v6 ? resolve_mac6(s, &nexthop6, why, whylen)
		    : resolve_mac4(s, nexthop, why, whylen))
		goto cleanup;
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

/* ---- parse --------------------------------------------------------------------------- */

/* The command line as parsed: the configuration and which required options were given. */
struct send_args {
	struct send_cfg cfg;
	bool have_dst, have_port, have_batch, have_size;
	int src_family;
};

/* An IPv4 (dotted quad) or IPv6 literal into v4 or v6; its family, or 0 if it is neither. */
static int parse_addr(const char *arg, struct in_addr *v4, struct in6_addr *v6)
{
	if (inet_pton(AF_INET, arg, v4) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, arg, v6) == 1)
		return AF_INET6;
	return 0;
}

static int set_dst(void *p, const char *arg)
{
	struct send_args *a = p;

	a->cfg.family = parse_addr(arg, &a->cfg.dst, &a->cfg.dst6);
	if (!a->cfg.family) {
		fprintf(stderr, "sfcgen: invalid --dst '%s' (an IPv4 or IPv6 address)\n", arg);
		return -1;
	}
	a->have_dst = true;
	return 0;
}

static int set_src(void *p, const char *arg)
{
	struct send_args *a = p;

	a->src_family = parse_addr(arg, &a->cfg.src, &a->cfg.src6);
	if (!a->src_family) {
		fprintf(stderr, "sfcgen: invalid --src '%s' (an IPv4 or IPv6 address)\n", arg);
		return -1;
	}
	a->cfg.have_src = true;
	return 0;
}

static int set_uint(const char *arg, const char *what, unsigned long min, unsigned long max,
		    unsigned *out)
{
	unsigned long v;

	if (opt_uint(arg, what, min, max, &v))
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int set_dport(void *p, const char *arg)
{
	struct send_args *a = p;

	a->have_port = true;
	return set_uint(arg, "--dport", 1, 65535, &a->cfg.dport);
}

static int set_flows(void *p, const char *arg)
{
	return set_uint(arg, "--flows", 1, MAX_FLOWS, &((struct send_args *)p)->cfg.flows);
}

static int set_size(void *p, const char *arg)
{
	struct send_cfg *c = &((struct send_args *)p)->cfg;

	((struct send_args *)p)->have_size = true;
	if (!strcmp(arg, "imix")) {
		c->size = 0;
		return 0;
	}
	return set_uint(arg, "--size", MIN_FRAME, MAX_FRAME, &c->size);
}

static int set_rate(void *p, const char *arg)
{
	struct send_cfg *c = &((struct send_args *)p)->cfg;

	if (!strcmp(arg, "max")) {
		c->rate = 0;
		return 0;
	}
	return opt_double(arg, "--rate", 1, &c->rate);
}

static int set_duration(void *p, const char *arg)
{
	return opt_double(arg, "--duration", 0.001, &((struct send_args *)p)->cfg.duration);
}

static int set_threads(void *p, const char *arg)
{
	return set_uint(arg, "--threads", 1, MAX_THREADS, &((struct send_args *)p)->cfg.threads);
}

static int set_ramp(void *p, const char *arg)
{
	return opt_double(arg, "--ramp", 0, &((struct send_args *)p)->cfg.ramp);
}

static int set_batch(void *p, const char *arg)
{
	struct send_args *a = p;

	a->have_batch = true;
	return set_uint(arg, "--batch", 1, MAX_BATCH, &a->cfg.batch);
}

static int set_engine(void *p, const char *arg)
{
	struct send_cfg *c = &((struct send_args *)p)->cfg;

	for (int e = ENGINE_AUTO; e <= ENGINE_XDP; e++)
		if (!strcmp(arg, engine_names[e])) {
			c->engine = (enum engine)e;
			return 0;
		}
	fprintf(stderr, "sfcgen: invalid --engine '%s' (auto|packet|ring|udp|xdp)\n", arg);
	return -1;
}

static int set_dev(void *p, const char *arg)
{
	struct send_cfg *c = &((struct send_args *)p)->cfg;

	snprintf(c->dev, sizeof(c->dev), "%s", arg);
	return 0;
}

static int set_dst_mac(void *p, const char *arg)
{
	struct send_cfg *c = &((struct send_args *)p)->cfg;
	unsigned m[6];

	if (sscanf(arg, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) {
		fprintf(stderr, "sfcgen: invalid --dst-mac '%s'\n", arg);
		return -1;
	}
	for (int i = 0; i < 6; i++)
		c->dst_mac[i] = (uint8_t)m[i];
	c->have_dst_mac = true;
	return 0;
}

static int set_qdisc_bypass(void *p, const char *arg)
{
	(void)arg;
	((struct send_args *)p)->cfg.qdisc_bypass = true;
	return 0;
}

static int set_classify_maps(void *p, const char *arg)
{
	struct send_cfg *c = &((struct send_args *)p)->cfg;

	if (!arg[0] || strlen(arg) >= sizeof(c->classify_maps)) {
		fprintf(stderr, "sfcgen: invalid --classify-maps '%s' (a directory of at most %zu "
			"bytes)\n", arg, sizeof(c->classify_maps) - 1);
		return -1;
	}
	snprintf(c->classify_maps, sizeof(c->classify_maps), "%s", arg);
	return 0;
}

static int set_classify_node(void *p, const char *arg)
{
	struct send_cfg *c = &((struct send_args *)p)->cfg;

	c->have_classify_node = true;
	return set_uint(arg, "--classify-node", 1, 0xffff, &c->classify_node);
}

static int set_cpus(void *p, const char *arg)
{
	return parse_cpus(arg, &((struct send_args *)p)->cfg.cpus);
}

static int send_help(void *p, const char *arg)
{
	(void)p;
	(void)arg;
	printf("usage: sfcgen send --dst IP [--src IP] --dport PORT [--flows N]\n"
	       "         [--size 64..1518|imix] [--rate PPS|max] [--duration S]\n"
	       "  IP: IPv4 or IPv6; IPv6 frames are 84..1518 bytes (default 84), no imix\n"
	       "         [--threads N] [--ramp S] [--batch N]\n"
	       "         [--engine auto|packet|ring|udp|xdp]\n"
	       "         [--dev IFNAME] [--dst-mac MAC] [--qdisc-bypass]\n"
	       "         [--cpus LIST] [--classify-maps DIR --classify-node N]\n"
	       "  engine xdp: BPF_PROG_RUN live frames; the next hop's interface must take\n"
	       "  XDP frames (an XDP program on it, or GRO turned on for a veth).  Its frames\n"
	       "  skip the sender's tcx egress: --classify-maps (a lab's pinned SFC maps) and\n"
	       "  --classify-node (the sending node's node_id) classify them there instead\n");
	return OPTTAB_DONE;
}

static const struct opttab send_opttab[] = {
	{"dst", true, set_dst},
	{"src", true, set_src},
	{"dport", true, set_dport},
	{"flows", true, set_flows},
	{"size", true, set_size},
	{"rate", true, set_rate},
	{"duration", true, set_duration},
	{"threads", true, set_threads},
	{"ramp", true, set_ramp},
	{"batch", true, set_batch},
	{"engine", true, set_engine},
	{"dev", true, set_dev},
	{"dst-mac", true, set_dst_mac},
	{"qdisc-bypass", false, set_qdisc_bypass},
	{"cpus", true, set_cpus},
	{"classify-maps", true, set_classify_maps},
	{"classify-node", true, set_classify_node},
	{"help", false, send_help},
};

/* Returns 0 to go on, or the exit status: 0 after --help, 2 for bad input. */
static int send_parse(int argc, char **argv, struct send_args *a)
{
	struct send_cfg *c = &a->cfg;
	int r;

	memset(a, 0, sizeof(*a));
	c->flows = 1;
	c->size = 64;
	c->duration = 1;
	c->threads = 1;
	c->batch = DEFAULT_BATCH;
	r = opttab_parse("sfcgen", argc, argv, send_opttab,
			 sizeof(send_opttab) / sizeof(send_opttab[0]), a);
	if (r)
		return r == OPTTAB_DONE ? 0 : 2;
	if (!a->have_dst || !a->have_port) {
		fprintf(stderr, "sfcgen send: --dst and --dport are required\n");
		return 2;
	}
	if (!a->have_size)
		c->size = min_frame(c->family); /* the smallest frame of the family */
	if (c->have_src && a->src_family != c->family) {
		fprintf(stderr, "sfcgen send: --src and --dst must be of one family (IPv4 or IPv6)\n");
		return 2;
	}
	if (c->family == AF_INET6 && c->size == 0) {
		fprintf(stderr, "sfcgen send: --size imix: IMIX has 64-byte frames, and an IPv6 "
			"frame with the probe is at least %u bytes; give a fixed --size\n",
			MIN_FRAME6);
		return 2;
	}
	if (c->size && c->size < min_frame(c->family)) {
		fprintf(stderr, "sfcgen send: --size %u: an IPv6 frame with the probe is at least "
			"%u bytes (Ethernet 14, IPv6 40, UDP 8, probe 18, FCS 4)\n", c->size,
			MIN_FRAME6);
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
	if (!c->classify_maps[0] != !c->have_classify_node) {
		fprintf(stderr, "sfcgen send: --classify-maps and --classify-node go together\n");
		return 2;
	}
	if (c->classify_maps[0] && c->engine != ENGINE_XDP) {
		fprintf(stderr, "sfcgen send: --classify-maps is for --engine xdp (the other engines' "
			"frames pass the sender's own classifier)\n");
		return 2;
	}
	if (c->threads > c->flows) {
		/* a flow's sequence numbers come from one thread, or the sink would see reordering */
		fprintf(stderr, "sfcgen send: %u threads for %u flows: using %u threads\n", c->threads,
			c->flows, c->flows);
		c->threads = c->flows;
	}
	return -1;
}

/* ---- set-up ------------------------------------------------------------------------- */

/* One `sfcgen send`: the sender and what the stages hand on to each other. */
struct send_job {
	struct sender s;
	bool have_batch;
	bool gate;            /* gate_lock and gate_cond exist */
	unsigned started;     /* threads running or joined */
	char why[256];        /* why auto fell back to udp, or why a set-up failed */
	char note[256];       /* what the xdp engine wants the caller to know */
	uint64_t xmit_errors; /* the device's XDP transmit losses before sending (engine xdp) */
	uint64_t peer_rx;     /* the veth peer's received packets before sending (engine xdp) */
	bool have_peer_rx;
	/* the totals, summed by send_collect() */
	uint64_t *flow_sent;
	uint64_t sent, sent_window, bytes, errors, local_drops;
	uint64_t max_behind; /* the largest of the threads' (each sends its share of the rate) */
	uint64_t skipped, skipped_window;
	int64_t end;
};

/* Choose the engine and resolve its path: auto falls back to udp when the packet engine
 * cannot be set up; a named engine that cannot is an error.  Returns 0 or -1. */
static int send_choose_engine(struct send_job *j)
{
	struct sender *s = &j->s;
	struct send_cfg *c = &s->cfg;
	uint8_t headers[MAX_FRAME];

	s->engine = c->engine;
	if (s->engine != ENGINE_UDP && resolve_l2(s, j->why, sizeof(j->why))) {
		if (s->engine != ENGINE_AUTO) {
			fprintf(stderr, "sfcgen send: Failed to set up the packet engine: %s\n",
				j->why);
			return -1;
		}
		s->engine = ENGINE_UDP;
	} else if (s->engine != ENGINE_UDP) {
		unsigned largest = c->size ? c->size : MAX_FRAME;

		if (largest - 18 > s->path.mtu) {
			fprintf(stderr, "sfcgen send: %u-byte frames exceed the MTU %u of %s\n",
				largest, s->path.mtu, s->path.ifname);
			return -1;
		}
		if (s->engine == ENGINE_AUTO)
			s->engine = ENGINE_PACKET;
	}
	s->chunk = c->batch;
	if (s->engine != ENGINE_XDP)
		return 0;
	memset(headers, 0, sizeof(headers)); /* a zero probe: the IPv6 checksum below covers it */
	build_headers(headers, s, c->size ? c->size : MAX_FRAME);
	if (s->cfg.family == AF_INET6)
		udp6_checksum(headers);
	s->xdp = xdp_tx_open(s->path.ifindex, c->flows, c->threads, c->size == 0, c->run, headers,
			     c->classify_maps[0] ? c->classify_maps : NULL, c->classify_node,
			     j->why, sizeof(j->why), j->note, sizeof(j->note));
	if (!s->xdp) {
		fprintf(stderr, "sfcgen send: Failed to set up the xdp engine: %s\n", j->why);
		return -1;
	}
	if (!j->have_batch)
		s->chunk = XDP_DEFAULT_CHUNK;
	dev_xdp_tx_lost(s->path.ifname, &j->xmit_errors);
	j->have_peer_rx = !veth_peer_rx_packets(s->path.ifname, &j->peer_rx);
	return 0;
}

/* The process limits, the per-thread and per-flow state.  Returns 0 or -1. */
static int send_alloc(struct send_job *j)
{
	struct sender *s = &j->s;
	const struct send_cfg *c = &s->cfg;
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	s->th = calloc(c->threads, sizeof(*s->th));
	j->flow_sent = calloc(c->flows, sizeof(*j->flow_sent));
	if (!s->th || !j->flow_sent) {
		fprintf(stderr, "sfcgen send: Failed to allocate thread state: %s\n", strerror(errno));
		return -1;
	}
	for (unsigned i = 0; i < c->threads; i++) {
		struct send_thread *t = &s->th[i];

		t->s = s;
		t->index = i;
		t->nflows = (c->flows - i + c->threads - 1) / c->threads;
		t->flow_sent = calloc(t->nflows, sizeof(*t->flow_sent));
		t->flow_seq = calloc(t->nflows, sizeof(*t->flow_seq));
		if (!t->flow_sent || !t->flow_seq) {
			fprintf(stderr, "sfcgen send: Failed to allocate flow state: %s\n",
				strerror(errno));
			return -1;
		}
	}
	pthread_mutex_init(&s->gate_lock, NULL);
	pthread_cond_init(&s->gate_cond, NULL);
	j->gate = true;
	return 0;
}

static int send_setup(struct send_job *j)
{
	j->s.cfg.run = (uint16_t)(now_ns() ^ getpid());
	if (send_choose_engine(j))
		return -1;
	return send_alloc(j);
}

/* ---- run ---------------------------------------------------------------------------- */

/* Start the threads, open the gate at t0 once all wait at it, join them.  Returns 0, or -1
 * when a thread could not start (the others are let go at once with no time left). */
static int send_run(struct send_job *j)
{
	struct sender *s = &j->s;
	const struct send_cfg *c = &s->cfg;

	for (; j->started < c->threads; j->started++) {
		int err = pthread_create(&s->th[j->started].tid, NULL, send_thread_main,
					 &s->th[j->started]);

		if (err) {
			fprintf(stderr, "sfcgen send: Failed to start a thread: %s\n", strerror(err));
			break;
		}
	}
	pthread_mutex_lock(&s->gate_lock);
	while (s->gate_ready < j->started)
		pthread_cond_wait(&s->gate_cond, &s->gate_lock);
	s->t0 = now_ns() +
		(j->started < c->threads ? -(int64_t)(c->duration * NSEC) - NSEC : 100000);
	s->win_start = s->t0 + (int64_t)(c->ramp * NSEC);
	if (s->xdp)
		xdp_tx_set_window(s->xdp, s->win_start);
	s->gate_open = true;
	pthread_cond_broadcast(&s->gate_cond);
	pthread_mutex_unlock(&s->gate_lock);
	for (unsigned i = 0; i < j->started; i++)
		pthread_join(s->th[i].tid, NULL);
	return j->started < c->threads ? -1 : 0;
}

/* ---- report ------------------------------------------------------------------------- */

/* The xdp engine's counts, corrected by what the device and its peer saw.  Returns 0 or -1. */
static int send_collect_xdp(struct send_job *j)
{
	struct sender *s = &j->s;
	uint64_t after = 0;

	/* frames the device could not pass on: the peer's queue was full */
	if (!dev_xdp_tx_lost(s->path.ifname, &after) && after > j->xmit_errors)
		j->local_drops = after - j->xmit_errors;
	if (xdp_tx_flow_sent(s->xdp, j->flow_sent, s->cfg.flows)) {
		fprintf(stderr, "sfcgen send: Failed to read the per-flow counters: %s\n",
			strerror(errno));
		return -1;
	}
	if (j->have_peer_rx) {
		uint64_t rx = j->peer_rx;

		/* a veth whose peer runs no NAPI drops XDP frames without counting them */
		usleep(20000);
		if (!veth_peer_rx_packets(s->path.ifname, &rx) && rx == j->peer_rx && j->sent)
			j->local_drops = j->sent;
	}
	if (j->sent && j->local_drops >= j->sent) {
		fprintf(stderr, "sfcgen send: %s transmitted none of the %" PRIu64 " XDP frames: "
			"the interface at its other end takes XDP frames only with an XDP program "
			"or, for a veth, with GRO on (ethtool -K PEER gro on); or use --engine packet\n",
			s->path.ifname, j->sent);
		return -1;
	}
	return 0;
}

/* Sum the threads' counters.  Returns 0, or -1 when a thread failed. */
static int send_collect(struct send_job *j)
{
	struct sender *s = &j->s;
	const struct send_cfg *c = &s->cfg;

	for (unsigned i = 0; i < j->started; i++) {
		struct send_thread *t = &s->th[i];

		if (t->err) {
			fprintf(stderr, "sfcgen send: %s\n", t->errmsg);
			return -1;
		}
		for (unsigned k = 0; k < t->nflows; k++)
			j->flow_sent[i + k * c->threads] = t->flow_sent[k];
		j->sent += t->sent;
		j->sent_window += t->sent_window;
		j->bytes += t->bytes;
		j->errors += t->errors;
		j->local_drops += t->local_drops;
		if (t->max_behind > j->max_behind)
			j->max_behind = t->max_behind;
		j->skipped += t->skipped;
		j->skipped_window += t->skipped_window;
		if (t->end_ns > j->end)
			j->end = t->end_ns;
	}
	return s->engine == ENGINE_XDP ? send_collect_xdp(j) : 0;
}

/* One JSON line: {"event":"sent",...} (docs/traffic.md lists the fields). */
static void send_report(const struct send_job *j)
{
	const struct sender *s = &j->s;
	const struct send_cfg *c = &s->cfg;
	double dur = (double)(j->end - s->t0) / NSEC;

	if (dur <= 0)
		dur = 1e-9;
	printf("{\"event\":\"sent\",\"engine\":\"%s\",\"sent\":%" PRIu64 ",\"bytes\":%" PRIu64
	       ",\"errors\":%" PRIu64 ",\"local_drops\":%" PRIu64
	       ",\"duration_s\":%.6f,\"achieved_pps\":%.1f,\"qdisc_bypass\":%s,",
	       engine_names[s->engine], j->sent, j->bytes, j->errors, j->local_drops, dur,
	       (double)j->sent / dur,
	       (c->qdisc_bypass && s->engine != ENGINE_UDP) || s->engine == ENGINE_XDP ? "true"
										      : "false");
	if (c->rate > 0)
		/* max_behind_s: how far the most behind thread was, at its share of the rate */
		printf("\"offered_pps\":%.1f,\"max_behind\":%" PRIu64 ",\"max_behind_s\":%.6f,"
		       "\"skipped\":%" PRIu64 ",\"skipped_window\":%" PRIu64 ",",
		       c->rate, j->max_behind, (double)j->max_behind * c->threads / c->rate,
		       j->skipped, j->skipped_window);
	else
		printf("\"offered_pps\":null,");
	if (c->size)
		printf("\"size\":%u,", c->size);
	else
		printf("\"size\":\"imix\",");
	printf("\"threads\":%u,\"flows\":%u,\"ramp_s\":%g,\"run\":%u,", c->threads, c->flows,
	       c->ramp, c->run);
	/* the measured window: from the end of the ramp to the end of sending */
	printf("\"sent_window\":%" PRIu64 ",\"window_s\":%.6f,", j->sent_window,
	       j->end > s->win_start ? (double)(j->end - s->win_start) / NSEC : 0.0);
	if (s->engine != ENGINE_UDP)
		printf("\"dev\":\"%s\",", s->path.ifname);
	if (j->why[0])
		printf("\"fallback\":\"%s\",", j->why);
	if (j->note[0])
		printf("\"note\":\"%s\",", j->note);
	printf("\"per_flow_sent\":");
	print_u64_array(j->flow_sent, c->flows);
	printf("}\n");
	fflush(stdout);
}

/* Undo what send_setup() made, whichever stage it reached. */
static void send_job_free(struct send_job *j)
{
	struct sender *s = &j->s;

	if (j->gate) {
		pthread_cond_destroy(&s->gate_cond);
		pthread_mutex_destroy(&s->gate_lock);
	}
	if (s->th)
		for (unsigned i = 0; i < s->cfg.threads; i++) {
			free(s->th[i].flow_sent);
			free(s->th[i].flow_seq);
		}
	free(s->th);
	free(j->flow_sent);
	xdp_tx_close(s->xdp);
}

int cmd_send(int argc, char **argv)
{
	static struct send_job j; /* large (struct sender holds a CPU list): not on the stack */
	struct send_args a;
	int ret = send_parse(argc, argv, &a);

	if (ret >= 0)
		return ret;
	memset(&j, 0, sizeof(j));
	j.s.cfg = a.cfg;
	j.have_batch = a.have_batch;
	ret = 1;
	if (!send_setup(&j) && !send_run(&j) && !send_collect(&j)) {
		send_report(&j);
		ret = 0;
	}
	send_job_free(&j);
	return ret;
}
