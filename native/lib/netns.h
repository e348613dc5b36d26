/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Entering a lab's network namespace by its name under /run/netns.  The name comes from
 * sfclab's plan, never a path: a name with '/' (or "." / "..") is refused.
 */
#ifndef SFCLAB_NETNS_H
#define SFCLAB_NETNS_H

/* setns() the calling thread into /run/netns/NAME ("-": stay in the namespace the tool runs in,
 * as on a host driven over SSH); 0, or -1 with the reason logged */
int netns_enter(const char *name);

#endif
