#!/usr/bin/env bash
# test.sh - the whole test suite: install what is missing, then build and
# run every test three times: plain (gcc), ThreadSanitizer, ASan+UBSan (with
# LeakSanitizer); then fuzz: replay the committed corpora and run each
# libFuzzer target for SPOKE_FUZZ_SECONDS (default 45) s (scripts/fuzz.sh).
# Stops at the first failing build or test. docs/design/testing.md says what runs.
#   scripts/test.sh            all four (about 10 min on 2 idle CPUs)
#   scripts/test.sh plain      one of: plain thread address,undefined fuzz
#
# Every phase says what it is and about how long it takes on 2 idle CPUs,
# then prints a line every 20 s while it runs (ctest adds a line per test as
# each ends), and how long it took; the last line gives the total.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

t0=$(date +%s)
ticker_pid=

# Seconds as "N s" or "M min SS s".
fmt_s() {
  if [ "$1" -ge 60 ]; then printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); else printf '%d s' "$1"; fi
}

# About how long each phase takes on 2 idle CPUs (the reference machine of
# docs/design/testing.md, "Time budget"); a loaded machine takes longer.
estimate() {
  case "$1" in
    deps) echo 60 ;;
    "build plain") echo 110 ;;
    "ctest plain") echo 230 ;;
    "build thread") echo 100 ;;
    "ctest thread") echo 150 ;;
    "build address,undefined") echo 100 ;;
    "ctest address,undefined") echo 70 ;;
    fuzz) echo $((60 + 2 * ${SPOKE_FUZZ_SECONDS:-45})) ;;
    *) echo 60 ;;
  esac
}

# The ticker: one line every 20 s with the phase's time and the total so far.
tick() {
  local label=$1 est=$2 start=$3 s
  trap 'kill "$s" 2>/dev/null; exit 0' TERM
  while :; do
    sleep 20 &
    s=$!
    wait "$s"
    echo "--- spoke tests: $label: $(fmt_s $(($(date +%s) - start))) so far (about $(fmt_s "$est") expected); $(fmt_s $(($(date +%s) - t0))) in all"
  done
}

stop_ticker() {
  if [ -n "$ticker_pid" ]; then
    kill "$ticker_pid" 2>/dev/null || true
    wait "$ticker_pid" 2>/dev/null || true
    ticker_pid=
  fi
}
trap stop_ticker EXIT

# phase LABEL CMD...: run CMD, with the ticker going meanwhile. CMD runs in
# a subshell of its own (so that set -e stops it at its first failure), which
# sets nothing in this shell.
phase() {
  local label=$1 est start pid rc=0
  shift
  est=$(estimate "$label")
  start=$(date +%s)
  echo "--- spoke tests: $label (about $(fmt_s "$est") on 2 idle CPUs)"
  tick "$label" "$est" "$start" &
  ticker_pid=$!
  "$@" &
  pid=$!
  wait "$pid" || rc=$?
  stop_ticker
  if [ "$rc" -ne 0 ]; then
    echo "--- spoke tests: $label FAILED after $(fmt_s $(($(date +%s) - start)))" >&2
    return "$rc"
  fi
  echo "--- spoke tests: $label: done in $(fmt_s $(($(date +%s) - start)))"
}

run_ctest() {
  cd "$root/build/test-${1//,/-}" # where spoke_build_variant builds it
  ctest --output-on-failure -j "$(nproc)" --timeout 900
}

phase deps spoke_install_deps
spoke_sanitizer_env

variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(plain thread "address,undefined" fuzz)

for v in "${variants[@]}"; do
  echo "=== spoke tests: ${v} ==="
  if [ "$v" = fuzz ]; then
    phase fuzz bash "$root/scripts/fuzz.sh" "${SPOKE_FUZZ_SECONDS:-45}"
    continue
  fi
  phase "build $v" spoke_build_variant "$v"
  phase "ctest $v" run_ctest "$v"
done
echo "=== spoke tests: all variants passed (${variants[*]}) in $(fmt_s $(($(date +%s) - t0))) ==="
