/* SPDX-License-Identifier: MIT */
/* The kernels' fatbin, built by nvcc at make time, linked in as data. */
	.section .rodata
	.balign 64
	.globl haccel__fatbin
	.hidden haccel__fatbin
haccel__fatbin:
	.incbin "kernels/haccel.fatbin"
1:
	.balign 8
	.globl haccel__fatbin_size
	.hidden haccel__fatbin_size
haccel__fatbin_size:
	.quad 1b - haccel__fatbin
	.section .note.GNU-stack,"",@progbits
