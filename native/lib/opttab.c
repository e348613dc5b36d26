// SPDX-License-Identifier: Apache-2.0
#include <getopt.h>
#include <stdio.h>

#include "opttab.h"

int opttab_parse(const char *prog, int argc, char **argv, const struct opttab *tab, unsigned n,
		 void *cfg)
{
	struct option opts[OPTTAB_MAX + 1] = {{0}};
	int opt;

	if (n > OPTTAB_MAX) {
		fprintf(stderr, "%s: option table of %u entries exceeds %u\n", prog, n,
			OPTTAB_MAX);
		return 2;
	}
	for (unsigned i = 0; i < n; i++) {
		opts[i].name = tab[i].name;
		opts[i].has_arg = tab[i].has_arg ? required_argument : no_argument;
		opts[i].val = 256 + (int)i; /* beyond every short option character */
	}
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int r;

		if (opt < 256 || opt >= 256 + (int)n)
			return 2; /* getopt_long has said why */
		r = tab[opt - 256].set(cfg, tab[opt - 256].has_arg ? optarg : NULL);
		if (r)
			return r < 0 ? 2 : OPTTAB_DONE;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		return 2;
	}
	return 0;
}
