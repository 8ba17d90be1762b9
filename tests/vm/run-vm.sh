#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The haccel.ko tests, in a VM booting Debian's own kernel; KTAP on stdout,
# run by make check (or by hand, see below).
#
# The kernel is the one whose headers haccel.ko was built against: its
# release comes from the headers tree (never from uname -r), its
# linux-image package is fetched at the headers' exact package version with
# apt-get download, and only the vmlinux (taken out of the bzImage, booted
# through qemu's PVH entry) and the modules the guest needs are unpacked
# into a cache. The guest is a busybox initramfs with the DRM core, the
# disk drivers, haccel.ko and the static test binaries (tests/driver-*.c;
# tests/driver-lib-*.c link the build tree's libhaccel and a static
# haccel-ctl comes along for them), on two NUMA nodes of two CPUs each,
# with a small ext4 disk holding the files of the O_DIRECT reads (a
# pattern file and a safetensors checkpoint) and a scratch directory for
# file-backed mappings; the guest mounts it read-write, its writes going
# to a throw-away qemu snapshot, so the cached image never changes. vgem
# (and udmabuf, where the package has it as a module) are loaded after
# haccel.ko as exporters of foreign dma-bufs. The guest kernel runs with
# slub_debug=FZPU on the kmalloc and filp caches, where the objects of the
# driver, of its files and of its dma-bufs live (on all caches it would
# double the run time), and KFENCE sampling every millisecond where the
# kernel has it. Each guest case is relayed as one result; a BUG:,
# WARNING: or Oops in the guest's kernel log, or a guest that does not
# finish in time, fails.
# What cannot be had (driver not configured, a package missing, no network
# for the download) makes every case a SKIP with the reason.
#
# Environment: HACCEL_SRCDIR, HACCEL_BUILDDIR (set by make check), HACCEL_KDIR
# (the headers tree; empty: driver not configured), CC; optional
# HACCEL_VM_CACHE (default ~/.cache/haccel-vm), HACCEL_VM_TIMEOUT (s, 300),
# HACCEL_TEST_SEED (replay the randomized cases), HACCEL_VM_KEEP=1 (keep
# the work directory), HACCEL_VM_IMAGE_DEB (a linux-image .deb to use).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
srcdir=${HACCEL_SRCDIR:-$(cd "$here/../.." && pwd)}
builddir=${HACCEL_BUILDDIR:-$srcdir}
kdir=${HACCEL_KDIR:-}
cc=${CC:-cc}
cache=${HACCEL_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/haccel-vm}
timeout_s=${HACCEL_VM_TIMEOUT:-300}
start=$(date +%s)

echo "TAP version 13"

# --- what is planned ----------------------------------------------------------

tests=()
for f in "$srcdir"/tests/driver-*.c; do
	[ -e "$f" ] || continue
	t=$(basename "$f" .c)
	case $t in driver-unload | driver-params) continue ;; esac
	tests+=("$t")
done
# The tests that unload and reload the module go last; each leaves it
# loaded with default parameters.
for t in driver-unload driver-params; do
	[ -e "$srcdir/tests/$t.c" ] && tests+=("$t")
done

# skip_all REASON: everything is a skip (one case when nothing is listed yet).
skip_all() {
	local i=0 name
	if [ -z "${planned:-}" ]; then
		echo "1..1"
		echo "ok 1 vm # SKIP $1"
		exit 0
	fi
	while read -r name; do
		i=$((i + 1))
		echo "ok $i $name # SKIP $1"
	done <"$planned"
	exit 0
}

[ -n "${HACCEL_SAN_LDFLAGS:-}" ] && skip_all "sanitizer build: the VM tests run in the plain build"
[ -n "$kdir" ] || skip_all "haccel.ko not configured (--disable-driver, or no kernel headers found)"
# The release modules are built for (Debian's kernel.release file holds
# the upstream version instead).
krel=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' "$kdir/include/generated/utsrelease.h" 2>/dev/null)
[ -n "$krel" ] || skip_all "$kdir has no include/generated/utsrelease.h: not a kernel build tree"

