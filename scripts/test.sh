#!/usr/bin/env bash
# test.sh - the whole test suite: install what is missing, then build and
# run every test three times: plain, ThreadSanitizer, ASan+UBSan (with
# LeakSanitizer). Stops at the first failing build or test.
#   scripts/test.sh            all three
#   scripts/test.sh plain      one of: plain thread address,undefined
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps

jobs=$(nproc)
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(plain thread address,undefined)

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

for v in "${variants[@]}"; do
  case "$v" in
    plain) san=""; cc=gcc ;;          # gcc's warnings on the plain build
    thread|address,undefined) san="$v"; cc=clang ;;
    *) echo "test.sh: unknown variant '$v'" >&2; exit 2 ;;
  esac
  build="$root/build/test-${v//,/-}"
  echo "=== spoke tests: ${v} ==="
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER="$cc" -DSPOKE_SANITIZE="$san" >/dev/null
  cmake --build "$build" -j "$jobs" >/dev/null
  (cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 900)
done
echo "=== spoke tests: all variants passed (${variants[*]}) ==="
