// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-dpi: in-line deep packet inspection for an sfclab "dpi" node.
 *
 * Reads the packets an nftables "queue num Q bypass" rule hands to NFQUEUE Q in the node's
 * namespace (ip6tables' too in a lab with IPv6), classifies each IPv4 and IPv6 flow by
 * application protocol with nDPI, and accepts every packet (the function observes, it never
 * drops).  An IPv6 packet's ports are read after its extension headers (hop-by-hop, routing,
 * destination options, AH; a fragment header ends the walk, and only a first fragment has
 * ports); a packet that is neither IPv4 nor IPv6, or too short for its headers, is counted in
 * "non_ip" and passed.  The flow table is written as JSON to the
 * output file every INTERVAL seconds, on SIGUSR1 and on SIGTERM/SIGINT (then it exits).
 *
 * A flow is the unordered pair of (address, port) ends plus the IP protocol; "src" is the end
 * that sent its first packet.  Detection stops once nDPI has a protocol and needs no more
 * packets, or after MAXPKTS packets (then nDPI is asked for its best guess).
 *
 *   sfc-dpi [-q QUEUE] [-o FILE] [-i SECONDS] [-n MAXPKTS] [-m MAXFLOWS]
 */

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>
#include <ndpi/ndpi_api.h>

#include "log.h"
#include "opt.h"

#define HASH_BUCKETS 16384

/* an address of either family: IPv4 in the first 4 bytes, the rest zero */
struct addr {
	uint8_t b[16];
};

struct flow {
	struct flow *next;
	struct addr saddr, daddr;   /* network order, as first seen */
	uint8_t family;             /* 4 or 6 */
	uint16_t sport, dport;      /* host order */
	uint8_t l4;
	uint8_t done;               /* detection finished */
	uint8_t guessed;
	struct ndpi_flow_struct *nflow;
	ndpi_protocol proto;
	uint64_t packets, bytes, pkts_to_dst, pkts_to_src;
	uint64_t first_ms, last_ms;
	uint32_t inspected;
};

struct state {
	struct ndpi_detection_module_struct *ndpi;
	struct flow *buckets[HASH_BUCKETS];
	unsigned long nflows, maxflows;
	uint64_t packets, bytes, untracked, non_ip, ipv6;
	unsigned maxpkts;
	const char *out;
	int queue;
	uint64_t started_ms;
};

static volatile sig_atomic_t want_dump, want_exit;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		want_dump = 1;
	else
		want_exit = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned hash_key(const struct addr *a, uint16_t ap, const struct addr *b, uint16_t bp,
			 uint8_t l4)
{
	/* symmetric: both directions land in the same bucket */
	uint32_t x = 0, w, v;
	unsigned i;

	for (i = 0; i < sizeof(a->b); i += 4) {
		memcpy(&w, a->b + i, 4);
		memcpy(&v, b->b + i, 4);
		x = (x ^ w ^ v) * 2654435761u;
	}
	x ^= ((uint32_t)(ap ^ bp) << 8) ^ l4;
	x ^= x >> 15;
	return x % HASH_BUCKETS;
}

