// SPDX-License-Identifier: MIT
/* DSA kernels (to come). */
