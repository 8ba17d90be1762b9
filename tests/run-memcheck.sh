#!/bin/sh
# SPDX-License-Identifier: MIT
# haccel-run on the tiny preset under valgrind memcheck, end to end: the
# loader (io_uring where the kernel allows it, its completed reads marked
# defined for memcheck), the CPU backend's prefill and decode, greedy and
# sampled, one prompt and a batch. Any memcheck error or definite leak
# fails the case (exit 99). KTAP output; run by make check where valgrind
# and valgrind/memcheck.h are found.
set -u
: "${HACCEL_CTL:?}" "${HACCEL_RUN:?}"
vg=${VALGRIND:-valgrind}
echo "TAP version 13"
echo "1..2"
work=$(mktemp -d "${TMPDIR:-/tmp}/haccel-runvg.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! "$HACCEL_CTL" model init --preset tiny --out "$work/tiny" >"$work/init.log" 2>&1; then
	sed 's/^/# /' "$work/init.log"
	echo "not ok 1 greedy"
	echo "not ok 2 sampled_batch"
	exit 1
fi
printf 'the first prompt\nand a second, longer one than the first\nthird\n' >"$work/batch.txt"
fail=0
# case N NAME ARGS...: haccel-run ARGS under memcheck
run_case() {
	n=$1 name=$2
	shift 2
	"$vg" -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
		--show-leak-kinds=definite "$HACCEL_RUN" "$work/tiny" "$@" \
		>"$work/$name.out" 2>"$work/$name.err"
	rc=$?
	# the loader's summary line says which read path ran
	grep -h "weights " "$work/$name.err" "$work/$name.out" | head -n 1 | sed 's/^ */# /'
	if [ "$rc" -eq 0 ]; then
		echo "ok $n $name"
	else
		sed 's/^/# /' "$work/$name.err" | tail -n 30
		echo "# exit status $rc (99: a memcheck error)"
		echo "not ok $n $name"
		fail=1
	fi
}
run_case 1 greedy --prompt "hello, haccel" --max-new 8
run_case 2 sampled_batch --batch "$work/batch.txt" --max-new 6 --temperature 0.8 \
	--top-p 0.9 --seed 7 --chunk 5
exit $fail
