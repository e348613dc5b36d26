/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Option tables: a command's long options as one table, an entry per option naming its setter.
 * opttab_parse() walks argv with getopt_long and calls each entry's setter on the command's
 * own configuration; a setter checks its text (lib/opt.h) and returns 0, OPTTAB_DONE (it has
 * answered, e.g. --help: stop and exit 0) or -1 after printing why (exit 2).
 */
#ifndef SFCLAB_OPTTAB_H
#define SFCLAB_OPTTAB_H

#include <stdbool.h>

#define OPTTAB_DONE 1
#define OPTTAB_MAX 48u /* most entries in one table */

struct opttab {
	const char *name; /* without the leading "--" */
	bool has_arg;
	int (*set)(void *cfg, const char *arg); /* arg is NULL for a flag */
};

/*
 * Parse argv[1..argc-1] (argv[0] is the command) against n entries of tab.  Returns 0 when
 * every option was taken, OPTTAB_DONE when a setter answered, 2 on bad input (an unknown
 * option, a refused value or a stray argument, each reported on stderr as "PROG: ...").
 */
int opttab_parse(const char *prog, int argc, char **argv, const struct opttab *tab, unsigned n,
		 void *cfg);

#endif
