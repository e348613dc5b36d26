// SPDX-License-Identifier: Apache-2.0
/*
 * sfc-steer: load the SFC data plane's eBPF programs for one node of a lab and attach them
 * on the node's interfaces; the maps are pinned in the lab's bpffs directory.
 *
 *   sfc-steer --maps DIR --node-id N --netns NAME OBJ:PROG:IFNAME:HOOK ...
 *   sfc-steer --maps DIR --maps-of OBJ
 *
 * The second form attaches nothing: it loads OBJ only for the lab-wide maps it declares, so
 * they are made and pinned in DIR (a host's share of a lab whose chains place no node there
 * yet: its maps exist, empty, for the instances `chain add` or `chain migrate` bring later).
 * Every object is opened with DIR as libbpf's pin root, so the lab-wide maps its programs
 * declare with LIBBPF_PIN_BY_NAME are made once (by the first node) and shared by every later
 * load; `node_id`, the only variable in each object's .rodata, tells the programs their node.
 * Then, inside namespace NAME (/run/netns/NAME), each PROG is attached to IFNAME at HOOK (xdp,
 * tcx-ingress or tcx-egress); HOOK `tail` attaches nothing but puts PROG in the lab's tail-call
 * table as the node's stage IFNAME (a number below SFC_MAX_STAGES: several eBPF functions of
 * one node, include/sfc_stage.h); give those first, so the stages are there before the hook.  The attachment is held by the interface, which lives in the
 * lab's namespace: removing the namespace detaches it (this kernel refuses to pin BPF links,
 * EPERM, so links would die with this process).  The message of a failure names the object;
 * the lab's rollback removes the namespace and the maps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "netns.h"
#include "opt.h"
#include "sfc.h"
#include "sfc_stage.h"

#define MAX_ATTACH 64
#define ATTACH_XDP 37       /* enum bpf_attach_type, from the running kernel */
#define ATTACH_TCX_INGRESS 46
#define ATTACH_TCX_EGRESS 47
#define ATTACH_TAIL -1      /* not a hook: an entry of the node's tail-call table */

struct attach {
	char obj[PATH_MAX];
	char prog[64];
	char ifname[IF_NAMESIZE];
	const char *hook;
	int type;
	struct bpf_object *bo;
};

static const struct { const char *name; int type; } hooks[] = {
	{"xdp", ATTACH_XDP},
	{"tcx-ingress", ATTACH_TCX_INGRESS},
	{"tcx-egress", ATTACH_TCX_EGRESS},
	{"tail", ATTACH_TAIL},
};

static int parse_attach(const char *arg, struct attach *a)
{
	char buf[PATH_MAX + 128], *f[4];
	int n = 0;

	if (strlen(arg) >= sizeof(buf))
		goto bad;
	strcpy(buf, arg);
	for (char *s = buf; s && n < 4; n++) {
		f[n] = s;
		s = strchr(s, ':');
		if (s)
			*s++ = '\0';
	}
	if (n != 4 || strchr(f[3], ':') || !*f[0] || !*f[1])
		goto bad;
	if (strlen(f[0]) >= sizeof(a->obj) || strlen(f[1]) >= sizeof(a->prog) ||
	    !*f[2] || strlen(f[2]) >= sizeof(a->ifname) || strchr(f[2], '/'))
		goto bad;
	strcpy(a->obj, f[0]);
	strcpy(a->prog, f[1]);
	strcpy(a->ifname, f[2]);
	for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++)
		if (!strcmp(f[3], hooks[i].name)) {
			a->hook = hooks[i].name;
			a->type = hooks[i].type;
			return 0;
		}
bad:
	log_err("invalid attachment '%s' (expected OBJ:PROG:IFNAME:HOOK, HOOK one of xdp, "
		"tcx-ingress, tcx-egress, tail)", arg);
	return -1;
}

