/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Messages of sfclab's native tools, one style: "PROG: Failed to X: strerror" on stderr.
 * log_init(argv[0]) once; log_err()/log_warn() then prefix the program's name.
 */
#ifndef SFCLAB_LOG_H
#define SFCLAB_LOG_H

void log_init(const char *prog);
const char *log_prog(void);
void log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
