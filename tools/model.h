/* SPDX-License-Identifier: MIT */
/* haccel-ctl model: write synthetic checkpoints from presets. */
#ifndef HACCEL_TOOLS_MODEL_H
#define HACCEL_TOOLS_MODEL_H

/* haccel-ctl [--json] model init --preset NAME --out DIR [--seed N] [--force] */
int model_main(int argc, char **argv);

#endif /* HACCEL_TOOLS_MODEL_H */
