// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "log.h"
#include "opt.h"

int opt_uint(const char *s, const char *what, unsigned long min, unsigned long max,
	     unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max) {
		log_err("invalid %s '%s' (expected an integer in %lu..%lu)", what, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int opt_int(const char *s, const char *what, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		log_err("invalid %s '%s' (expected an integer in %ld..%ld)", what, s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

int opt_double(const char *s, const char *what, double min, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min) || !isfinite(v)) {
		log_err("invalid %s '%s' (expected a number >= %g)", what, s, min);
		return -1;
	}
	*out = v;
	return 0;
}