static int same(const struct addr *a, const struct addr *b)
{
	return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

static struct flow *lookup(struct state *st, uint8_t family, const struct addr *sa, uint16_t sp,
			   const struct addr *da, uint16_t dp, uint8_t l4, int *to_dst)
{
	unsigned h = hash_key(sa, sp, da, dp, l4);
	struct flow *f;

	for (f = st->buckets[h]; f; f = f->next) {
		if (f->l4 != l4 || f->family != family)
			continue;
		if (same(&f->saddr, sa) && f->sport == sp && same(&f->daddr, da) && f->dport == dp) {
			*to_dst = 1;
			return f;
		}
		if (same(&f->saddr, da) && f->sport == dp && same(&f->daddr, sa) && f->dport == sp) {
			*to_dst = 0;
			return f;
		}
	}
	if (st->nflows >= st->maxflows)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->nflow = ndpi_flow_malloc(SIZEOF_FLOW_STRUCT);
	if (!f->nflow) {
		free(f);
		return NULL;
	}
	memset(f->nflow, 0, SIZEOF_FLOW_STRUCT);
	f->family = family;
	f->saddr = *sa;
	f->daddr = *da;
	f->sport = sp;
	f->dport = dp;
	f->l4 = l4;
	f->next = st->buckets[h];
	st->buckets[h] = f;
	st->nflows++;
	*to_dst = 1;
	return f;
}

static int known(ndpi_protocol p)
{
	return p.app_protocol != NDPI_PROTOCOL_UNKNOWN || p.master_protocol != NDPI_PROTOCOL_UNKNOWN;
}

static void finish(struct state *st, struct flow *f)
{
	if (f->done)
		return;
	if (!known(f->proto)) {
		uint8_t guessed = 0;

		f->proto = ndpi_detection_giveup(st->ndpi, f->nflow, 1, &guessed);
		f->guessed = guessed;
	}
	ndpi_free_flow(f->nflow);
	f->nflow = NULL;
	f->done = 1;
}

/* The IPv4 header of `pkt`: addresses, L4 protocol and where ports start (-1: none, a later
 * fragment).  0 on success, -1 if it is no IPv4 header. */
static int parse_ipv4(const unsigned char *pkt, int len, struct addr *sa, struct addr *da,
		      uint8_t *l4, int *l4off)
{
	unsigned ihl;

	if (len < 20)
		return -1;
	ihl = (pkt[0] & 0x0f) * 4;
	if (ihl < 20 || (int)ihl > len)
		return -1;
	*l4 = pkt[9];
	memcpy(sa->b, pkt + 12, 4);
	memcpy(da->b, pkt + 16, 4);
	/* ports only from the first fragment */
	*l4off = (ntohs(*(const uint16_t *)(pkt + 6)) & 0x1fff) == 0 ? (int)ihl : -1;
	return 0;
}

#define MAX_EXT_HEADERS 8

/* The IPv6 header of `pkt` and its extension headers, as parse_ipv4. */
static int parse_ipv6(const unsigned char *pkt, int len, struct addr *sa, struct addr *da,
		      uint8_t *l4, int *l4off)
{
	int off = 40, n;
	uint8_t next;

	if (len < 40)
		return -1;
	memcpy(sa->b, pkt + 8, 16);
	memcpy(da->b, pkt + 24, 16);
	next = pkt[6];
	for (n = 0; n < MAX_EXT_HEADERS; n++) {
		switch (next) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
			if (off + 2 > len)
				return -1;
			next = pkt[off];
			off += (pkt[off + 1] + 1) * 8;
			continue;
		case IPPROTO_AH:
			if (off + 2 > len)
				return -1;
			next = pkt[off];
			off += (pkt[off + 1] + 2) * 4;
			continue;
		case IPPROTO_FRAGMENT:
			if (off + 8 > len)
				return -1;
			*l4 = pkt[off];
			/* the fragment offset: only the first fragment carries the ports */
			*l4off = (ntohs(*(const uint16_t *)(pkt + off + 2)) & 0xfff8) == 0 ?
				off + 8 : -1;
			return 0;
		default:
			*l4 = next;
			*l4off = off;
			return 0;
		}
	}
	*l4 = next;
	*l4off = -1;
	return 0;
}

static void classify(struct state *st, const unsigned char *pkt, int len)
{
	struct addr sa = { { 0 } }, da = { { 0 } };
	uint16_t sp = 0, dp = 0;
	uint8_t l4 = 0, family = len > 0 ? pkt[0] >> 4 : 0;
	int l4off = -1, bad;
	uint64_t ms = now_ms();
	struct flow *f;
	int to_dst;

	st->packets++;
	st->bytes += len;
	if (family == 4)
		bad = parse_ipv4(pkt, len, &sa, &da, &l4, &l4off);
	else if (family == 6)
		bad = parse_ipv6(pkt, len, &sa, &da, &l4, &l4off);
	else
		bad = -1;
	if (bad) {
		st->non_ip++;
		return;
	}
	if (family == 6)
		st->ipv6++;
	if ((l4 == IPPROTO_TCP || l4 == IPPROTO_UDP) && l4off >= 0 && l4off + 4 <= len) {
		sp = ntohs(*(const uint16_t *)(pkt + l4off));
		dp = ntohs(*(const uint16_t *)(pkt + l4off + 2));
	}
	f = lookup(st, family, &sa, sp, &da, dp, l4, &to_dst);
	if (!f) {
		st->untracked++;
		return;
	}
	if (!f->packets)
		f->first_ms = ms;
	f->last_ms = ms;
	f->packets++;
	f->bytes += len;
	if (to_dst)
		f->pkts_to_dst++;
	else
		f->pkts_to_src++;
	if (f->done)
		return;
	f->inspected++;
	f->proto = ndpi_detection_process_packet(st->ndpi, f->nflow, pkt,
						 len > 0xffff ? 0xffff : (unsigned short)len, ms);
	if ((known(f->proto) && !ndpi_extra_dissection_possible(st->ndpi, f->nflow)) ||
	    f->inspected >= st->maxpkts)
		finish(st, f);
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
		     void *data)
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	unsigned char *payload;
	uint32_t id = ph ? ntohl(ph->packet_id) : 0;
	int len = nfq_get_payload(nfa, &payload);

	(void)msg;
	if (len > 0)
		classify(data, payload, len);
	return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
}

