// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-stall: how long given threads were kept from running once they had work
 * (../bpf/sched_stall.bpf.c):
 *
 *   sfc-stall TID...
 *
 * Loads and attaches the programs, watches the threads, prints "ready", then for every line
 * read on stdin prints one line: "TID:MAX:TOTAL:COUNT" for each thread, space-separated, where
 * MAX is the longest hold in nanoseconds since the previous line (a hold still going on counts
 * until now), TOTAL and COUNT all holds since the start; each line starts the next MAX.  Ends
 * at end of input; the attachments go with the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "sched_stall.skel.h"

#define MAX_THREADS 64

struct held {
	__u64 since, gen, max, total, count;
};

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sched_stall *skel = NULL;
	__u32 tids[MAX_THREADS];
	int n = argc - 1, fd, err, rc = 1;
	char line[64];

	log_init(argv[0]);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: sfc-stall TID...   (a line on stdin -> TID:MAX:TOTAL:COUNT each, ns)\n");
		return argc < 2 ? 2 : 0;
	}
	if (n > MAX_THREADS) {
		log_err("At most %d threads, got %d", MAX_THREADS, n);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(argv[i + 1], &end, 10);
		if (errno || *end || !*argv[i + 1] || v == 0 || v > 0x3fffffff) {
			log_err("Not a thread id: '%s'", argv[i + 1]);
			return 2;
		}
		tids[i] = (__u32)v;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	skel = sched_stall__open_and_load();
	if (!skel) {
		log_err("Failed to load the stall meter: %s", strerror(errno));
		goto cleanup;
	}
	fd = bpf_map__fd(skel->maps.watched);
	for (int i = 0; i < n; i++) {
		struct held zero = {0};

		if (bpf_map_update_elem(fd, &tids[i], &zero, BPF_ANY)) {
			log_err("Failed to watch thread %u: %s", tids[i], strerror(errno));
			goto cleanup;
		}
	}
	err = sched_stall__attach(skel);
	if (err) {
		log_err("Failed to attach the stall meter: %s", strerror(-err));
		goto cleanup;
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		__u64 gen = skel->bss->reading, now = now_ns();

		for (int i = 0; i < n; i++) {
			struct held h;
			__u64 max = 0;

			if (bpf_map_lookup_elem(fd, &tids[i], &h)) {
				log_err("Failed to read thread %u: %s", tids[i], strerror(errno));
				goto cleanup;
			}
			if (h.gen == gen)
				max = h.max;
			if (h.since && h.since < now && now - h.since > max)
				max = now - h.since; /* held right now */
			printf("%s%u:%llu:%llu:%llu", i ? " " : "", tids[i], (unsigned long long)max,
			       (unsigned long long)h.total, (unsigned long long)h.count);
		}
		printf("\n");
		fflush(stdout);
		skel->bss->reading = gen + 1;
	}
	rc = 0;
cleanup:
	sched_stall__destroy(skel);
	return rc;
}
