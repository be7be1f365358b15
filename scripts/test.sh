#!/usr/bin/env bash
# test.sh - the whole test suite: install what is missing, then build and
# run every test three times: plain (gcc), ThreadSanitizer, ASan+UBSan (with
# LeakSanitizer); then fuzz: replay the committed corpora and run each
# libFuzzer target for SPOKE_FUZZ_SECONDS (default 45) s (scripts/fuzz.sh).
# Stops at the first failing build or test. docs/testing.md says what runs.
#   scripts/test.sh            all four
#   scripts/test.sh plain      one of: plain thread address,undefined fuzz
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps
spoke_sanitizer_env

variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(plain thread "address,undefined" fuzz)

for v in "${variants[@]}"; do
  echo "=== spoke tests: ${v} ==="
  if [ "$v" = fuzz ]; then
    bash "$root/scripts/fuzz.sh" "${SPOKE_FUZZ_SECONDS:-45}"
    continue
  fi
  spoke_build_variant "$v"
  (cd "$spoke_build" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
done
echo "=== spoke tests: all variants passed (${variants[*]}) ==="
