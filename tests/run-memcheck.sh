#!/bin/sh
# SPDX-License-Identifier: MIT
# haccel-run on the tiny preset under valgrind memcheck, end to end: the
# loader (io_uring where the kernel allows it, its completed reads marked
# defined for memcheck), the CPU backend's prefill and decode, greedy and
# sampled, one prompt and a batch. Any memcheck error or definite leak
# fails the case (exit 99). KTAP output; run by make check where valgrind
# and valgrind/memcheck.h are found.
#
# In a shared build $HACCEL_RUN is libtool's wrapper script, and valgrind
# would check only the shell that execs the real program: the program is
# run through `$LIBTOOL --mode=execute` (make check exports LIBTOOL), which
# puts valgrind on the real binary (and on a static build's binary as is).
set -u
: "${HACCEL_CTL:?}" "${HACCEL_RUN:?}"
# (VALGRIND and LIBTOOL may hold arguments: split on purpose)
vg=${VALGRIND:-valgrind}
lt=${LIBTOOL:+$LIBTOOL --mode=execute}
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
	$lt $vg --log-file="$work/$name.vg" --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite --show-leak-kinds=definite \
		"$HACCEL_RUN" "$work/tiny" --device cpu "$@" \
		>"$work/$name.out" 2>"$work/$name.err"
	rc=$?
	# the loader's summary line says which read path ran
	grep -h "weights " "$work/$name.err" "$work/$name.out" | head -n 1 | sed 's/^ */# /'
	# memcheck's "Command:" line names what it checked: the program
	# itself (an ELF file), not a wrapper script's shell
	prog=$(sed -n 's/^==[0-9]*== Command: \([^ ]*\).*/\1/p' "$work/$name.vg" | head -n 1)
	if [ "$rc" -eq 0 ] && ! { [ -n "$prog" ] && head -c 4 "$prog" | grep -q ELF; }; then
		echo "# memcheck did not check haccel-run's own binary (it ran: '$prog')"
		rc=98
	fi
	if [ "$rc" -eq 0 ]; then
		echo "ok $n $name"
	else
		sed 's/^/# /' "$work/$name.vg" | grep -v "^# ==[0-9]*== *$" | head -n 40
		sed 's/^/# /' "$work/$name.err" | tail -n 10
		echo "# exit status $rc (99: a memcheck error)"
		echo "not ok $n $name"
		fail=1
	fi
}
run_case 1 greedy --prompt "hello, haccel" --max-new 8
run_case 2 sampled_batch --batch "$work/batch.txt" --max-new 6 --temperature 0.8 \
	--top-p 0.9 --seed 7 --chunk 5
# The loader's marks are under test only where it read through io_uring.
grep -q "(io_uring" "$work/greedy.err" "$work/greedy.out" ||
	echo "# io_uring refused here: the loader read with pread, its marks unused"
exit $fail
