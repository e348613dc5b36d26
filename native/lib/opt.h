/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checked numbers from the command line: the whole string must be the number, in range, or
 * the option is refused with "PROG: invalid WHAT 'TEXT' (expected ...)" and -1.
 */
#ifndef SFCLAB_OPT_H
#define SFCLAB_OPT_H

int opt_uint(const char *s, const char *what, unsigned long min, unsigned long max,
	     unsigned long *out);
int opt_int(const char *s, const char *what, long min, long max, long *out);
int opt_double(const char *s, const char *what, double min, double *out);

#endif
