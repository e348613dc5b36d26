// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-softirq: per-CPU time in the network softirqs, exactly (../bpf/softirq_time.bpf.c):
 *
 *   sfc-softirq
 *
 * Loads and attaches the programs, prints "ready", then for every line read on stdin prints
 * one line: "CPU:NS" for each possible CPU (nanoseconds spent in NET_RX/NET_TX softirqs since
 * the start), space-separated.  Ends at end of input; the attachments go with the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "softirq_time.skel.h"

struct cpu_time {
	__u64 since, total, count;
};

int main(int argc, char **argv)
{
	struct softirq_time *skel;
	struct cpu_time *vals = NULL;
	char line[64];
	int ncpu, err, rc = 1;
	__u32 zero = 0;

	log_init(argv[0]);
	if (argc > 1) {
		printf("usage: sfc-softirq   (a line on stdin -> per-CPU network softirq ns)\n");
		return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? 2 : 0;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0) {
		log_err("Failed to count the CPUs: %s", strerror(-ncpu));
		return 1;
	}
	vals = calloc((size_t)ncpu, sizeof(*vals));
	skel = softirq_time__open_and_load();
	if (!vals || !skel) {
		log_err("Failed to load the softirq timer: %s", strerror(errno));
		goto cleanup;
	}
	err = softirq_time__attach(skel);
	if (err) {
		log_err("Failed to attach the softirq timer: %s", strerror(-err));
		goto cleanup;
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.times), &zero, vals)) {
			log_err("Failed to read the softirq times: %s", strerror(errno));
			goto cleanup;
		}
		for (int c = 0; c < ncpu; c++)
			printf("%s%d:%llu", c ? " " : "", c, (unsigned long long)vals[c].total);
		printf("\n");
		fflush(stdout);
	}
	rc = 0;
cleanup:
	softirq_time__destroy(skel);
	free(vals);
	return rc;
}
