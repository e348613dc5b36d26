// SPDX-License-Identifier: Apache-2.0
/* Entering a namespace by name; see netns.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "netns.h"

int netns_enter(const char *name)
{
	char path[PATH_MAX];
	int fd;

	if (!strcmp(name, "-"))
		return 0;
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
		log_err("invalid namespace name '%s'", name);
		return -1;
	}
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		log_err("Failed to enter namespace %s: %s", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}
