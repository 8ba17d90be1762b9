#!/bin/sh
# SPDX-License-Identifier: MIT
# libhaccel.pc works for a program outside the tree: install into a scratch
# DESTDIR, then build and run a program that opens the library and a model
# (reaching the loader, io_uring and libnuma) against the shared library
# with `pkg-config --libs` and against libhaccel.a alone with
# `pkg-config --static --libs`. KTAP output; run by make check.
set -u
: "${HACCEL_BUILDDIR:?}" "${HACCEL_LIBDIR:?}" "${CC:=cc}"
echo "TAP version 13"
echo "1..2"
work=$(mktemp -d "${TMPDIR:-/tmp}/haccel-pc.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! make -s -C "$HACCEL_BUILDDIR" install DESTDIR="$work/root" >"$work/install.log" 2>&1; then
	sed 's/^/# /' "$work/install.log" | tail -n 20
	echo "not ok 1 shared"
	echo "not ok 2 static"
	exit 1
fi
lib=$work/root$HACCEL_LIBDIR
pcdir=$lib/pkgconfig
export PKG_CONFIG_SYSROOT_DIR="$work/root" PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_LIBDIR="$pcdir"
cat >"$work/t.c" <<'EOC'
#include <errno.h>
#include <stdio.h>
#include <haccel.h>
int main(void)
{
	struct haccel_ctx *c;
	struct haccel_model *m = NULL;
	int r;

	if (haccel_open(NULL, &c))
		return 2;
	r = haccel_model_open(c, "/nonexistent-haccel-model", NULL, &m);
	printf("%s %s\n", haccel_version_string(), haccel_status_name(r));
	haccel_close(c);
	return r == -ENOENT ? 0 : 3;
}
EOC
fail=0
# shellcheck disable=SC2046 # pkg-config output is meant to split
if [ ! -e "$lib/libhaccel.so" ]; then
	# configured --disable-shared: `pkg-config --libs` would pick the
	# archive without its private libraries (test 2 covers that)
	echo "ok 1 shared # SKIP no shared library (configured --disable-shared)"
elif $CC ${HACCEL_SAN_LDFLAGS:-} -o "$work/t-shared" "$work/t.c" $(pkg-config --cflags --libs libhaccel) >"$work/cc1.log" 2>&1 &&
	LD_LIBRARY_PATH="$lib" "$work/t-shared" >"$work/run1.log" 2>/dev/null; then
	echo "# shared: $(cat "$work/run1.log")"
	echo "ok 1 shared"
else
	sed 's/^/# /' "$work/cc1.log" "$work/run1.log" 2>/dev/null | tail -n 20
	echo "not ok 1 shared"
	fail=1
fi
# The archive only, whatever shared library sits beside it.
libs=$(pkg-config --static --libs-only-l libhaccel | sed 's/-lhaccel//')
# shellcheck disable=SC2046,SC2086
if $CC ${HACCEL_SAN_LDFLAGS:-} -o "$work/t-static" "$work/t.c" $(pkg-config --cflags libhaccel) \
	"$lib/libhaccel.a" $libs >"$work/cc2.log" 2>&1 &&
	"$work/t-static" >"$work/run2.log" 2>/dev/null; then
	echo "# static: $(cat "$work/run2.log")"
	echo "ok 2 static"
else
	sed 's/^/# /' "$work/cc2.log" "$work/run2.log" 2>/dev/null | tail -n 20
	echo "not ok 2 static"
	fail=1
fi
exit $fail
