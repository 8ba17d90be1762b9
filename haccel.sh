#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Set up, build and run haccel on a fresh Debian 12 (or Ubuntu) machine.
#
#   ./haccel.sh demo    install build dependencies, build, run the main job:
#                       write the tiny model and run it with haccel-run
#   ./haccel.sh test    install build dependencies, build, run the whole test
#                       suite: make check, make check under ASan+UBSan, a
#                       60-second fuzz run of the safetensors parser, and
#                       make distcheck
#   ./haccel.sh deps    only install the build dependencies
#   ./haccel.sh build   only configure and build into ./build
#
# Run as root, or as a user with sudo, for the dependencies. Builds go to
# ./build and ./build-asan (out of tree); nothing is installed system-wide.
set -euo pipefail

cd "$(dirname "$0")"
PKGS=(build-essential autoconf automake libtool pkg-config libjansson-dev
	libxxhash-dev liburing-dev libnuma-dev xz-utils valgrind
	clang libclang-rt-14-dev llvm
	linux-headers-amd64 libdrm-dev qemu-system-x86 busybox-static e2fsprogs sparse)
JOBS=$(nproc 2>/dev/null || echo 2)

say() { printf '\n==> %s\n' "$*"; }

deps() {
	local missing=() p sudo=()
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || {
			echo "haccel.sh: need root (or sudo) to install: ${missing[*]}" >&2
			exit 1
		}
		sudo=(sudo)
	fi
	say "installing build dependencies: ${missing[*]}"
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
}

# build DIR [configure options...]
build() {
	local dir=$1
	shift
	if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
		say "generating configure"
		./autogen.sh
	fi
	mkdir -p "$dir"
	if [ ! -f "$dir/Makefile" ]; then
		say "configuring $dir $*"
		(cd "$dir" && ../configure --enable-silent-rules "$@")
	fi
	say "building $dir"
	make -C "$dir" -j"$JOBS"
}

demo() {
	deps
	build build
	say "haccel-ctl model init --preset tiny --out build/tiny"
	build/tools/haccel-ctl model init --preset tiny --out build/tiny --force
	say "haccel-run build/tiny --prompt 'Hello, haccel' --max-new 64"
	build/tools/haccel-run build/tiny --prompt 'Hello, haccel' --max-new 64
}

test_all() {
	local status=0
	deps
	build build
	say "make check"
	make -C build -j"$JOBS" check VERBOSE=1 || status=1
	build build-asan --enable-sanitizers
	say "make check (ASan + UBSan)"
	make -C build-asan -j"$JOBS" check VERBOSE=1 || status=1
	say "fuzzing the safetensors parser for 60 s (libFuzzer)"
	tests/fuzz/run-fuzz.sh 60 "$PWD/build/fuzz" >build/fuzz.log 2>&1 || {
		tail -n 40 build/fuzz.log
		status=1
	}
	tail -n 3 build/fuzz.log
	say "make distcheck"
	make -C build -j"$JOBS" distcheck >build/distcheck.log 2>&1 || {
		tail -n 60 build/distcheck.log
		status=1
	}
	[ $status -eq 0 ] && say "all test runs passed" || say "some test runs FAILED"
	return $status
}

case "${1:-}" in
demo) demo ;;
test) test_all ;;
deps) deps ;;
build) deps && build build ;;
*)
	sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'
	[ -n "${1:-}" ] && exit 2
	exit 0
	;;
esac
