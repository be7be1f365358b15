#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench-instructions.sh - instructions (and last-level cache misses) per
# operation of spoke's hot paths, counted by valgrind's callgrind: what a
# change to the owner's path or the producer's path is compared with, since
# a count does not move with the machine's load as a timing does.
#
#   scripts/bench-instructions.sh [options] [NAME=TREE ...]
#
#     NAME=TREE     a spoke source tree whose library to count, its column
#                   named NAME (repeatable; default: this tree, "this"). To
#                   see a change beside what it changes:
#                     git archive BASE | tar -x -C /tmp/spoke-base
#                     scripts/bench-instructions.sh base=/tmp/spoke-base this=.
#                   Each tree's static library is built (Release) in
#                   TREE/build/instructions; the harness, bench/counted.c and
#                   its helpers from THIS tree, is compiled against it, so
#                   every column runs the same harness.
#     --rows LIST   comma-separated rows (default own-pair,reset-own,
#                   cross-start,cross-cancel,fire-inline); all of them:
#                   own-pair engine-pair engine-clock-pair reset-own
#                   engine-clock-reset reset-foreign cross-start cross-cancel
#                   fire-inline harness (bench/counted.c says what each does)
#     --ops K       operations per counted run (default 2000)
#     --pending N   timers pending beside them, pair and reset rows (default
#                   the row's: 0 for the pairs, 1000 for the resets); the
#                   owner's-path goals are stated at 1e3 .. 1e6
#     --no-cache    no cache simulation: faster, instructions only
#     -h, --help    this text
#
# How it counts. Each row runs twice per tree under
#   valgrind --tool=callgrind --collect-atstart=no \
#            --toggle-collect=bench_counted_ops [--cache-sim=yes]
# once with --ops K and once with --ops 0. callgrind collects only while
# bench_counted_ops (and what it calls) runs, on the thread that calls it:
# the setup (service, pending timers, warm-up), the checks, the teardown and
# the service's own threads are not counted. The run with 0 operations is
# subtracted - the function's entry and its loop's fixed cost - and the
# difference divided by K: instructions per operation (Ir) and, with the
# cache simulation, last-level misses per operation (ILmr + DLmr + DLmw;
# callgrind's last level is this machine's). Each operation includes what
# the harness's loop adds (a PRNG step and the loop, a handful of
# instructions: the `harness` row counts it); the same in every column.
# Single-threaded rows count the same on every run; cross-start and
# reset-foreign can move by a few instructions with how a compare-and-swap
# meets the shard's thread. callgrind counts user space only: under valgrind
# a clock read is a system call (no vDSO), so the clock read that every
# service start and reset makes, and that the engine-clock-* rows add,
# counts ~20 instructions, not what it costs natively.
#
# Output: a Markdown table, a line per row and event, a column per tree,
# and each later tree's ratio to the first. Needs valgrind (the test set of
# scripts/deps.sh installs it), cmake and cc.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

usage() {
	sed -n '4,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
	exit "${1:-2}"
}

rows=own-pair,reset-own,cross-start,cross-cancel,fire-inline
ops=2000 pending='' cache=yes trees=()
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage 0 ;;
	--rows) rows=$2 && shift ;;
	--ops) ops=$2 && shift ;;
	--pending) pending=$2 && shift ;;
	--no-cache) cache=no ;;
	*=*) trees+=("$1") ;;
	*) echo "bench-instructions.sh: unknown argument '$1' (--help)" >&2 && exit 2 ;;
	esac
	shift
