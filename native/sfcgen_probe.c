// SPDX-License-Identifier: Apache-2.0
/* Frames: their sizes (fixed or IMIX 7:4:1), headers and probe, over IPv4 or IPv6. */
#define _GNU_SOURCE
#include "sfcgen.h"

#include <netinet/ip6.h>

const unsigned imix_sizes[12] = {64, 64, 64, 64, 64, 64, 64, 594, 594, 594, 594, 1518};

unsigned frame_size_at(const struct send_cfg *c, uint64_t n)
{
	return c->size ? c->size : imix_sizes[n % IMIX_LEN];
}

/* Packets this thread sends in all: the integral of its rate over the duration. */

uint16_t ip_checksum(const void *data, size_t len)
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

/* Ones' complement sum of len bytes (even) in network order, added to sum, not folded. */
static uint32_t sum16(const uint8_t *p, size_t len, uint32_t sum)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	return sum;
}

/*
 * The UDP checksum of an IPv6 frame (mandatory in IPv6, RFC 8200 8.1): the pseudo-header
 * (addresses, UDP length, next header), the UDP header and the probe.  The payload after the
 * probe is zero in every frame sfcgen builds and adds nothing, so the cost does not grow with
 * the frame size.
 */
void udp6_checksum(uint8_t *f)
{
	struct ip6_hdr *ip6 = (struct ip6_hdr *)(f + 14);
	struct udphdr *udp = (struct udphdr *)(f + 54);
	uint32_t sum = 0;
	uint16_t c;

	udp->check = 0;
	sum = sum16((const uint8_t *)&ip6->ip6_src, 32, sum);
	sum += ntohs(udp->len);
	sum += IPPROTO_UDP;
	sum = sum16((const uint8_t *)udp, 8 + sizeof(struct probe), sum);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	c = htons((uint16_t)~sum);
	udp->check = c ? c : 0xffff; /* 0 means "no checksum", which IPv6 forbids */
}

/* Ethernet, IPv6 and UDP headers; the checksum is written once the probe is stamped. */
static void build_headers6(uint8_t *f, const struct sender *s, unsigned size)
{
	struct ip6_hdr *ip6 = (struct ip6_hdr *)(f + 14);
	struct udphdr *udp = (struct udphdr *)(f + 54);
	unsigned payload = size - 14 - 4 - 40;

	f[12] = 0x86;
	f[13] = 0xdd;
	memset(ip6, 0, sizeof(*ip6));
	ip6->ip6_flow = htonl(6u << 28);
	ip6->ip6_plen = htons((uint16_t)payload);
	ip6->ip6_nxt = IPPROTO_UDP;
	ip6->ip6_hlim = 64;
	ip6->ip6_src = s->path.src6;
	ip6->ip6_dst = s->cfg.dst6;
	udp->source = 0;
	udp->dest = htons((uint16_t)s->cfg.dport);
	udp->len = htons((uint16_t)payload);
	udp->check = 0;
}

/* Write the Ethernet, IP and UDP headers of a frame of `size` bytes (FCS excluded). */
void build_headers(uint8_t *f, const struct sender *s, unsigned size)
{
	struct iphdr *ip = (struct iphdr *)(f + 14);
	struct udphdr *udp = (struct udphdr *)(f + 34);
	unsigned ip_len = size - 14 - 4;

	memcpy(f, s->path.dst_mac, 6);
	memcpy(f + 6, s->path.src_mac, 6);
	if (s->cfg.family == AF_INET6) {
		build_headers6(f, s, size);
		return;
	}
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

