#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# pool-ab.sh - the callback pool before and after, side by side: builds
# bench/pool_ab.c against the library of two commits (Release, in a scratch
# directory) and runs them interleaved, ROUNDS rounds of each configuration
# (shards workers) on each version, alternating versions within a round.
#
# usage: scripts/pool-ab.sh BEFORE AFTER [ROUNDS] [N]   (commits; default 5, 1000000)
set -eu
before=$1 after=$2 rounds=${3:-5} n=${4:-1000000}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/pool-ab.XXXXXX)
for v in before after; do
	eval rev=\$$v
	mkdir -p "$work/$v"
	git -C "$root" archive "$rev" | tar -x -C "$work/$v"
	cmake -S "$work/$v" -B "$work/$v/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$work/$v/build" -j2 --target spoke_static >/dev/null
	cc -O2 -o "$work/ab-$v" "$root/bench/pool_ab.c" -I "$work/$v/include" \
		"$work/$v/build/libspoke.a" $(pkg-config --libs liburcu-bp liburcu-cds) -lpthread -lm
done
echo "# before $before, after $after; $(date -u +%F); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
for r in $(seq "$rounds"); do
	for cfg in "2 2" "8 8"; do
		for v in before after; do
			printf '%s round %s ' "$v" "$r"
			# shellcheck disable=SC2086
			"$work/ab-$v" $cfg "$n"
		done
	done
done
rm -rf "$work"
