// SPDX-License-Identifier: MIT
/* Placeholder: being written. */
#include "config.h"
