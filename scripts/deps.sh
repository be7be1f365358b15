#!/usr/bin/env bash
# deps.sh - make sure the Debian 12 packages spoke needs are installed.
# As root it installs what is missing with apt-get; otherwise it prints the
# exact line to run and fails. Sourced by run.sh and test.sh.
set -euo pipefail

SPOKE_DEBIAN_PACKAGES=(
  build-essential cmake clang libclang-rt-14-dev pkg-config
  libcmocka-dev libck-dev liburcu-dev
  valgrind
  spin  # scripts/spin.sh: the Promela model of the state word (docs/model.md)
  gnuplot-nox
  # benchmark-only: `spoke-bench peers` runs them beside spoke; the library never links them
  libevent-dev libuv1-dev
)

spoke_missing_packages() {
  local p
  for p in "${SPOKE_DEBIAN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      echo "$p"
    fi
  done
}

spoke_install_deps() {
  local missing
  missing=$(spoke_missing_packages | tr '\n' ' ')
  [ -z "${missing// /}" ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "spoke: installing missing Debian packages: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq $missing >/dev/null
  else
    echo "spoke: missing Debian packages. Run as root:" >&2
    echo "  apt-get update && apt-get install -y $missing" >&2
    return 1
  fi
}

# Configure and build the test tree of one variant (plain, thread,
# address,undefined) in build/test-<variant>; sets spoke_build to its path.
# The sanitizers need clang; the plain build uses gcc for its warnings.
spoke_build_variant() {
  local v=$1 san cc root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  case "$v" in
    plain) san=""; cc=gcc ;;
    thread|address,undefined) san="$v"; cc=clang ;;
    *) echo "spoke: unknown build variant '$v' (plain, thread, address,undefined)" >&2
       return 2 ;;
  esac
  spoke_build="$root/build/test-${v//,/-}"
  cmake -S "$root" -B "$spoke_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER="$cc" -DSPOKE_SANITIZE="$san" >/dev/null
  cmake --build "$spoke_build" -j "$(nproc)" >/dev/null
}

# The sanitizer settings every run of the tests uses: stop at the first report.
spoke_sanitizer_env() {
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  spoke_install_deps
fi
