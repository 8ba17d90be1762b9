/* SPDX-License-Identifier: MIT */
/* haccel-ctl doctor: what this node supports, as one JSON report. */
#ifndef HACCEL_TOOLS_DOCTOR_H
#define HACCEL_TOOLS_DOCTOR_H

#include <jansson.h>

/* Probe the node. sysfs is read under $HACCEL_SYSFS_ROOT (default /sys) so
 * tests can point it at fixture trees. Returns a new object, NULL on OOM. */
json_t *doctor_probe(void);

/* Render the report for a terminal. */
void doctor_print(const json_t *report);

#endif /* HACCEL_TOOLS_DOCTOR_H */