drm_cflags=$(pkg-config --cflags libdrm 2>/dev/null)
[ -n "$drm_cflags" ] || { [ -f /usr/include/libdrm/drm.h ] && drm_cflags=-I/usr/include/libdrm; }
[ -n "$drm_cflags" ] || skip_all "no drm.h: install libdrm-dev"
uring_a=$(pkg-config --variable=libdir liburing 2>/dev/null)/liburing.a
[ -f "$uring_a" ] || uring_a=/usr/lib/$($cc -print-multiarch 2>/dev/null)/liburing.a
[ -f "$uring_a" ] || skip_all "no liburing.a: install liburing-dev"
[ -f "$builddir/config.h" ] || skip_all "no config.h in $builddir: run from a configured build"

vmdir=$builddir/tests/vm
bindir=$vmdir/bin
mkdir -p "$bindir" || skip_all "cannot create $bindir"

# The library tests (and the haccel-ctl they run) link the build tree's
# libhaccel statically, with the static archives of its dependencies; what
# is missing makes them one skip with the reason, the driver tests still run.
libdir_sys=/usr/lib/$($cc -print-multiarch 2>/dev/null)
core_a=$builddir/libhaccel/.libs/libhaccel-core.a
lib_archives=()
lib_skip=
if ! grep -q '^#define HAVE_LIBDRM 1' "$builddir/config.h"; then
	lib_skip="libhaccel was built without libdrm: it has no haccel.ko provider to test"
fi
for a in libdrm:libdrm-dev libjansson:libjansson-dev libxxhash:libxxhash-dev libnuma:libnuma-dev; do
	[ -n "$lib_skip" ] && break
	if [ -f "$libdir_sys/${a%%:*}.a" ]; then
		lib_archives+=("$libdir_sys/${a%%:*}.a")
	else
		lib_skip="no $libdir_sys/${a%%:*}.a for the static guest binaries: install ${a#*:}"
	fi
done
if [ -n "$lib_skip" ]; then
	kept=()
	for t in "${tests[@]}"; do
		case $t in driver-lib-*) ;; *) kept+=("$t") ;; esac
	done
	tests=("${kept[@]}")
fi

# Static guest binaries, rebuilt when a source is newer.
deps=("$srcdir/tests/ktap.c" "$srcdir/tests/ktap.h" "$srcdir/tests/driver-util.h"
	"$srcdir/uapi/haccel_drm.h" "$builddir/config.h")
lib_deps=("$core_a" "$srcdir/libhaccel/include/haccel.h" "$srcdir/tests/st-writer.h"
	"$srcdir/tests/test-util.h")
