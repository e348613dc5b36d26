// SPDX-License-Identifier: Apache-2.0
/*
 * The IPv6 next hop of `sfcgen send`, by rtnetlink (libmnl): the route to the destination
 * (RTM_GETROUTE: output interface, gateway, preferred source) and the neighbour entry of the
 * next hop (an RTM_GETNEIGH dump of AF_INET6 filtered to one address and interface).  The IPv4
 * path reads /proc/net/arp and lib/nl.c; IPv6 has no such file, hence this part.
 */
#define _GNU_SOURCE
#include "sfcgen.h"
#include "lib/nl.h"

#include <libmnl/libmnl.h>
#include <linux/neighbour.h>

struct route6 {
	int oif;
	struct in6_addr gw, src;
	unsigned type;
	bool found;
};

static int route6_attr(const struct nlattr *a, void *data)
{
	struct route6 *r = data;

	if (mnl_attr_type_valid(a, RTA_MAX) < 0)
		return MNL_CB_OK;
	switch (mnl_attr_get_type(a)) {
	case RTA_OIF:
		r->oif = (int)mnl_attr_get_u32(a);
		break;
	case RTA_GATEWAY:
		if (mnl_attr_get_payload_len(a) == sizeof(r->gw))
			memcpy(&r->gw, mnl_attr_get_payload(a), sizeof(r->gw));
		break;
	case RTA_PREFSRC:
		if (mnl_attr_get_payload_len(a) == sizeof(r->src))
			memcpy(&r->src, mnl_attr_get_payload(a), sizeof(r->src));
		break;
	}
	return MNL_CB_OK;
}

static int route6_msg(const struct nlmsghdr *nh, void *data)
{
	struct route6 *r = data;
	const struct rtmsg *rt = mnl_nlmsg_get_payload(nh);

	if (nh->nlmsg_type != RTM_NEWROUTE)
		return MNL_CB_OK;
	r->type = rt->rtm_type;
	r->found = true;
	return mnl_attr_parse(nh, sizeof(*rt), route6_attr, r);
}

/*
 * The kernel gives no preferred source for most IPv6 routes: the address it would choose is
 * the local end of a connected UDP socket.
 */
static int source_for(const struct in6_addr *dst, struct in6_addr *src)
{
	struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_port = htons(9), .sin6_addr = *dst};
	struct sockaddr_in6 me;
	socklen_t len = sizeof(me);
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = -1;

	if (fd < 0)
		return -1;
	if (!connect(fd, (struct sockaddr *)&to, sizeof(to)) &&
	    !getsockname(fd, (struct sockaddr *)&me, &len)) {
		*src = me.sin6_addr;
		ret = 0;
	}
	close(fd);
	return ret;
}

int route6_get(const struct in6_addr *dst, int *oif, struct in6_addr *gw, struct in6_addr *src,
	       unsigned *type)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nh = mnl_nlmsg_put_header(buf);
	struct route6 r = {0};
	struct rtmsg *rt;

	nh->nlmsg_type = RTM_GETROUTE;
	nh->nlmsg_flags = NLM_F_REQUEST;
	rt = mnl_nlmsg_put_extra_header(nh, sizeof(*rt));
	rt->rtm_family = AF_INET6;
	rt->rtm_dst_len = 128;
	mnl_attr_put(nh, RTA_DST, sizeof(*dst), dst);
	if (nl_request(nh, route6_msg, &r) || !r.found)
		return -1;
	*oif = r.oif;
	*gw = r.gw;
	*type = r.type;
	*src = r.src;
	if (IN6_IS_ADDR_UNSPECIFIED(src) && source_for(dst, src))
		return -1;
	return 0;
}

struct neigh6 {
	const struct in6_addr *addr;
	int ifindex;
	uint8_t *mac;
	bool found;
};

struct neigh6_attrs {
	const struct nlattr *dst, *lladdr;
};

static int neigh6_attr(const struct nlattr *a, void *data)
{
	struct neigh6_attrs *n = data;

	if (mnl_attr_get_type(a) == NDA_DST)
		n->dst = a;
	else if (mnl_attr_get_type(a) == NDA_LLADDR)
		n->lladdr = a;
	return MNL_CB_OK;
}

static int neigh6_msg(const struct nlmsghdr *nh, void *data)
{
	struct neigh6 *q = data;
	const struct ndmsg *nd = mnl_nlmsg_get_payload(nh);
	struct neigh6_attrs at = {0};

	if (nh->nlmsg_type != RTM_NEWNEIGH || nd->ndm_family != AF_INET6 ||
	    nd->ndm_ifindex != q->ifindex ||
	    !(nd->ndm_state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT)))
		return MNL_CB_OK;
	if (mnl_attr_parse(nh, sizeof(*nd), neigh6_attr, &at) < 0 || !at.dst || !at.lladdr)
		return MNL_CB_OK;
	if (mnl_attr_get_payload_len(at.dst) != sizeof(*q->addr) ||
	    memcmp(mnl_attr_get_payload(at.dst), q->addr, sizeof(*q->addr)) ||
	    mnl_attr_get_payload_len(at.lladdr) != 6)
		return MNL_CB_OK;
	memcpy(q->mac, mnl_attr_get_payload(at.lladdr), 6);
	q->found = true;
	return MNL_CB_OK;
}

bool neigh6_lookup(const struct in6_addr *addr, int ifindex, uint8_t mac[6])
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nh = mnl_nlmsg_put_header(buf);
	struct neigh6 q = {.addr = addr, .ifindex = ifindex, .mac = mac};
	struct ndmsg *nd;

	nh->nlmsg_type = RTM_GETNEIGH;
	nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nd = mnl_nlmsg_put_extra_header(nh, sizeof(*nd));
	nd->ndm_family = AF_INET6;
	nd->ndm_ifindex = ifindex;
	if (nl_request(nh, neigh6_msg, &q))
		return false;
	return q.found;
}

/* Make the kernel resolve nexthop: a datagram to it from a socket bound to the device starts
 * neighbour discovery. */
void neigh6_probe(const struct in6_addr *nexthop, const char *ifname, int ifindex)
{
	struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_port = htons(9),
				  .sin6_addr = *nexthop};
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (IN6_IS_ADDR_LINKLOCAL(nexthop))
		to.sin6_scope_id = (uint32_t)ifindex;
	setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)strlen(ifname));
	sendto(fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to));
	close(fd);
}
