#!/bin/sh
# SPDX-License-Identifier: MIT
#
# haccel.ko on the host, without a VM: sparse finds nothing in the driver
# (a fresh copy of driver/ and uapi/ built with `make -C driver C=2` against
# the configured kernel headers; any sparse warning or error fails), the
# module's version is the package's (MODULE_VERSION, dkms.conf,
# driver/Makefile and configure agree), and the uapi header that `make
# install` installs compiles with libdrm's include path. KTAP output; run
# by make check. What cannot be had (no sparse, driver not configured) is
# a skip with the reason.
#
# Environment (set by make check): HACCEL_SRCDIR, HACCEL_BUILDDIR,
# HACCEL_KDIR (the kernel headers; empty: --disable-driver or none found), CC.
set -u
: "${HACCEL_SRCDIR:?}" "${HACCEL_BUILDDIR:?}" "${CC:=cc}"
kdir=${HACCEL_KDIR:-}
echo "TAP version 13"
echo "1..3"
work=$(mktemp -d "${TMPDIR:-/tmp}/haccel-drvbuild.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# --- 1: sparse ---------------------------------------------------------------
name="driver: sparse (make -C driver C=2) reports nothing"
if [ -z "$kdir" ]; then
	echo "ok 1 $name # SKIP haccel.ko not configured (--disable-driver, or no kernel headers found)"
elif [ ! -f "$kdir/Makefile" ]; then
	echo "ok 1 $name # SKIP $kdir is not a kernel build tree"
elif ! command -v sparse >/dev/null 2>&1; then
	echo "ok 1 $name # SKIP sparse not found: install sparse"
else
	mkdir -p "$work/src/driver" "$work/src/uapi"
	cp "$HACCEL_SRCDIR"/driver/Kbuild "$HACCEL_SRCDIR"/driver/Makefile \
		"$HACCEL_SRCDIR"/driver/conftest.sh "$HACCEL_SRCDIR"/driver/*.c \
		"$HACCEL_SRCDIR"/driver/*.h "$work/src/driver/" &&
		rm -f "$work/src/driver/hac_conf.h" &&
		cp "$HACCEL_SRCDIR"/uapi/haccel_drm.h "$work/src/uapi/"
	# A make of its own, outside make check's jobserver.
	if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$work/src/driver" KDIR="$kdir" C=2 \
		>"$work/sparse.log" 2>&1; then
		rc=0
	else
		rc=1
	fi
	# Compiler and sparse diagnostics: FILE:LINE:COL: warning|error: ...
	warnings=$(grep -E '^[^ :]+:[0-9]+:([0-9]+:)? (warning|error): ' "$work/sparse.log")
	if [ $rc -eq 0 ] && [ -z "$warnings" ]; then
		echo "# $(grep -c ' CHECK ' "$work/sparse.log") files checked against $kdir"
		echo "ok 1 $name"
	else
		sed 's/^/# /' "$work/sparse.log" | grep -v ' \(CC\|LD\|CHECK\|MODPOST\|BTF\)' | tail -n 30
		echo "not ok 1 $name"
	fi
fi

# --- 2: versions ---------------------------------------------------------------
name="driver: MODULE_VERSION, dkms.conf, driver/Makefile and the package agree"
mod=$(sed -n 's/^MODULE_VERSION("\(.*\)");$/\1/p' "$HACCEL_SRCDIR/driver/hac_drv.c")
dkms=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$HACCEL_SRCDIR/driver/dkms.conf")
mk=$(sed -n 's/^VERSION := //p' "$HACCEL_SRCDIR/driver/Makefile")
pkg=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$HACCEL_BUILDDIR/config.h" 2>/dev/null)
built=
ko=$HACCEL_BUILDDIR/driver/haccel.ko
if [ -n "$kdir" ] && [ -f "$ko" ] && command -v objcopy >/dev/null 2>&1; then
	built=$(objcopy -O binary --only-section=.modinfo "$ko" /dev/stdout 2>/dev/null |
		tr '\0' '\n' | sed -n 's/^version=//p')
fi
echo "# MODULE_VERSION $mod, dkms.conf $dkms, driver/Makefile $mk, package $pkg${built:+, built haccel.ko $built}"
if [ -n "$mod" ] && [ "$mod" = "$dkms" ] && [ "$mod" = "$mk" ] && [ "$mod" = "$pkg" ] &&
	{ [ -z "$built" ] || [ "$built" = "$mod" ]; }; then
	echo "ok 2 $name"
else
	echo "not ok 2 $name"
fi

# --- 3: the installed uapi header ------------------------------------------------
name="uapi: make install puts haccel_drm.h beside haccel.h; both compile together with libdrm's cflags"
drm_cflags=$(pkg-config --cflags libdrm 2>/dev/null)
[ -n "$drm_cflags" ] || { [ -f /usr/include/libdrm/drm.h ] && drm_cflags=-I/usr/include/libdrm; }
if [ -z "$drm_cflags" ]; then
	echo "ok 3 $name # SKIP no drm.h: install libdrm-dev"
elif ! make -s -C "$HACCEL_BUILDDIR" install-includeHEADERS DESTDIR="$work/root" \
	>"$work/install.log" 2>&1; then
	sed 's/^/# /' "$work/install.log" | tail -n 20
	echo "not ok 3 $name"
else
	hdr=$(find "$work/root" -name haccel_drm.h | head -n 1)
	cat >"$work/t.c" <<'EOC'
#include <haccel.h>
#include <haccel_drm.h>
int main(void)
{
	struct drm_haccel_pin p = { .node = HACCEL_DRM_NODE_ANY };
	int32_t lib_any = HACCEL_NODE_ANY;

	return (int)(sizeof(p) + DRM_IOCTL_HACCEL_PIN) == 0 || (uint32_t)lib_any != p.node;
}
EOC
	# shellcheck disable=SC2086
	if [ -n "$hdr" ] && [ -f "$(dirname "$hdr")/haccel.h" ] &&
		$CC -std=c11 -Wall -Werror -I"$(dirname "$hdr")" $drm_cflags -c "$work/t.c" \
			-o "$work/t.o" >"$work/cc.log" 2>&1; then
		echo "# installed as ${hdr#"$work"/root}"
		echo "ok 3 $name"
	else
		echo "# installed: ${hdr:-nothing}"
		sed 's/^/# /' "$work/cc.log" 2>/dev/null | tail -n 20
		echo "not ok 3 $name"
	fi
fi
exit 0
