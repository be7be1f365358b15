#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# peer_timeout.sh - spoke's engines beside William Ahern's timeout.c
# (github.com/wahern/timeout, 4 wheels x 64 slots with occupancy bitmaps) on
# the W1 and W2 workloads of `spoke-bench schemes`, measured side by side in
# one run: interleaved (every implementation once per repetition of a cell),
# pinned to one CPU, one process per measurement, median of K.
#
#   scripts/peer_timeout.sh TIMEOUT_DIR [options]
#     TIMEOUT_DIR     a checkout of wahern/timeout (timeout.c, timeout.h, ...);
#                     it is compiled from there into a scratch directory,
#                     nothing of it enters this repository
#     --spoke NAME=DIR  a spoke source tree to measure (repeatable; default
#                     this tree as "spoke"): e.g. base=/tmp/spoke-base, made by
#                     `git archive BASE | tar -x -C /tmp/spoke-base`, to see a
#                     change side by side with what it changes
#     --scheme S      spoke engine(s) to run (repeatable; default hierarchical)
#     --sizes LIST    N values (default "1e3 1e4 1e5 1e6")
#     --workloads L   from w1 w2-advance w2-tick (default "w1 w2-advance")
#     --runs K        repetitions per cell, median reported (default 5)
#     --cpu C         CPU to pin to with taskset (default the last one)
#     --cc CC         compiler (default cc), flags -O2 for everything
#     --ttls K        draw every delay from K distinct TTLs (as `spoke-bench
#                     schemes --ttls K`); default uniform, nearly all distinct
#
# Prints, per workload, a markdown table of medians (ns per pair for W1, per
# fired timer for W2) and the ratio of each spoke row to timeout.c.
set -eu

usage() {
	sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

[ $# -ge 1 ] || usage
case $1 in -h | --help) usage ;; esac
tdir=$1
shift
[ -f "$tdir/timeout.c" ] && [ -f "$tdir/timeout.h" ] || {
	echo "peer_timeout.sh: no timeout.c and timeout.h in $tdir" >&2
	exit 2
}
here=$(cd "$(dirname "$0")/.." && pwd)
spokes= schemes= sizes="1e3 1e4 1e5 1e6" workloads="w1 w2-advance" runs=5
cpu=$(($(nproc) - 1)) cc=${CC:-cc}
while [ $# -gt 0 ]; do
	case $1 in
	--spoke) spokes="$spokes $2" shift ;;
	--scheme) schemes="$schemes $2" shift ;;
	--sizes) sizes=$2 shift ;;
	--workloads) workloads=$2 shift ;;
	--runs) runs=$2 shift ;;
	--cpu) cpu=$2 shift ;;
	--cc) cc=$2 shift ;;
	--ttls) PEER_TTLS=$2 && export PEER_TTLS && shift ;;
	*) usage ;;
	esac
	shift
done
[ -n "$spokes" ] || spokes="spoke=$here"
[ -n "$schemes" ] || schemes=hierarchical

work=$(mktemp -d "${TMPDIR:-/tmp}/spoke-peer-timeout.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

impls=timeout
cflags="-O2 -std=gnu11 -w"
for s in $spokes; do
	name=${s%%=*} dir=${s#*=}
	echo "building $name from $dir" >&2
	# shellcheck disable=SC2086
	$cc $cflags -I"$dir/include" -I"$dir/lib" -I"$here/bench" -I"$tdir" \
		-o "$work/bench-$name" "$here/bench/peer_timeout.c" "$here/bench/bench_util.c" \
		"$tdir/timeout.c" "$dir"/lib/bitmap.c "$dir"/lib/engine*.c -lm
	for sch in $schemes; do impls="$impls $name:$sch"; done
done
first=${spokes%%=*}
first=${first# }

# Binary and IMPL argument of an implementation name.
bin_of() { case $1 in timeout) echo "$work/bench-$first" ;; *) echo "$work/bench-${1%%:*}" ;; esac; }
arg_of() { case $1 in timeout) echo timeout ;; *) echo "spoke:${1#*:}" ;; esac; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs," \
	"pinned to CPU $cpu; $(date -u +%Y-%m-%d); spoke $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')" \
	"; timeout.c $(git -C "$tdir" rev-parse --short HEAD 2>/dev/null || echo "from $tdir")"
nimpl=$(echo "$impls" | wc -w)
total=$(($(echo "$workloads" | wc -w) * $(echo "$sizes" | wc -w) * runs * nimpl))
done_=0 start=$(date +%s)
for w in $workloads; do
	for n in $sizes; do
		r=1
		while [ "$r" -le "$runs" ]; do
			for i in $impls; do
				v=$(taskset -c "$cpu" "$(bin_of "$i")" "$(arg_of "$i")" "$w" "$n" "$r")
				echo "$w $n $i $v" >>"$work/results"
				done_=$((done_ + 1))
				if [ -t 2 ]; then
					el=$(($(date +%s) - start))
					printf '\r%d/%d measurements, about %d s left ' "$done_" "$total" \
						$((el * (total - done_) / done_)) >&2
				fi
			done
			r=$((r + 1))
		done
	done
done
[ -t 2 ] && printf '\r\033[K' >&2

median() { # workload n impl
	awk -v w="$1" -v n="$2" -v i="$3" '$1 == w && $2 == n && $3 == i { print $4 }' \
		"$work/results" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

for w in $workloads; do
	printf '\n%s, ns per %s, median of %d, interleaved\n\n| %-22s |' "$w" \
		"$([ "$w" = w1 ] && echo pair || echo 'fired timer')" "$runs" "implementation"
	for n in $sizes; do printf ' %8s |' "$n"; done
	printf '\n|%s|' "------------------------"
	for n in $sizes; do printf '%s|' "----------"; done
	echo
	for i in $impls; do
		printf '| %-22s |' "$([ "$i" = timeout ] && echo timeout.c || echo "$i")"
		for n in $sizes; do printf ' %8s |' "$(median "$w" "$n" "$i")"; done
		echo
	done
	for i in $impls; do
		[ "$i" = timeout ] && continue
		printf '| %-22s |' "$i / timeout.c"
		for n in $sizes; do
			printf ' %8s |' "$(awk -v a="$(median "$w" "$n" "$i")" \
				-v b="$(median "$w" "$n" timeout)" 'BEGIN { printf "%.2fx", a / b }')"
		done
		echo
	done
done
