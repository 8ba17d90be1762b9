#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerate the seed corpus of the safetensors fuzz target (tests/fuzz/corpus):
# small valid files covering each feature of the format, and a few invalid
# ones (named bad-*) one mutation away from valid. Usage: make-corpus.sh [DIR]
set -eu
out=${1:-$(cd "$(dirname "$0")" && pwd)/corpus}
mkdir -p "$out"

# The 8-byte little-endian length of the header.
le64() {
	n=$1
	i=0
	while [ $i -lt 8 ]; do
		# shellcheck disable=SC2059 # the format is the byte
		printf "\\$(printf '%03o' $((n & 255)))"
		n=$((n >> 8))
		i=$((i + 1))
	done
}

# seed NAME HEADER DATA_BYTES [PAD]: header padded with PAD spaces, then
# DATA_BYTES bytes counting up.
seed() {
	hdr=$2
	pad=${4:-0}
	len=$((${#hdr} + pad))
	{
		le64 $len
		printf '%s' "$hdr"
		head -c "$pad" /dev/zero | tr '\0' ' '
		i=0
		while [ $i -lt "$3" ]; do
			# shellcheck disable=SC2059
			printf "\\$(printf '%03o' $((i * 37 & 255)))"
			i=$((i + 1))
		done
	} >"$out/$1"
}

t() { # name dtype shape begin end
	printf '"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%s,%s]}' "$@"
}

seed empty '{}' 0 6
seed one-bf16 "{$(t w BF16 2,3 0 12)}" 12
seed unsorted "{$(t b I64 1 8 16),$(t a F32 2 0 8)}" 16
seed metadata "{\"__metadata__\":{\"format\":\"pt\",\"haccel.xxh3:w\":\"0123456789abcdef\"},$(t w U8 4 0 4)}" 4
seed scalar "{$(t s F64 '' 0 8)}" 8
seed zero-size "{$(t z F32 0,5 0 0),$(t w U8 1 0 1),$(t e I8 3,0 1 1)}" 1
seed packed "{$(t q F4 2,3 0 3),$(t r F6_E2M3 4 3 6),$(t s F6_E3M2 8 6 12)}" 12
all=
at=0
for d in BOOL:1 U8:1 I8:1 F8_E4M3:1 F8_E5M2:1 F8_E8M0:1 I16:2 U16:2 F16:2 BF16:2 \
	I32:4 U32:4 F32:4 I64:8 U64:8 F64:8 C64:8; do
	name=${d%:*}
	b=${d#*:}
	all="$all$(t "$name" "$name" 2 $at $((at + 2 * b))),"
	at=$((at + 2 * b))
done
seed dtypes "{${all%,}}" $at
seed padded "{$(t w F16 1,1,2 0 4)}" 4 7
seed dims16 "{$(t d U8 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,2 0 2)}" 2
seed names "{$(t 'caf\u00e9 \"q\"' U8 1 0 1),$(t '' U8 1 1 2)}" 2
seed bad-hole "{$(t a U8 2 0 2),$(t b U8 2 3 5)}" 5
seed bad-overlap "{$(t a U8 2 0 2),$(t b U8 2 1 3)}" 3
seed bad-size "{$(t w BF16 10,20 0 100)}" 100
seed bad-dup "{$(t w U8 1 0 1),$(t w U8 1 1 2)}" 2
seed bad-trailing "{$(t w U8 1 0 1)}" 3
ls "$out"
