/* SPDX-License-Identifier: MIT */
/* Shared by the command-line tools: exit codes, output, time, sizes. */
#ifndef HACCEL_TOOLS_COMMON_H
#define HACCEL_TOOLS_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of every tool. */
#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2

struct haccel_ctx;

/* Program name for messages ("haccel-ctl"). */
extern const char *tool_name;

struct option;

/*
 * Name the tool for its messages and check standard output at exit: a
 * write error on it (a full disk, /dev/full, a closed descriptor) makes the
 * tool exit 1 saying "TOOL: write error on standard output: <reason>",
 * whatever main returned.
 */
void tool_init(const char *name);

/* fflush(stdout), keeping the reason of a failure for the message at exit.
 * Returns 0 or -EIO. */
int tool_flush(void);

/* "haccel-ctl: message" on stderr. */
void tool_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print v as indented JSON on stdout, newline-terminated and flushed;
 * steals v. Returns 0, or -EIO when stdout could not be written (said at
 * exit, see tool_init()). */
int tool_print_json(json_t *v);

/*
 * After getopt_long returned '?' (with opterr = 0): say which option was
 * wrong, "TOOL: CMD: unknown option '--x'" (CMD and its ": " left out when
 * NULL), "option '--x' needs a value" or "option '--x' takes no value".
 * argv and lo as given to getopt_long.
 */
void tool_option_error(const char *cmd, char *const *argv, const struct option *lo);

/* The long name of option val in lo ("max-new"), or "?". */
const char *tool_option_name(const struct option *lo, int val);

/* Whether msg names path itself ("PATH: ...", "... PATH/config.json: ..."),
 * so that a prefix of path would say it twice. */
bool tool_mentions(const char *msg, const char *path);

/*
 * A library message about staging buffers that could not be pinned or
 * registered, made a tool's: the library's advice naming its flag
 * (HACCEL_HOSTMEM_ALLOW_UNPINNED in hostmem_flags) is taken out and, unless
 * allowed, "(--allow-unpinned VERB through unpinned, unregistered staging
 * instead)" appended.
 */
void tool_unpinned_hint(char *msg, size_t len, int allowed, const char *verb);

/* A checkpoint path that the library refused: when it is a JSON object
 * that is not an index (no "weight_map": a config.json), msg says so
 * instead ("PATH: not a safetensors file or index ..."). */
void tool_weights_error(const char *path, char *msg, size_t len);

/* Whether a comma-separated list has an empty element ("", "1,,2", "1,"). */
bool tool_list_has_empty(const char *s);

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
