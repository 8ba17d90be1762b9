/* SPDX-License-Identifier: MIT */
/* Shared by the command-line tools: exit codes, output, time, sizes. */
#ifndef HACCEL_TOOLS_COMMON_H
#define HACCEL_TOOLS_COMMON_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of every tool. */
#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2

struct haccel_ctx;

/* Program name for messages ("haccel-ctl"). */
extern const char *tool_name;

/* "haccel-ctl: message" on stderr. */
void tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print v as indented JSON on stdout, newline-terminated; steals v. */
int tool_print_json(json_t *v);

/*
 * A libhaccel context for a tool that reports each failure itself, with
 * haccel_last_error()'s message: its log sink drops error lines, so the
 * user reads each error once, and prints the other levels to stderr as
 * the library's default sink does ("haccel: warn: ..."). level: an enum
 * haccel_log_level, or -1 for the library's default (warn; HACCEL_LOG
 * overrides either). Returns haccel_open()'s result.
 */
int tool_ctx_open(int level, struct haccel_ctx **ctx);

/* Monotonic clock in nanoseconds. */
uint64_t tool_now_ns(void);

/* "1.5 GiB" style, into buf. */
const char *tool_bytes(uint64_t n, char *buf, size_t len);

/* Parse an unsigned size with optional K/M/G/T suffix (powers of 1024).
 * Returns 0 or -EINVAL. */
int tool_parse_size(const char *s, uint64_t *out);

/* Parse an unsigned integer in [min, max]. Returns 0 or -EINVAL. */
int tool_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Read a whole small file (sysfs, procfs) into buf, trailing newline
 * removed. Returns bytes read or -errno. */
int tool_read_file(const char *path, char *buf, size_t len);

/*
 * After getopt_long over the options of a haccel-ctl command `cmd`
 * (argv[optind] is cmd itself): --help prints usage to stdout, no
 * subcommand is a usage error naming the ones there are (subs, e.g.
 * "inspect or verify"). Returns the subcommand, optind past it; or NULL
 * with *rc the exit code to return.
 */
const char *tool_subcommand(int argc, char **argv, const char *cmd, const char *subs, int help,
			    void (*usage)(FILE *f), int *rc);

#endif /* HACCEL_TOOLS_COMMON_H */