done
[ ${#trees[@]} -gt 0 ] || trees=("this=$here")
command -v valgrind >/dev/null || {
	echo "bench-instructions.sh: valgrind not found (Debian: apt-get install valgrind)" >&2
	exit 2
}

work=$(mktemp -d "${TMPDIR:-/tmp}/spoke-instructions.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# Build a tree's library and this tree's harness against it: $work/counted-NAME.
build() { # NAME TREE
	local name=$1 tree build
	tree=$(cd "$2" && pwd)
	build=$tree/build/instructions
	echo "building $name: the library of $tree, the harness of $here" >&2
	cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOKE_BUILD_TESTS=OFF \
		-DSPOKE_BUILD_BENCH=OFF -DSPOKE_BUILD_EXAMPLES=OFF -DSPOKE_BUILD_DEMO=OFF >/dev/null
	cmake --build "$build" -j "$(nproc)" --target spoke_static >/dev/null
	# shellcheck disable=SC2046
	cc -O2 -std=gnu11 -I"$tree/include" -o "$work/counted-$name" "$here/bench/counted.c" \
		"$here/bench/counted_main.c" \
		"$here/bench/bench_util.c" "$here/bench/bench_opts.c" "$here/bench/bench_svc.c" \
		"$build/libspoke.a" $(pkg-config --libs liburcu-bp liburcu-cds) -lpthread -lm
}

# The events of one run: "Ir ... DLmw" values of callgrind's summary line, missing ones 0.
count() { # NAME ROW OPS
	local out=$work/cg.$1.$2.$3 args=(--row "$2" --ops "$3")
	[ -z "$pending" ] || args+=(--pending "$pending")
	valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
		--toggle-collect=bench_counted_ops --cache-sim="$cache" \
		"$work/counted-$1" "${args[@]}" >/dev/null 2>"$out.log" || {
		cat "$out.log" >&2
		echo "bench-instructions.sh: $1 $2 --ops $3 failed" >&2
		exit 1
	}
	awk '/^events:/ { n = split($0, ev, " ") } /^summary:/ {
		for (i = 2; i <= n; i++) v[ev[i]] = (i <= NF ? $i : 0)
		printf "%s %s\n", v["Ir"] + 0, v["ILmr"] + v["DLmr"] + v["DLmw"] }' "$out"
}

names=()
for t in "${trees[@]}"; do
	names+=("${t%%=*}")
	build "${t%%=*}" "${t#*=}"
done

echo "# $(date -u +%F); $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs;" \
	"harness $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?');" \
	"--ops $ops${pending:+ --pending $pending}; per operation, less a run with --ops 0"
printf '\n| row | per op |'
for n in "${names[@]}"; do printf ' %s |' "$n"; done
for n in "${names[@]:1}"; do printf ' %s / %s |' "$n" "${names[0]}"; done
printf '\n|---|---|'
for _ in "${names[@]}" "${names[@]:1}"; do printf -- '--:|'; done
printf '\n'
IFS=, read -r -a rowlist <<<"$rows"
for row in "${rowlist[@]}"; do
	ir=() ll=()
	for n in "${names[@]}"; do
		read -r ir_k ll_k <<<"$(count "$n" "$row" "$ops")"
		read -r ir_0 ll_0 <<<"$(count "$n" "$row" 0)"
		ir+=("$(awk -v a="$ir_k" -v b="$ir_0" -v k="$ops" 'BEGIN { printf "%.1f", (a - b) / k }')")
		ll+=("$(awk -v a="$ll_k" -v b="$ll_0" -v k="$ops" 'BEGIN { printf "%.3f", (a - b) / k }')")
	done
	for ev in instructions "LL misses"; do
		[ "$ev" = instructions ] || [ "$cache" = yes ] || continue
		printf '| %s | %s |' "$row" "$ev"
		if [ "$ev" = instructions ]; then vals=("${ir[@]}"); else vals=("${ll[@]}"); fi
		for v in "${vals[@]}"; do printf ' %s |' "$v"; done
		for v in "${vals[@]:1}"; do
			printf ' %s |' "$(awk -v a="$v" -v b="${vals[0]}" \
				'BEGIN { if (b > 0) printf "%.3fx", a / b; else print "-" }')"
		done
		printf '\n'
	done
done