# stale BIN SOURCE...: BIN is missing or older than a source.
stale() {
	local bin=$1 d
	shift
	[ -x "$bin" ] || return 0
	for d in "$@"; do
		[ "$d" -nt "$bin" ] && return 0
	done
	return 1
}
build_failed=
for t in "${tests[@]}"; do
	bin=$bindir/$t
	extra=()
	case $t in driver-lib-*)
		extra=(-I"$srcdir/libhaccel/include" -I"$srcdir/libhaccel"
			"$core_a" "${lib_archives[@]}" -ldl -lm) ;;
	esac
	if [ ${#extra[@]} -gt 0 ]; then
		stale "$bin" "$srcdir/tests/$t.c" "${deps[@]}" "${lib_deps[@]}" || continue
	else
		stale "$bin" "$srcdir/tests/$t.c" "${deps[@]}" || continue
	fi
	# The archives go after the sources that use them, uring's last.
	# shellcheck disable=SC2086
	if ! $cc -static -O2 -g -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
		-pthread -I"$builddir" -I"$srcdir/tests" -I"$srcdir/uapi" $drm_cflags \
		-o "$bin" "$srcdir/tests/$t.c" "$srcdir/tests/ktap.c" "${extra[@]}" "$uring_a" \
		>"$bin.log" 2>&1; then
		build_failed="$build_failed $t"
		rm -f "$bin"
	fi
done
# haccel-ctl for the guest, from the same sources and library as the host's.
ctl_bin=$bindir/haccel-ctl
if [ -z "$lib_skip" ]; then
	ctl_src=("$srcdir"/tools/haccel-ctl.c "$srcdir"/tools/doctor.c "$srcdir"/tools/driver.c
		"$srcdir"/tools/model.c "$srcdir"/tools/weights.c "$srcdir"/tools/common.c)
	if stale "$ctl_bin" "${ctl_src[@]}" "$srcdir"/tools/*.h "${lib_deps[@]}" "$builddir/config.h"; then
		# shellcheck disable=SC2046,SC2086
		if ! $cc -static -O2 -g -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
			-pthread -I"$builddir" -I"$srcdir/tools" -I"$srcdir/libhaccel/include" \
			$(pkg-config --cflags jansson 2>/dev/null) -o "$ctl_bin" "${ctl_src[@]}" \
			"$core_a" "${lib_archives[@]}" "$uring_a" -ldl -lm >"$ctl_bin.log" 2>&1; then
			build_failed="$build_failed haccel-ctl"
			rm -f "$ctl_bin"
		fi
	fi
fi
if [ -n "$build_failed" ]; then
	echo "1..1"
	for t in $build_failed; do sed "s|^|# $t: |" "$bindir/$t.log" | grep -v 'statically linked applications' | head -n 30; done
	echo "not ok 1 vm: static guest test binaries build"
	exit 1
fi

planned=$vmdir/planned
{
	echo "vm: haccel.ko built for $krel"
	echo "vm: guest boots and loads haccel.ko"
	for t in "${tests[@]}"; do
		"$bindir/$t" --list | sed "s|^|$t/|"
	done
	echo "vm: guest runs every test and powers off within ${timeout_s} s"
	echo "vm: guest kernel log has no BUG, WARNING or Oops"
	[ -n "$lib_skip" ] && echo "vm: library and haccel-ctl tests (tests/driver-lib-*.c)"
} >"$planned"
# Lines of the plan that are not relayed guest cases.
fixed_lines=4
[ -n "$lib_skip" ] && fixed_lines=5
echo "1..$(wc -l <"$planned")"

# --- what is needed -----------------------------------------------------------

module=$builddir/driver/haccel.ko
for tool in qemu-system-x86_64:qemu-system-x86 busybox:busybox-static mke2fs:e2fsprogs \
	objcopy:binutils readelf:binutils dpkg-deb:dpkg xz:xz-utils; do
	command -v "${tool%%:*}" >/dev/null || skip_all "${tool%%:*} not found: install ${tool#*:}"
done
busybox=$(command -v busybox)
readelf -l "$busybox" 2>/dev/null | grep -q 'Requesting program interpreter' &&
	skip_all "$busybox is not static: install busybox-static"

# modinfo_field KO FIELD: a field of a module's .modinfo, without kmod.
# (into a file: objcopy 2.40 writes nothing through /dev/stdout.)
modinfo_field() {
	local out

	out=$(mktemp "${TMPDIR:-/tmp}/haccel-modinfo.XXXXXX") || return 1
	objcopy -O binary --only-section=.modinfo "$1" "$out" 2>/dev/null &&
		tr '\0' '\n' < "$out" | sed -n "s/^$2=//p" | head -n 1
	rm -f "$out"
}

# --- the kernel: cached vmlinux and modules ----------------------------------

# extract_vmlinux BZIMAGE OUT: find the compressed payload, unpack the ELF.
extract_vmlinux() {
	local img=$1 out=$2 magic tool off
	for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
		tool=${magic%%:*}
		command -v "$tool" >/dev/null || continue
		for off in $(grep -aboP "${magic#*:}" "$img" | cut -d: -f1 | head -n 4); do
			case $tool in
			xz) tail -c +$((off + 1)) "$img" | xz -dc --single-stream >"$out" 2>/dev/null ;;
			zstd) tail -c +$((off + 1)) "$img" | zstd -dcq >"$out" 2>/dev/null ;;
			gzip) tail -c +$((off + 1)) "$img" | gzip -dc >"$out" 2>/dev/null ;;
			esac
			[ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] && return 0
		done
	done
	return 1
}

# The modules the guest loads before haccel.ko; their dependencies follow.
# ext4 (which mounts the data disk) asks the crypto API for crc32c at mount
# time, which no depends= line names.
want_modules="drm virtio_pci virtio_blk crc32c_generic ext4"
# Loaded after haccel.ko (which keeps the first render node), where the
# package has them as modules: exporters of foreign dma-bufs. udmabuf is
# built into Debian's 6.12 and not configured in its 6.1; vgem is a module
# in both.
extra_modules="udmabuf vgem"

prepare_kernel() {
	local dir=$1 deb tmp found m f name dep order
	tmp=$(mktemp -d "$cache/tmp.XXXXXX") || return 1
	if [ -n "${HACCEL_VM_IMAGE_DEB:-}" ]; then
		deb=$HACCEL_VM_IMAGE_DEB
	else
		chmod 755 "$tmp"
		(cd "$tmp" && apt-get download -q "linux-image-$krel=$kver") >"$tmp/apt.log" 2>&1 || {
			sed 's/^/# /' "$tmp/apt.log" | tail -n 5
			rm -rf "$tmp"
			return 2
		}
		deb=$(ls "$tmp"/linux-image-*.deb)
	fi
	mkdir -p "$tmp/x"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards \
		'./boot/vmlinuz-*' './lib/modules/*/modules.builtin' \
		'./lib/modules/*/kernel/drivers/gpu/drm/drm.ko*' \
		'./lib/modules/*/kernel/drivers/gpu/drm/drm_panel_orientation_quirks.ko*' \
		'./lib/modules/*/kernel/drivers/virtio/*' \
		'./lib/modules/*/kernel/drivers/block/virtio_blk.ko*' \
		'./lib/modules/*/kernel/fs/ext4/*' './lib/modules/*/kernel/fs/jbd2/*' \
		'./lib/modules/*/kernel/fs/mbcache.ko*' './lib/modules/*/kernel/lib/*' \
		'./lib/modules/*/kernel/crypto/*' \
		'./lib/modules/*/kernel/drivers/gpu/drm/vgem/*' \
		'./lib/modules/*/kernel/drivers/gpu/drm/drm_shmem_helper.ko*' \
		'./lib/modules/*/kernel/drivers/dma-buf/*' 2>/dev/null
	mkdir -p "$tmp/out/modules"
	extract_vmlinux "$tmp"/x/boot/vmlinuz-* "$tmp/out/vmlinux" || { rm -rf "$tmp"; return 3; }
	cp "$tmp"/x/lib/modules/*/modules.builtin "$tmp/out/modules.builtin" 2>/dev/null ||
		: >"$tmp/out/modules.builtin"
	# Resolve dependencies depth first; the order files list parents after
	# their dependencies (order.extra: what only the extra modules need).
	: >"$tmp/out/modules/order"
	: >"$tmp/out/modules/order.extra"
	order=$tmp/out/modules/order
	resolve() {
		local name=$1 file base
		grep -qx "$name" "$tmp/out/modules/order" "$tmp/out/modules/order.extra" && return 0
		grep -q "/${name//_/[-_]}\.ko" "$tmp/out/modules.builtin" && return 0
		file=$(find "$tmp/x/lib/modules" -regex ".*/${name//_/[-_]}\.ko\(\.xz\|\.zst\|\.gz\)?" | head -n 1)
		if [ -z "$file" ]; then
			# Not in the first pass: look it up in the whole package.
			file=$(dpkg-deb -c "$deb" | awk '{print $NF}' |
				grep -E "/${name//_/[-_]}\.ko(\.xz|\.zst|\.gz)?$" | head -n 1)
			[ -n "$file" ] || { echo "# kernel module $name not in the package"; return 1; }
			dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" "$file" || return 1
			file=$tmp/x/${file#./}
		fi
		base=$tmp/out/modules/$name.ko
		case $file in
		*.xz) xz -dc "$file" >"$base" ;;
		*.zst) zstd -dcq "$file" >"$base" ;;
		*.gz) gzip -dc "$file" >"$base" ;;
		*) cp "$file" "$base" ;;
		esac || return 1
		for dep in $(modinfo_field "$base" depends | tr ',' ' '); do
			resolve "$dep" || return 1
		done
		echo "$name" >>"$order"
	}
	for m in $want_modules; do
		resolve "$m" || { rm -rf "$tmp"; return 4; }
	done
	order=$tmp/out/modules/order.extra
	for m in $extra_modules; do
		grep -q "/${m//_/[-_]}\.ko" "$tmp/out/modules.builtin" && continue
		if ! dpkg-deb -c "$deb" | grep -qE "/${m//_/[-_]}\.ko(\.xz|\.zst|\.gz)?$"; then
			echo "# $m is not a module of linux-image-$krel (built in or not configured)"
			continue
		fi
		resolve "$m" || { rm -rf "$tmp"; return 4; }
	done
	echo "$want_modules / $extra_modules" >"$tmp/out/modules/wanted"
	rm -rf "$dir"
	mv "$tmp/out" "$dir" && rm -rf "$tmp"
}

