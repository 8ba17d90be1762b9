// SPDX-License-Identifier: MIT
/* KDA kernels (to come). */
