#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the safetensors parser's libFuzzer target with clang and run it.
#
#   tests/fuzz/run-fuzz.sh SECONDS [WORKDIR]
#
# Builds into WORKDIR (default: a new directory under $TMPDIR or /tmp, never
# the source tree), replays the regressions and the seed corpus once, then
# fuzzes a copy of the corpus for SECONDS seconds with -max_len=65536. Exits
# non-zero on a crash and prints the crashing input's path; keep it as
# tests/fuzz/regressions/<name> once fixed. Needs clang with libFuzzer
# (Debian: clang libclang-rt-14-dev; llvm for symbolized traces) and
# libjansson-dev. CC_FUZZ overrides the compiler, FUZZ_FLAGS adds libFuzzer
# options (FUZZ_FLAGS=-fork=4), FUZZ_COVERAGE=1 reports the parser's line
# coverage at the end.
set -eu

usage() {
	echo "usage: $0 SECONDS [WORKDIR]" >&2
	exit 2
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
secs=$1
case $secs in '' | *[!0-9]*) usage ;; esac

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=${2:-}
if [ -z "$work" ]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/haccel-fuzz.XXXXXX")
fi
mkdir -p "$work/build" "$work/corpus" "$work/crashes"
cc=${CC_FUZZ:-clang}

# The parser and the core need only _GNU_SOURCE from configure's config.h.
printf '#define _GNU_SOURCE 1\n#define _FILE_OFFSET_BITS 64\n' >"$work/build/config.h"
bin=$work/build/fuzz-safetensors
echo "run-fuzz: building $bin with $cc"
# shellcheck disable=SC2046 # pkg-config output is meant to split
"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -std=gnu11 -Wall -Wextra -Wno-unused-parameter \
	-I"$work/build" -I"$top" -I"$top/libhaccel" -I"$top/libhaccel/include" \
	$(pkg-config --cflags jansson) -o "$bin" \
	"$here/fuzz-safetensors.c" "$here/stubs.c" \
	"$top/libhaccel/weights/safetensors.c" "$top/libhaccel/core/ctx.c" \
	"$top/libhaccel/core/log.c" "$top/libhaccel/core/status.c" \
	$(pkg-config --libs jansson) -pthread

count() {
	find "$1" -type f | wc -l
}

report() {
	found=0
	for f in "$work/crashes"/*; do
		[ -e "$f" ] || continue
		echo "run-fuzz: crashing input: $f" >&2
		found=1
	done
	[ $found = 1 ] || echo "run-fuzz: failed without an artifact; see $work/fuzz.log" >&2
	exit 1
}

# Past crashes and the seeds first: each must pass as it stands.
set -- "$here"/regressions/* "$here"/corpus/*
inputs=
for f; do [ -f "$f" ] && inputs=1; done
if [ -n "$inputs" ]; then
	echo "run-fuzz: replaying $(count "$here/regressions") regressions and $(count "$here/corpus") seeds"
	for f; do [ -f "$f" ] || continue; echo "$f"; done >"$work/replay.list"
	# shellcheck disable=SC2046
	if ! "$bin" -runs=0 -artifact_prefix="$work/crashes/" \
		$(cat "$work/replay.list") >"$work/replay.log" 2>&1; then
		tail -n 40 "$work/replay.log" >&2
		report
	fi
fi

cp "$here"/corpus/* "$work/corpus/"
echo "run-fuzz: fuzzing for $secs s in $work (log: $work/fuzz.log)"
set +e
# shellcheck disable=SC2086 # FUZZ_FLAGS is a list of options
"$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
	-use_value_profile=1 -print_final_stats=1 -dict="$here/safetensors.dict" \
	-artifact_prefix="$work/crashes/" ${FUZZ_FLAGS:-} "$work/corpus" \
	>"$work/fuzz.log" 2>&1
rc=$?
set -e
grep -E '^#[0-9]+.*(DONE|pulse|INITED)' "$work/fuzz.log" | tail -n 3
grep -E '^(stat::|Done )' "$work/fuzz.log" || true
if [ $rc -ne 0 ]; then
	tail -n 60 "$work/fuzz.log" >&2
	report
fi
echo "run-fuzz: no crash in $secs s; corpus grew to $(count "$work/corpus") inputs"

# FUZZ_COVERAGE=1: line coverage of the parser reached by the final corpus
# (needs llvm-profdata and llvm-cov, Debian package llvm).
if [ "${FUZZ_COVERAGE:-0}" = 1 ]; then
	cov=$work/build/fuzz-safetensors-cov
	# shellcheck disable=SC2046
	"$cc" -g -O0 -fprofile-instr-generate -fcoverage-mapping -std=gnu11 \
		-fsanitize=fuzzer -I"$work/build" -I"$top" -I"$top/libhaccel" \
		-I"$top/libhaccel/include" $(pkg-config --cflags jansson) -o "$cov" \
		"$here/fuzz-safetensors.c" "$here/stubs.c" \
		"$top/libhaccel/weights/safetensors.c" "$top/libhaccel/core/ctx.c" \
		"$top/libhaccel/core/log.c" "$top/libhaccel/core/status.c" \
		$(pkg-config --libs jansson) -pthread
	LLVM_PROFILE_FILE=$work/cov.profraw "$cov" -runs=0 "$work/corpus" >/dev/null 2>&1
	llvm-profdata merge -sparse "$work/cov.profraw" -o "$work/cov.profdata"
	llvm-cov report "$cov" -instr-profile="$work/cov.profdata" \
		"$top/libhaccel/weights/safetensors.c" -show-functions
fi