static int set_node_id(struct bpf_object *bo, unsigned int node_id)
{
	struct bpf_map *m;

	bpf_object__for_each_map(m, bo) {
		const char *name = bpf_map__name(m);
		size_t len = strlen(name), size;
		const void *init;
		char *copy;
		int err;

		if (!bpf_map__is_internal(m) || len < 7 || strcmp(name + len - 7, ".rodata"))
			continue;
		init = bpf_map__initial_value(m, &size);
		if (!init || size < sizeof(unsigned int))
			return -EINVAL;
		copy = malloc(size);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, init, size);
		memcpy(copy, &node_id, sizeof(node_id)); /* node_id is the only variable */
		err = bpf_map__set_initial_value(m, copy, size);
		free(copy);
		return err;
	}
	return -ENOENT;
}

/*
 * The lab's sfc_ports (include/sfc.h), pinned by hand as DIR/sfc_ports: before the load, the
 * pinned map is reused if there is one; after it, a map made by this load is pinned.  (libbpf
 * 1.1 cannot reuse a pinned devmap by name.)  `after` selects the step.
 */
static int ports_pin(struct bpf_object *bo, const char *maps, int after)
{
	struct bpf_map *m = bpf_object__find_map_by_name(bo, "sfc_ports");
	char path[PATH_MAX];
	int fd, err;

	if (!m)
		return 0;
	if (snprintf(path, sizeof(path), "%s/sfc_ports", maps) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if (after)
		return access(path, F_OK) ? bpf_map__pin(m, path) : 0;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	err = bpf_map__reuse_fd(m, fd);
	close(fd);
	return err;
}

/* whether attachment list `at` names program `prog` of object `path` */
static int wanted(const struct attach *at, int nat, const char *path, const char *prog)
{
	for (int i = 0; i < nat; i++)
		if (!strcmp(at[i].obj, path) && !strcmp(at[i].prog, prog))
			return 1;
	return 0;
}

/* open, set up and load object `path` for node `node_id`: only the programs `at` names are
 * loaded (each is verified apart, and the verifier is most of a load's cost: sfc_classify's
 * three programs took 0.17 s of CPU where one node attaches one or two); none for `nat` 0,
 * which makes and pins the object's maps only */
static struct bpf_object *load(const char *path, const char *maps, unsigned int node_id,
			       const struct attach *at, int nat)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = maps);
	struct bpf_object *bo = bpf_object__open_file(path, &opts);
	struct bpf_program *p;
	const char *what = "set node_id in";
	int err;

	if (!bo) {
		log_err("Failed to open %s: %s", path, strerror(errno));
		return NULL;
	}
	bpf_object__for_each_program(p, bo)
		bpf_program__set_autoload(p, wanted(at, nat, path, bpf_program__name(p)));
	err = set_node_id(bo, node_id);
	if (!err) {
		what = "reuse the lab's sfc_ports for";
		err = ports_pin(bo, maps, 0);
	}
	if (!err) {
		what = "load";
		err = bpf_object__load(bo);
	}
	if (!err) {
		what = "pin sfc_ports of";
		err = ports_pin(bo, maps, 1);
	}
	if (err) {
		log_err("Failed to %s %s: %s", what, path, strerror(-err));
		bpf_object__close(bo);
		return NULL;
	}
	return bo;
}