ok_n=0
result() { # result OK|FAIL NAME [DIAG...]
	ok_n=$((ok_n + 1))
	local status=$1 name=$2
	shift 2
	for line in "$@"; do printf '%s\n' "$line" | sed 's/^/# /'; done
	if [ "$status" = OK ]; then echo "ok $ok_n $name"; else echo "not ok $ok_n $name"; fi
}

kver=$(dpkg-query -W -f='${Version}' "linux-headers-$krel" 2>/dev/null)
[ -n "$kver" ] || [ -n "${HACCEL_VM_IMAGE_DEB:-}" ] ||
	skip_all "kernel headers $krel are not from a Debian package: no image to boot"
mkdir -p "$cache" || skip_all "cannot create the cache $cache"
kcache=$cache/$krel-${kver:-local}
exec 9>"$cache/.lock"
flock 9
# A cache made for another list of modules is made again.
if [ ! -f "$kcache/vmlinux" ] ||
	[ "$(cat "$kcache/modules/wanted" 2>/dev/null)" != "$want_modules / $extra_modules" ]; then
	echo "# preparing $krel ($kver) in $kcache"
	prepare_kernel "$kcache"
	case $? in
	0) ;;
	2) flock -u 9; skip_all "cannot download linux-image-$krel=$kver (no network?)" ;;
	3) flock -u 9; skip_all "no vmlinux found in linux-image-$krel" ;;
	*) flock -u 9; skip_all "cannot unpack the modules the guest needs from linux-image-$krel" ;;
	esac
