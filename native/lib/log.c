// SPDX-License-Identifier: Apache-2.0
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static const char *prog = "sfclab";

void log_init(const char *name)
{
	const char *slash = name ? strrchr(name, '/') : NULL;

	prog = slash ? slash + 1 : (name ? name : prog);
}

const char *log_prog(void)
{
	return prog;
}

static void say(const char *level, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: %s", prog, level);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void log_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("", fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("warning: ", fmt, ap);
	va_end(ap);
}
