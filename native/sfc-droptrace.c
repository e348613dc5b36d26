// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-droptrace: where did the packets die?  Counts the kernel's packet drops (tracepoint
 * skb:kfree_skb with its drop reason) in the network namespaces it is given, by namespace,
 * reason and interface, with bpf/droptrace.bpf.c.
 *
 *   sfc-droptrace NAME=PATH [NAME=PATH ...]
 *
 * Each argument names a namespace and the file that holds it (/run/netns/...).  Once attached it
 * prints "ready" on stdout.  Each line read on stdin makes it print the counts so far as one
 * JSON line; end of input (or SIGINT/SIGTERM) prints them a last time and exits, and with the
 * process goes the program (attached by a BPF link, never pinned).
 *
 *   {"drops": [{"netns": "r1", "reason": "QDISC_DROP", "ifindex": 3, "packets": 1200}, ...],
 *    "overflow": 0}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "droptrace.h"
#include "log.h"
#include "droptrace.skel.h"

#define REASON_PREFIX "SKB_DROP_REASON_"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct watch {
	const char *name;
	__u32 inum;
};

/* The name of drop reason `value` from the kernel's own BTF ("NOT_SPECIFIED", ...). */
static void reason_name(const struct btf *btf, __s32 enum_id, __u32 value, char *out, size_t len)
{
	const struct btf_type *t = enum_id > 0 ? btf__type_by_id(btf, enum_id) : NULL;
	if (t) {
		const struct btf_enum *e = btf_enum(t);
		for (int i = 0; i < btf_vlen(t); i++, e++) {
			if ((__u32)e->val != value)
				continue;
			const char *name = btf__name_by_offset(btf, e->name_off);
			if (strncmp(name, REASON_PREFIX, strlen(REASON_PREFIX)) == 0)
				name += strlen(REASON_PREFIX);
			snprintf(out, len, "%s", name);
			return;
		}
	}
	snprintf(out, len, "REASON_%u", value);
}

static int dump(struct droptrace *skel, const struct watch *w, const struct btf *btf,
		__s32 enum_id, int ncpus)
{
	int drops = bpf_map__fd(skel->maps.drops);
	struct drop_key key, next;
	__u64 *values = calloc(ncpus, sizeof(*values));
	char reason[64];
	int first = 1, err;

	if (!values)
		return -ENOMEM;
	printf("{\"drops\": [");
	err = bpf_map_get_next_key(drops, NULL, &next);
	while (err == 0) {
		key = next;
		if (bpf_map_lookup_elem(drops, &key, values) == 0) {
			__u64 sum = 0;
			for (int c = 0; c < ncpus; c++)
				sum += values[c];
			reason_name(btf, enum_id, key.reason, reason, sizeof(reason));
			printf("%s{\"netns\": \"%s\", \"reason\": \"%s\", \"ifindex\": %u, "
			       "\"packets\": %llu}", first ? "" : ", ", w[key.netns].name, reason,
			       key.ifindex, (unsigned long long)sum);
			first = 0;
		}
		err = bpf_map_get_next_key(drops, &key, &next);
	}
	__u32 zero = 0;
	__u64 overflow = 0;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.overflow), &zero, values) == 0)
		for (int c = 0; c < ncpus; c++)
			overflow += values[c];
	printf("], \"overflow\": %llu}\n", (unsigned long long)overflow);
	fflush(stdout);
	free(values);
	return 0;
}

/* each NAME=PATH argument as a watched namespace (its name and inode): 0, or the exit
 * status (2: bad input) */
static int parse_watches(int nw, char **args, struct watch *w)
{
	for (int i = 0; i < nw; i++) {
		char *eq = strchr(args[i], '=');
		struct stat st;

		if (!eq || eq == args[i]) {
			log_err("expected NAME=PATH, got '%s'", args[i]);
			return 2;
		}
		*eq = '\0';
		if (stat(eq + 1, &st) != 0) {
			log_err("Failed to stat %s: %s", eq + 1, strerror(errno));
			return 2;
		}
		w[i].name = args[i];
		w[i].inum = (__u32)st.st_ino;
	}
	return 0;
}

/* the program loaded, told which namespaces to watch, attached: the skeleton, or NULL */
static struct droptrace *start_tracing(const struct watch *w, int nw)
{
	struct droptrace *skel = droptrace__open_and_load();

	if (!skel) {
		log_err("Failed to load the BPF program: %s", strerror(errno));
		return NULL;
	}
	for (__u32 i = 0; i < (__u32)nw; i++) {
		if (bpf_map_update_elem(bpf_map__fd(skel->maps.watched), &w[i].inum, &i, BPF_ANY)) {
			log_err("Failed to watch %s: %s", w[i].name, strerror(errno));
			droptrace__destroy(skel);
			return NULL;
		}
	}
	if (droptrace__attach(skel)) {
		log_err("Failed to attach to skb:kfree_skb: %s\n", strerror(errno));
		droptrace__destroy(skel);
		return NULL;
	}
	return skel;
}

int main(int argc, char **argv)
{
	struct droptrace *skel = NULL;
	struct btf *btf = NULL;
	struct watch *w = NULL;
	int nw = argc - 1, err = 1, ncpus;
	__s32 enum_id;
	char line[256];

	log_init(argv[0]);
	if (nw < 1 || nw > DROPTRACE_MAX_NETNS || strcmp(argv[1], "--help") == 0) {
		fprintf(stderr, "usage: sfc-droptrace NAME=PATH [NAME=PATH ...] (1 to %d namespaces)\n",
			DROPTRACE_MAX_NETNS);
		return 2;
	}
	w = calloc(nw, sizeof(*w));
	if (!w)
		return 1;
	err = parse_watches(nw, argv + 1, w);
	if (err)
		goto cleanup;
	err = 1;
	ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0) {
		log_err("Failed to count CPUs: %s", strerror(-ncpus));
		goto cleanup;
	}
	btf = btf__load_vmlinux_btf();
	enum_id = btf ? btf__find_by_name_kind(btf, "skb_drop_reason", BTF_KIND_ENUM) : -1;
	skel = start_tracing(w, nw);
	if (!skel)
		goto cleanup;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
		int r = poll(&p, 1, 200);

		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		if (!fgets(line, sizeof(line), stdin))
			break; /* end of input: the last dump below */
		dump(skel, w, btf, enum_id, ncpus);
	}
	dump(skel, w, btf, enum_id, ncpus);
	err = 0;
cleanup:
	droptrace__destroy(skel);
	btf__free(btf);
	free(w);
	return err;
}
