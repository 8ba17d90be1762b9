/* SPDX-License-Identifier: MIT */
/* haccel-ctl driver: haccel.ko's status, quotas and clients; the probe doctor shares. */
#ifndef HACCEL_TOOLS_DRIVER_H
#define HACCEL_TOOLS_DRIVER_H

#include <jansson.h>

/*
 * The library's probe of haccel.ko as JSON (loaded, usable, render node,
 * ABI versions and their compatibility, capabilities, the provider this
 * process would pin with, reason): what `driver status` and `doctor`
 * both report, so the two never disagree. NULL when out of memory.
 */
json_t *driver_probe_json(void);

/*
 * Run `haccel-ctl [OPTIONS] driver SUBCOMMAND ...`: argv is haccel-ctl's
 * own. Returns the exit status (0, 1 failure, 2 usage).
 */
int driver_main(int argc, char **argv);

#endif /* HACCEL_TOOLS_DRIVER_H */
