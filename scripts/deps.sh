#!/usr/bin/env bash
# deps.sh - make sure the Debian 12 packages spoke needs are installed.
# As root it installs what is missing with apt-get; otherwise it prints the
# exact line to run and fails. Sourced by run.sh, test.sh and the others.
#   spoke_install_deps lib          the library and spoke-demo (scripts/run.sh)
#   spoke_install_deps lib bench    + spoke-bench peers' loops and the plots
#   spoke_install_deps              lib, bench and the test suite
#   spoke_install_deps lib load     what scripts/server-load.sh needs
set -euo pipefail

# The library and the demo (demo/spoke_demo.c): nothing more.
SPOKE_LIB_PACKAGES=(
  build-essential cmake pkg-config liburcu-dev
)

# `spoke-bench peers` runs libevent and libuv beside spoke, and
# examples/{uv,event}_attached.c embed a shard in their loops (the library
# never links them); scripts/plot.sh draws with gnuplot.
SPOKE_BENCH_PACKAGES=(
  libevent-dev libuv1-dev
  gnuplot-nox
)

# The test suite (scripts/test.sh, fuzz.sh, soak.sh), on top of the two sets
# above: sanitizers and libFuzzer (clang), cmocka, valgrind, the man page
# checker (groff, man-db), and what the examples beyond spoke-demo need.
SPOKE_DEBIAN_PACKAGES=(
  clang libclang-rt-14-dev
  libcmocka-dev
  valgrind
  groff-base man-db
  libhttp-parser-dev # spoke-httpd (examples/httpd.c) and tests/server
  systemtap-sdt-dev  # <sys/sdt.h>: the USDT probes that abi.usdt_probes checks
  spin               # scripts/spin.sh: the Promela model of the state word (docs/design/model.md)
)

# scripts/server-load.sh only (not the tests): the load and slow-client tools, tcpdump
# for the close times of the idle flood, nginx for the column beside spoke-httpd.
SPOKE_LOAD_PACKAGES=(
  wrk slowhttptest tcpdump nginx-light
)

# The packages of the sets named (lib, bench, test, load; none = lib, bench, test).
spoke_packages() {
  local set
  [ $# -eq 0 ] && set -- lib bench test
  for set in "$@"; do
    case "$set" in
      lib) printf '%s\n' "${SPOKE_LIB_PACKAGES[@]}" ;;
      bench) printf '%s\n' "${SPOKE_BENCH_PACKAGES[@]}" ;;
      test) printf '%s\n' "${SPOKE_DEBIAN_PACKAGES[@]}" ;;
      load) printf '%s\n' "${SPOKE_LOAD_PACKAGES[@]}" ;;
      *) echo "spoke: unknown package set '$set' (lib, bench, test, load)" >&2; return 2 ;;
    esac
  done
}

spoke_missing_packages() {
  local p
  for p in $(spoke_packages "$@"); do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      echo "$p"
    fi
  done
}

# spoke_install_deps [set...]: the sets of spoke_packages (none = all).
spoke_install_deps() {
  local missing
  missing=$(spoke_missing_packages "$@" | tr '\n' ' ')
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
  # The project's own builds are warning-free: -Werror (SPOKE_WERROR), and every
  # part required (ON), so a missing dependency fails instead of skipping tests.
  cmake -S "$root" -B "$spoke_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER="$cc" -DSPOKE_SANITIZE="$san" -DSPOKE_WERROR=ON \
        -DSPOKE_BUILD_TESTS=ON -DSPOKE_BUILD_BENCH=ON -DSPOKE_BUILD_EXAMPLES=ON -DSPOKE_BUILD_DEMO=ON >/dev/null
  cmake --build "$spoke_build" -j "$(nproc)" >/dev/null
}

# The sanitizer settings every run of the tests uses: stop at the first report.
spoke_sanitizer_env() {
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  spoke_install_deps "$@"
fi