/* PROG as stage a->ifname of node `node_id` in the lab's tail-call table */
static int put_stage(struct attach *a, struct bpf_program *p, unsigned int node_id)
{
	struct bpf_map *m = bpf_object__find_map_by_name(a->bo, "sfc_stages");
	unsigned long stage;
	__u32 key;
	int fd = bpf_program__fd(p), err;

	if (opt_uint(a->ifname, "stage", 0, SFC_MAX_STAGES - 1, &stage))
		return -1;
	if (!m) {
		log_err("no map sfc_stages in %s: %s is no stage program", a->obj, a->prog);
		return -1;
	}
	key = node_id * SFC_MAX_STAGES + (__u32)stage;
	err = bpf_map_update_elem(bpf_map__fd(m), &key, &fd, BPF_ANY);
	if (err) {
		log_err("Failed to put %s as stage %lu of node %u: %s", a->prog, stage, node_id,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int attach_one(struct attach *a, unsigned int node_id)
{
	struct bpf_program *p = bpf_object__find_program_by_name(a->bo, a->prog);
	unsigned int ifindex;
	int fd;

	if (!p) {
		log_err("no program %s in %s", a->prog, a->obj);
		return -1;
	}
	if (a->type == ATTACH_TAIL)
		return put_stage(a, p, node_id);
	ifindex = if_nametoindex(a->ifname);
	if (!ifindex) {
		log_err("Failed to find interface %s: %s", a->ifname, strerror(errno));
		return -1;
	}
	/* held by the device (in the lab's namespace), not by a link: this kernel refuses to pin
	 * BPF links (EPERM); the namespace's removal detaches them */
	if (a->type == ATTACH_XDP)
		fd = bpf_xdp_attach((int)ifindex, bpf_program__fd(p), 0, NULL);
	else
		fd = bpf_prog_attach(bpf_program__fd(p), (int)ifindex, a->type, 0);
	if (fd < 0) {
		errno = -fd;
		log_err("Failed to attach %s to %s (%s): %s", a->prog, a->ifname, a->hook,
			strerror(errno));
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sfc-steer --maps DIR --node-id N --netns NAME "
		   "OBJ:PROG:IFNAME:HOOK ...\n"
		   "       sfc-steer --maps DIR --maps-of OBJ\n"
		   "  HOOK: xdp | tcx-ingress | tcx-egress | tail (IFNAME: the stage number)\n");
}

/* libbpf's warnings only: its info lines (for instance that it skips the objects' .sfc_contract
 * section, which carries the data-plane contract's BTF and nothing a program reads) are noise */
static int libbpf_warnings(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

int main(int argc, char **argv)
{
	const char *maps = NULL, *ns = NULL, *maps_of = NULL;
	unsigned long node_id = 0;
	struct attach at[MAX_ATTACH];
	int nat = 0, rc = 1;

	log_init(argv[0]);
	libbpf_set_print(libbpf_warnings);
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--maps") && v) {
			maps = v, i++;
		} else if (!strcmp(argv[i], "--maps-of") && v) {
			maps_of = v, i++;
		} else if (!strcmp(argv[i], "--netns") && v) {
			ns = v, i++;
		} else if (!strcmp(argv[i], "--node-id") && v) {
			if (opt_uint(v, "node id", 0, 255, &node_id))
				return 2;
			i++;
		} else if (argv[i][0] == '-') {
			usage(stderr);
			return 2;
		} else {
			if (nat == MAX_ATTACH) {
				log_err("at most %d attachments", MAX_ATTACH);
				return 2;
			}
			memset(&at[nat], 0, sizeof(at[nat]));
			if (parse_attach(argv[i], &at[nat]))
				return 2;
			nat++;
		}
	}
	if (maps && maps_of && !ns && !nat) {
		struct bpf_object *bo;

		libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
		bo = load(maps_of, maps, 0, NULL, 0);
		if (!bo)
			return 1;
		bpf_object__close(bo); /* the pinned maps stay */
		return 0;
	}
	if (!maps || !ns || !nat || maps_of) {
		usage(stderr);
		return 2;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	/* one load per object, shared by its attachments */
	for (int i = 0; i < nat; i++) {
		for (int j = 0; j < i && !at[i].bo; j++)
			if (!strcmp(at[j].obj, at[i].obj))
				at[i].bo = at[j].bo;
		if (!at[i].bo && !(at[i].bo = load(at[i].obj, maps, (unsigned int)node_id, at, nat)))
			goto out;
	}
	if (netns_enter(ns))
		goto out;
	for (int i = 0; i < nat; i++)
		if (attach_one(&at[i], (unsigned int)node_id))
			goto out;
	rc = 0;
out:
	for (int i = 0; i < nat; i++) {
		int first = 1;

		for (int j = 0; j < i; j++)
			if (at[j].bo == at[i].bo)
				first = 0;
		if (first && at[i].bo)
			bpf_object__close(at[i].bo);
	}
	return rc;
}