static const char *l4_name(uint8_t l4, char *buf, size_t n)
{
	switch (l4) {
	case IPPROTO_TCP: return "tcp";
	case IPPROTO_UDP: return "udp";
	case IPPROTO_ICMP: return "icmp";
	case IPPROTO_ICMPV6: return "icmpv6";
	default:
		snprintf(buf, n, "%u", l4);
		return buf;
	}
}

/* Protocol names are nDPI's own (letters, digits, '.', '_', '-'): no JSON escaping needed. */
static void dump(struct state *st, int final)
{
	char tmp[4096], name[64], l4buf[8], src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	const char *sep = "";
	FILE *fp;
	unsigned i;

	if (!st->out)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", st->out);
	fp = fopen(tmp, "w");
	if (!fp) {
		log_err("Failed to open %s: %s", tmp, strerror(errno));
		return;
	}
	fprintf(fp, "{\"queue\": %d, \"time\": %.3f, \"started\": %.3f, \"final\": %s, "
		"\"packets\": %llu, \"bytes\": %llu, \"ipv6\": %llu, \"non_ip\": %llu, "
		"\"untracked\": %llu, \"flow_count\": %lu, \"flows\": [",
		st->queue, now_ms() / 1000.0, st->started_ms / 1000.0, final ? "true" : "false",
		(unsigned long long)st->packets, (unsigned long long)st->bytes,
		(unsigned long long)st->ipv6, (unsigned long long)st->non_ip,
		(unsigned long long)st->untracked, st->nflows);
	for (i = 0; i < HASH_BUCKETS; i++) {
		struct flow *f;

		for (f = st->buckets[i]; f; f = f->next) {
			const char *state = f->done ? (known(f->proto) ?
				(f->guessed ? "guessed" : "detected") : "unknown") : "in progress";

			ndpi_protocol2name(st->ndpi, f->proto, name, sizeof(name));
			inet_ntop(f->family == 6 ? AF_INET6 : AF_INET, f->saddr.b, src, sizeof(src));
			inet_ntop(f->family == 6 ? AF_INET6 : AF_INET, f->daddr.b, dst, sizeof(dst));
			fprintf(fp, "%s\n  {\"src\": \"%s\", \"sport\": %u, \"dst\": \"%s\", "
				"\"dport\": %u, \"l4\": \"%s\", \"protocol\": \"%s\", "
				"\"master\": \"%s\", \"app\": \"%s\", \"category\": \"%s\", "
				"\"detection\": \"%s\", \"packets\": %llu, \"bytes\": %llu, "
				"\"packets_to_dst\": %llu, \"packets_to_src\": %llu, "
				"\"first_seen\": %.3f, \"last_seen\": %.3f}",
				sep, src, f->sport, dst, f->dport, l4_name(f->l4, l4buf, sizeof(l4buf)),
				name, ndpi_get_proto_name(st->ndpi, f->proto.master_protocol),
				ndpi_get_proto_name(st->ndpi, f->proto.app_protocol),
				ndpi_category_get_name(st->ndpi, f->proto.category), state,
				(unsigned long long)f->packets, (unsigned long long)f->bytes,
				(unsigned long long)f->pkts_to_dst, (unsigned long long)f->pkts_to_src,
				f->first_ms / 1000.0, f->last_ms / 1000.0);
			sep = ",";
		}
	}
	fprintf(fp, "\n]}\n");
	if (fclose(fp) != 0 || rename(tmp, st->out) != 0)
		log_err("Failed to write %s: %s", st->out, strerror(errno));
}

static void free_flows(struct state *st)
{
	unsigned i;

	for (i = 0; i < HASH_BUCKETS; i++) {
		struct flow *f = st->buckets[i], *next;

		for (; f; f = next) {
			next = f->next;
			if (f->nflow)
				ndpi_free_flow(f->nflow);
			free(f);
		}
		st->buckets[i] = NULL;
	}
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-q QUEUE] [-o FILE] [-i SECONDS] [-n MAXPKTS] [-m MAXFLOWS]\n",
		prog);
}

