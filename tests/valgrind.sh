#!/bin/sh
# SPDX-License-Identifier: MIT
# Run tests/X (named by tests/X-memcheck.vg) under valgrind memcheck. An invalid
# access, an uninitialised read or a definite leak makes the forked case
# exit 99, which the harness reports as "not ok".
t=${1%-memcheck.vg}
HACCEL_TEST_TIMEOUT_SCALE=${HACCEL_TEST_TIMEOUT_SCALE:-20}
export HACCEL_TEST_TIMEOUT_SCALE
exec ${VALGRIND:-valgrind} -q --error-exitcode=99 --leak-check=full \
	--errors-for-leak-kinds=definite --show-leak-kinds=definite "$t"
