#!/usr/bin/env bash
# spin.sh - check percpu/state.pml (the timer state-word protocol) with Spin.
#
#   scripts/spin.sh              fixed claim (FIXED=1): exhaustive search, must find nothing
#   scripts/spin.sh --old        today's claim (FIXED=0): must find the reset-wrap violation;
#                                prints the trail; exit 0 only if a violation was found
#   scripts/spin.sh --owner-resets  today's protocol with owner resets racing two foreign
#                                threads' (about 3 min): exhaustive, must find nothing
#   scripts/spin.sh --direct-race  the same with reset_direct before it held WRITING
#                                (DIRECT_FIX=0): must find that race (docs/design/model.md)
#   --depth N                    bounded search: at most N steps deep (pan -mN)
#   --quick                      --depth 120
#   -D...                        extra model switches (state.pml header), e.g. -DKIND=2
#   --keep DIR                   work in DIR (default: a temporary directory, removed)
#
# Needs spin (Debian package `spin`) and gcc.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model="$root/percpu/state.pml"
mode=fixed depth=2000000 bounded=0 keep="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --old) mode=old ;;
    --direct-race) mode=direct ;;
    --owner-resets) mode=owner ;;
    --depth) depth=$2; bounded=1; shift ;;
    --quick) depth=120; bounded=1 ;;
    --keep) keep=$2; shift ;;
    -D*) extra+=("$1") ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) echo "spin.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
command -v spin >/dev/null || { echo "spin.sh: spin is not installed (apt-get install spin)" >&2; exit 2; }

# The configuration: one timer, the owner, one runner; the wrap needs 4 resets
# (2-bit sequence) inside the owner's claim window.
case "$mode" in
  fixed)  defs=(-DFIXED=1 -DNFOREIGN=1 -DFOPS=4 -DOOPS=0 -DTMAX=2 -DKIND=0) ;;
  old)    defs=(-DFIXED=0 -DNFOREIGN=1 -DFOPS=4 -DOOPS=0 -DTMAX=2 -DKIND=0) ;;
  direct) defs=(-DFIXED=1 -DDIRECT_FIX=0 -DNFOREIGN=2 -DFOPS=1 -DOOPS=1 -DTMAX=2 -DKIND=0 -DINLINE=1) ;;
  owner)  defs=(-DFIXED=1 -DDIRECT_FIX=1 -DNFOREIGN=2 -DFOPS=1 -DOOPS=1 -DTMAX=2 -DKIND=0 -DINLINE=1) ;;
esac
defs+=("${extra[@]}")

if [ -n "$keep" ]; then work=$keep; mkdir -p "$work"; else
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
cp "$model" "$work/state.pml"
cd "$work"
echo "spin.sh: $mode model: ${defs[*]}$([ $bounded = 1 ] && echo " (bounded: depth $depth)")"
spin "${defs[@]}" -a state.pml >/dev/null
gcc -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=8000 -o pan pan.c
start=$(date +%s.%N)
set +e
./pan -m"$depth" -w26 > pan.out 2>&1
set -e
end=$(date +%s.%N)
grep -E "assertion violated|invalid end state|errors:|states, stored|depth reached|Search not completed|max search depth too small" pan.out || true
awk -v a="$start" -v b="$end" 'BEGIN { printf "spin.sh: %.1f s\n", b - a }'

found=0
grep -q "errors: [1-9]" pan.out && found=1
if [ $found = 1 ]; then
  echo "spin.sh: counterexample (steps that change shared state):"
  spin "${defs[@]}" -t -p -g state.pml 2>&1 |
    grep -vE "\[(st|next|cs|cnext|rs|fs|fnext|ps|pnext|d|d2|r|g|clear|ok|later|claimed|rearm|gi|gL) = 0\]|\.\(goto\)|\[IF\]|\[DO\]|\[else\]|\[\(1\)\]|\[skip\]|gi = |gL = |infl_|cand_e|cand_g|\[cand\[" |
    grep -E "W = |now = |deadline = |\[d = |\[d2 = |eng_d = |poolq = 1|inq = 1|runs\[g\] = \(|cancel0\[g\] = \(|cand_d\[_pid\] = |assert|terminates" |
    grep -vE "assert\(!\(|assert\(\(\(rs&7\)|assert\(\(!\(oneshot" | sed 's/state.pml:[0-9]* (state [0-9]*)//' |
    awk '/^\t\t[A-Za-z_]+ = /{ if (seen[$1] == $3) next; seen[$1] = $3 } { print }' |
    sed -n '1,/^#processes/p'
fi
case "$mode" in
  fixed|owner)
    if [ $found = 1 ]; then echo "spin.sh: FAIL: the fixed model has a violation"; exit 1; fi
    if grep -q "max search depth too small" pan.out; then
      echo "spin.sh: no violation within depth $depth (bounded search)"
    else
      echo "spin.sh: no violation: exhaustive"
    fi
    exit 0 ;;
  *)
    if [ $found = 1 ]; then echo "spin.sh: violation found, as expected"; exit 0; fi
    echo "spin.sh: FAIL: no violation found in the $mode model"; exit 1 ;;
esac