/* parse the command line into `st` and `interval`: -1 to go on, else the exit status */
static int parse_args(int argc, char **argv, struct state *st, double *interval)
{
	static const struct option opts[] = {
		{ "queue", required_argument, NULL, 'q' },
		{ "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ "max-packets", required_argument, NULL, 'n' },
		{ "max-flows", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long v;
	int opt;

	while ((opt = getopt_long(argc, argv, "q:o:i:n:m:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'q':
			if (opt_uint(optarg, "--queue", 0, 65535, &v))
				return 2;
			st->queue = (int)v;
			break;
		case 'o': st->out = optarg; break;
		case 'i':
			if (opt_double(optarg, "--interval", 0.001, interval))
				return 2;
			break;
		case 'n':
			if (opt_uint(optarg, "--max-packets", 1, 1000000, &v))
				return 2;
			st->maxpkts = (unsigned)v;
			break;
		case 'm':
			if (opt_uint(optarg, "--max-flows", 1, 100000000, &v))
				return 2;
			st->maxflows = v;
			break;
		case 'h': usage(argv[0]); return 0;
		default: usage(argv[0]); return 2;
		}
	}
	return -1;
}

/* nDPI with every protocol, and nfqueue `st->queue` bound to on_packet: 0 or -1 */
static int open_classifier(struct state *st, struct nfq_handle **h, struct nfq_q_handle **qh)
{
	NDPI_PROTOCOL_BITMASK all;

	st->ndpi = ndpi_init_detection_module(ndpi_no_prefs);
	if (!st->ndpi) {
		log_err("Failed to initialise nDPI");
		return -1;
	}
	NDPI_BITMASK_SET_ALL(all);
	ndpi_set_protocol_detection_bitmask2(st->ndpi, &all);
	ndpi_finalize_initialization(st->ndpi);

	*h = nfq_open();
	if (!*h) {
		log_err("Failed to open nfqueue: %s", strerror(errno));
		return -1;
	}
	*qh = nfq_create_queue(*h, (uint16_t)st->queue, on_packet, st);
	if (!*qh) {
		log_err("Failed to bind queue %d: %s", st->queue, strerror(errno));
		return -1;
	}
	if (nfq_set_mode(*qh, NFQNL_COPY_PACKET, 0xffff) < 0) {
		log_err("Failed to set copy mode: %s", strerror(errno));
		return -1;
	}
	/* when the queue is full the kernel accepts instead of dropping */
	nfq_set_queue_flags(*qh, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN);
	nfq_set_queue_maxlen(*qh, 4096);
	nfnl_rcvbufsiz(nfq_nfnlh(*h), 8 << 20);
	return 0;
}

/* classify what the queue hands over, dumping every `interval` s (and on SIGUSR1) until
 * SIGTERM or SIGINT; then finish every flow and dump the last time: 0 or -1 */
static int run(struct state *st, struct nfq_handle *h, double interval)
{
	static char buf[65536 + 4096];
	int fd = nfq_fd(h);
	uint64_t next_dump;

	st->started_ms = now_ms();
	dump(st, 0);
	next_dump = now_ms() + (uint64_t)(interval * 1000);
	while (!want_exit) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t wait = (int64_t)next_dump - (int64_t)now_ms();
		int n = poll(&pfd, 1, wait < 0 ? 0 : (int)wait);

		if (n > 0) {
			ssize_t rv = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (rv > 0)
				nfq_handle_packet(h, buf, (int)rv);
			else if (rv < 0 && errno != EAGAIN && errno != EINTR && errno != ENOBUFS) {
				log_err("Failed to receive from nfqueue: %s", strerror(errno));
				return -1;
			}
		}
		if (want_dump || now_ms() >= next_dump) {
			want_dump = 0;
			dump(st, 0);
			next_dump = now_ms() + (uint64_t)(interval * 1000);
		}
	}
	for (unsigned i = 0; i < HASH_BUCKETS; i++)
		for (struct flow *f = st->buckets[i]; f; f = f->next)
			finish(st, f);
	dump(st, 1);
	return 0;
}

int main(int argc, char **argv)
{
	static struct state st = { .maxflows = 65536, .maxpkts = 64 };
	struct nfq_handle *h = NULL;
	struct nfq_q_handle *qh = NULL;
	struct sigaction sa;
	double interval = 1.0;
	int err = 1, rc;

	log_init(argv[0]);
	rc = parse_args(argc, argv, &st, &interval);
	if (rc >= 0)
		return rc;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;     /* no SA_RESTART: poll() returns EINTR */
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (!open_classifier(&st, &h, &qh) && !run(&st, h, interval))
		err = 0;
	if (qh)
		nfq_destroy_queue(qh);
	if (h)
		nfq_close(h);
	free_flows(&st);
	if (st.ndpi)
		ndpi_exit_detection_module(st.ndpi);
	return err;
}