fi
flock -u 9
echo "# kernel: $krel ($kver), cache $kcache, ready after $(($(date +%s) - start)) s"

# --- case 1: the module -----------------------------------------------------------

if [ ! -f "$module" ]; then
	result FAIL "vm: haccel.ko built for $krel" "no $module: make did not build the driver"
	while [ $ok_n -lt "$(wc -l <"$planned")" ]; do
		ok_n=$((ok_n + 1))
		echo "not ok $ok_n $(sed -n "${ok_n}p" "$planned") # no module to test"
	done
	exit 1
fi
vermagic=$(modinfo_field "$module" vermagic)
case "$vermagic" in
"$krel "*) result OK "vm: haccel.ko built for $krel" ;;
*) result FAIL "vm: haccel.ko built for $krel" "vermagic is '$vermagic'" ;;
esac

# --- guest image ---------------------------------------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/haccel-vm.XXXXXX")
[ "${HACCEL_VM_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp,mnt,modules,tests}
cp "$busybox" "$root/bin/busybox"
cp "$srcdir/tests/vm/init.sh" "$root/init"
chmod 755 "$root/init"
cp "$kcache"/modules/*.ko "$kcache/modules/order" "$kcache/modules/order.extra" "$root/modules/"
cp "$module" "$root/modules/haccel.ko"
for t in "${tests[@]}"; do cp "$bindir/$t" "$root/tests/"; done
[ -z "$lib_skip" ] && cp "$ctl_bin" "$root/tests/haccel-ctl"
printf '%s\n' "${tests[@]}" >"$root/tests/order"
[ -n "${HACCEL_TEST_SEED:-}" ] && echo "$HACCEL_TEST_SEED" >"$root/tests/seed"
(cd "$root" && find . | if command -v cpio >/dev/null; then cpio -o -H newc --quiet; else
	"$busybox" cpio -o -H newc 2>/dev/null; fi) >"$work/initrd.cpio"

# The data disk: an ext4 image holding the pattern file and (for
# the library's loader) a safetensors checkpoint, written by the binaries
# that read them.
disk=$vmdir/data-ext4.img
if [ ! -f "$disk" ] || [ "$bindir/driver-uring" -nt "$disk" ] ||
	{ [ -x "$bindir/driver-lib-load" ] && [ "$bindir/driver-lib-load" -nt "$disk" ]; }; then
	mkdir -p "$work/disk"
	"$bindir/driver-uring" --write-pattern "$work/disk/weights.bin" $((8 << 20)) &&
		{ [ ! -x "$bindir/driver-lib-load" ] ||
			"$bindir/driver-lib-load" --write-checkpoint "$work/disk/model.safetensors"; } &&
		mke2fs -q -F -t ext4 -b 4096 -d "$work/disk" "$disk.tmp" 32M >"$work/mke2fs.log" 2>&1 &&
		mv "$disk.tmp" "$disk" || { sed 's/^/# /' "$work/mke2fs.log"; rm -f "$disk.tmp"; }
fi

# --- boot ------------------------------------------------------------------------

# Allocator debugging, so a reference counting bug shows as a BUG in the
# log; the U (allocation traces) also lets driver-unload count the driver's
# live objects.
append="console=ttyS0 loglevel=5 panic=-1 rdinit=/init slub_debug=FZPU,kmalloc-*,filp"
grep -q '^CONFIG_KFENCE=y' "$kdir/.config" 2>/dev/null && append="$append kfence.sample_interval=1"

accel=tcg cpu=qemu64
if [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
	accel=kvm cpu=host
fi
echo "# booting with $accel after $(($(date +%s) - start)) s"
boot_start=$(date +%s)
timeout -k 5 "$timeout_s" qemu-system-x86_64 -M pc -accel "$accel" -cpu "$cpu" \
	-m 512M -smp 4,sockets=2,cores=2,threads=1 \
	-object memory-backend-ram,id=m0,size=256M -object memory-backend-ram,id=m1,size=256M \
	-numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1 \
	-kernel "$kcache/vmlinux" -initrd "$work/initrd.cpio" \
	-append "$append" \
	-drive "file=$disk,format=raw,if=virtio,snapshot=on" \
	-display none -nodefaults -no-user-config -no-reboot \
	-serial "file:$work/console.log" -serial "file:$work/guest.log" \
	>"$work/qemu.log" 2>&1
qemu_rc=$?
echo "# guest ran $(($(date +%s) - boot_start)) s (qemu exit $qemu_rc)"
tr -d '\r' <"$work/guest.log" >"$work/guest.txt" 2>/dev/null || : >"$work/guest.txt"
tr -d '\r' <"$work/console.log" >"$work/console.txt" 2>/dev/null || : >"$work/console.txt"

# --- results -------------------------------------------------------------------

if grep -q '^HACCEL-VM: loaded haccel.ko' "$work/guest.txt"; then
	result OK "vm: guest boots and loads haccel.ko"
else
	result FAIL "vm: guest boots and loads haccel.ko" "qemu exit $qemu_rc" \
		"$(tail -n 5 "$work/qemu.log")" "$(tail -n 20 "$work/console.txt")" \
		"$(head -n 20 "$work/guest.txt")"
fi

# Relay each binary's cases, renumbered, in the planned order; a case the
# guest never reported (a crash, a hang, a guest that died) fails.
awk -v first=$((ok_n + 1)) -v ncases=$(($(wc -l <"$planned") - fixed_lines)) '
	FNR == NR {
		if (FNR > 2 && FNR <= 2 + ncases) { order[FNR - 2] = $0 }
		next
	}
	/^HACCEL-VM: begin / { bin = $3; began = $4; next }
	/^HACCEL-VM: end / {
		if (bin != "" && $4 != "0") print "# " bin " exited " $4
		if (bin != "" && $5 != "") printf "# %s ran %.1f s\n", bin, $5 - began
		bin = ""
		next
	}
	/^HACCEL-VM: dmesg/ { bin = ""; exit }
	bin == "" { next }
	/^(not )?ok [0-9]+ / {
		line = $0
		okay = (line ~ /^ok /)
		sub(/^(not )?ok [0-9]+ /, "", line)
		name = line; dir = ""
		if (match(line, / # /)) { name = substr(line, 1, RSTART - 1); dir = substr(line, RSTART) }
		res[bin "/" name] = okay ? ("ok" dir) : "not ok"
		next
	}
	/^(TAP version|1\.\.)/ { next }
	{ print (substr($0, 1, 1) == "#" ? "# " bin ": " substr($0, 3) : "# " bin ": " $0) }
	END {
		for (i = 1; i <= ncases; i++) {
			n = first + i - 1
			r = res[order[i]]
			if (r == "") print "not ok " n " " order[i] " # not reported: guest crashed, hung or timed out"
			else if (r == "not ok") print "not ok " n " " order[i]
			else print "ok " n " " order[i] substr(r, 3)
		}
	}
' "$planned" "$work/guest.txt"
ok_n=$((ok_n + $(wc -l <"$planned") - fixed_lines))

if grep -q '^HACCEL-VM: done' "$work/guest.txt" && [ $qemu_rc -eq 0 ]; then
	result OK "vm: guest runs every test and powers off within ${timeout_s} s"
else
	result FAIL "vm: guest runs every test and powers off within ${timeout_s} s" \
		"qemu exit $qemu_rc (124: timed out)" "$(tail -n 30 "$work/console.txt")"
fi

# The kernel log: the guest's dmesg dump and the console (which also shows
# a panic the dump never got to).
sed -n '/^HACCEL-VM: dmesg/,/^HACCEL-VM: done/p' "$work/guest.txt" >"$work/dmesg.txt"
bad=$(cat "$work/dmesg.txt" "$work/console.txt" |
	grep -E 'BUG:|WARNING:|Oops|Kernel panic|general protection fault|UBSAN:|KASAN:|kernel BUG at|Call Trace:' |
	sort -u | head -n 20)
if [ -z "$bad" ]; then
	result OK "vm: guest kernel log has no BUG, WARNING or Oops"
else
	mapfile -t badl <<<"$bad"
	result FAIL "vm: guest kernel log has no BUG, WARNING or Oops" "${badl[@]}" \
		"$(grep -E -A 25 'BUG:|WARNING:|Oops' "$work/dmesg.txt" "$work/console.txt" | head -n 60)"
fi
[ -n "$lib_skip" ] && { ok_n=$((ok_n + 1)); echo "ok $ok_n vm: library and haccel-ctl tests (tests/driver-lib-*.c) # SKIP $lib_skip"; }
echo "# total $(($(date +%s) - start)) s"
[ "${HACCEL_VM_KEEP:-0}" = 1 ] && echo "# work directory kept: $work"
exit 0
