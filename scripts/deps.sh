#!/usr/bin/env bash
# deps.sh - make sure the Debian 12 packages spoke needs are installed.
# As root it installs what is missing with apt-get; otherwise it prints the
# exact line to run and fails. Sourced by run.sh and test.sh.
set -euo pipefail

SPOKE_DEBIAN_PACKAGES=(
  build-essential cmake clang libclang-rt-14-dev pkg-config
  libcmocka-dev libck-dev liburcu-dev
  gnuplot-nox
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

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  spoke_install_deps
fi
