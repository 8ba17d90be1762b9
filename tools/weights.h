/* SPDX-License-Identifier: MIT */
/* haccel-ctl weights: inspect and verify safetensors checkpoints. */
#ifndef HACCEL_TOOLS_WEIGHTS_H
#define HACCEL_TOOLS_WEIGHTS_H

/*
 * Run `haccel-ctl [OPTIONS] weights SUBCOMMAND PATH [OPTIONS]`: argv is
 * haccel-ctl's own, so the global options (--json, --help) may sit before
 * or after the command. Returns the exit status (0, 1 failure, 2 usage).
 */
int weights_main(int argc, char **argv);

#endif /* HACCEL_TOOLS_WEIGHTS_H */
