// SPDX-License-Identifier: Apache-2.0
/* Frames: their sizes (fixed or IMIX 7:4:1), headers and probe. */
#define _GNU_SOURCE
#include "sfcgen.h"

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

/* Write the Ethernet, IPv4 and UDP headers of a frame of `size` bytes (FCS excluded). */
void build_headers(uint8_t *f, const struct sender *s, unsigned size)
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

