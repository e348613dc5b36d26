/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rtnetlink requests sfclab's native tools make, through libmnl: a route look-up and one
 * interface's attributes (also in another namespace, by its namespace id), and any request
 * built by the caller (nl_request).
 */
#ifndef SFCLAB_NL_H
#define SFCLAB_NL_H

#include <netinet/in.h>
#include <linux/if_link.h>
#include <libmnl/libmnl.h>

/* Send one rtnetlink request and hand each message of its answer (every part of a dump) to
 * cb; 0 or -1 (errno set). */
int nl_request(struct nlmsghdr *nh, mnl_cb_t cb, void *data);

/* RTM_GETROUTE for dst: output interface, gateway, preferred source, route type. */
int nl_route_get(struct in_addr dst, int *oif, struct in_addr *gw, struct in_addr *src,
		 unsigned *type);

/* RTM_GETLINK for ifindex (in the namespace with id nsid; our own when nsid < 0): the peer's
 * ifindex and namespace id (IFLA_LINK, IFLA_LINK_NETNSID, -1 when absent) and the counters. */
int nl_link_get(int ifindex, int nsid, int *link, int *link_nsid,
		struct rtnl_link_stats64 *stats);

#endif
