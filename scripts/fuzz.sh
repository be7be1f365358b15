#!/usr/bin/env bash
# fuzz.sh - build the libFuzzer targets (fuzz/, clang, ASan+UBSan+LeakSanitizer)
# in build/fuzz, replay each committed corpus once (a regression check), then
# fuzz each target for a fixed time on a copy of its corpus. Fails on any
# crash, leak, timeout or oracle mismatch; the input that did it is left in
# build/fuzz/artifacts/ (reproduce: build/fuzz/fuzz/<target> <file>).
#   scripts/fuzz.sh                  30 s per target
#   scripts/fuzz.sh 60               60 s per target
#   scripts/fuzz.sh 60 --merge       also merge what was found into fuzz/corpus/
#                                    (only inputs that add coverage)
#   FUZZ_TARGETS="fuzz_engine" scripts/fuzz.sh    one target only
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps

seconds=30
merge=0
for arg in "$@"; do
  case "$arg" in
    --merge) merge=1 ;;
    ''|*[!0-9]*) echo "usage: fuzz.sh [seconds-per-target] [--merge]" >&2; exit 2 ;;
    *) seconds=$arg ;;
  esac
done

build="$root/build/fuzz"
read -ra targets <<<"${FUZZ_TARGETS:-fuzz_engine fuzz_config}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "=== spoke fuzz: build ==="
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
      -DSPOKE_FUZZ=ON -DSPOKE_WERROR=ON -DSPOKE_BUILD_TESTS=OFF -DSPOKE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >/dev/null

# Per-target limits: the longest input and how long one input may take.
max_len() {
  case "$1" in
    fuzz_engine) echo 1024 ;;
    *) echo 256 ;;
  esac
}

mkdir -p "$build/artifacts"
work=$(mktemp -d "$build/work.XXXXXX")
trap 'rm -rf "$work"' EXIT

for t in "${targets[@]}"; do
  name=${t#fuzz_}
  corpus="$root/fuzz/corpus/$name"
  bin="$build/fuzz/$t"
  common=(-timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")"
          -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1)

  echo "=== spoke fuzz: $t: replay $(find "$corpus" -type f | wc -l) corpus inputs ==="
  "$bin" "${common[@]}" -runs=0 "$corpus" >"$work/$t.replay.log" 2>&1 || {
    tail -n 40 "$work/$t.replay.log" >&2
    echo "fuzz.sh: $t failed on its committed corpus" >&2
    exit 1
  }

  echo "=== spoke fuzz: $t: ${seconds} s ==="
  cp -r "$corpus" "$work/$name"
  "$bin" "${common[@]}" -max_total_time="$seconds" "$work/$name" >"$work/$t.log" 2>&1 || {
    tail -n 60 "$work/$t.log" >&2
    echo "fuzz.sh: $t failed; the input is in $build/artifacts/" >&2
    exit 1
  }
  grep -E '^stat::(number_of_executed_units|new_units_added)' "$work/$t.log" | tr '\n' ' '
  echo

  if [ "$merge" -eq 1 ]; then
    before=$(find "$corpus" -type f | wc -l)
    # Edges only (no hit counters): keeps the committed corpus small.
    "$bin" "${common[@]}" -merge=1 -use_counters=0 -use_value_profile=0 \
           "$corpus" "$work/$name" >"$work/$t.merge.log" 2>&1
    echo "merged into fuzz/corpus/$name: $before -> $(find "$corpus" -type f | wc -l) files"
  fi
done
echo "=== spoke fuzz: all targets passed (${targets[*]}, ${seconds} s each) ==="
