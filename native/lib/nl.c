// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <linux/rtnetlink.h>
#include <libmnl/libmnl.h>

#include "log.h"
#include "nl.h"

/*
 * Send one request and hand each message of the answer to cb (every part of a dump's answer
 * when nh asks for a dump); 0 or -1 (errno set).
 */
int nl_request(struct nlmsghdr *nh, mnl_cb_t cb, void *data)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	unsigned seq = (unsigned)time(NULL), portid;
	int ret = -1, r;
	ssize_t len;

	if (!nl)
		return -1;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
		goto cleanup;
	portid = mnl_socket_get_portid(nl);
	nh->nlmsg_seq = seq;
	if (mnl_socket_sendto(nl, nh, nh->nlmsg_len) < 0)
		goto cleanup;
	do {
		len = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (len < 0)
			goto cleanup;
		r = mnl_cb_run(buf, (size_t)len, seq, portid, cb, data);
	} while (r > MNL_CB_STOP && (nh->nlmsg_flags & NLM_F_DUMP));
	ret = r < 0 ? -1 : 0;
cleanup:
	mnl_socket_close(nl);
	return ret;
}

struct route {
	int *oif;
	struct in_addr *gw, *src;
	unsigned *type;
	int found;
};

static int route_attr(const struct nlattr *a, void *data)
{
	struct route *r = data;

	if (mnl_attr_type_valid(a, RTA_MAX) < 0)
		return MNL_CB_OK;
	switch (mnl_attr_get_type(a)) {
	case RTA_OIF:
		*r->oif = (int)mnl_attr_get_u32(a);
		break;
	case RTA_GATEWAY:
		r->gw->s_addr = mnl_attr_get_u32(a);
		break;
	case RTA_PREFSRC:
		r->src->s_addr = mnl_attr_get_u32(a);
		break;
	}
	return MNL_CB_OK;
}

static int route_msg(const struct nlmsghdr *nh, void *data)
{
	struct route *r = data;
	const struct rtmsg *rt = mnl_nlmsg_get_payload(nh);

	*r->type = rt->rtm_type;
	r->found = 1;
	return mnl_attr_parse(nh, sizeof(*rt), route_attr, r);
}

int nl_route_get(struct in_addr dst, int *oif, struct in_addr *gw, struct in_addr *src,
		 unsigned *type)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rt;
	struct route r = {oif, gw, src, type, 0};

	*oif = 0;
	gw->s_addr = 0;
	src->s_addr = 0;
	*type = 0;
	nh->nlmsg_type = RTM_GETROUTE;
	nh->nlmsg_flags = NLM_F_REQUEST;
	rt = mnl_nlmsg_put_extra_header(nh, sizeof(*rt));
	rt->rtm_family = AF_INET;
	rt->rtm_dst_len = 32;
	mnl_attr_put_u32(nh, RTA_DST, dst.s_addr);
	if (nl_request(nh, route_msg, &r) < 0 || !r.found) {
		log_err("Failed to find a route to %s: %s", inet_ntoa(dst),
			strerror(errno ? errno : ENETUNREACH));
		return -1;
	}
	return 0;
}

struct link {
	int *link, *link_nsid;
	struct rtnl_link_stats64 *stats;
	int found;
};

static int link_attr(const struct nlattr *a, void *data)
{
	struct link *l = data;

	switch (mnl_attr_get_type(a)) {
	case IFLA_LINK:
		*l->link = (int)mnl_attr_get_u32(a);
		break;
	case IFLA_LINK_NETNSID:
		*l->link_nsid = (int)mnl_attr_get_u32(a);
		break;
	case IFLA_STATS64:
		if (mnl_attr_get_payload_len(a) >= sizeof(*l->stats))
			memcpy(l->stats, mnl_attr_get_payload(a), sizeof(*l->stats));
		break;
	}
	return MNL_CB_OK;
}

static int link_msg(const struct nlmsghdr *nh, void *data)
{
	struct link *l = data;

	if (nh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	l->found = 1;
	return mnl_attr_parse(nh, sizeof(struct ifinfomsg), link_attr, l);
}

int nl_link_get(int ifindex, int nsid, int *link, int *link_nsid,
		struct rtnl_link_stats64 *stats)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifi;
	struct link l = {link, link_nsid, stats, 0};

	*link = -1;
	*link_nsid = -1;
	nh->nlmsg_type = RTM_GETLINK;
	nh->nlmsg_flags = NLM_F_REQUEST;
	ifi = mnl_nlmsg_put_extra_header(nh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	if (nsid >= 0)
		mnl_attr_put_u32(nh, IFLA_TARGET_NETNSID, (uint32_t)nsid);
	if (nl_request(nh, link_msg, &l) < 0 || !l.found)
		return -1;
	return 0;
}
