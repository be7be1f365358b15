#!/usr/bin/env bash
# run.sh - the main job: install what is missing, build (Release) and run
# the paper's comparison of the eight timer schemes (spoke-bench schemes).
# Extra arguments go to spoke-bench schemes (e.g. --json, --plot out.png).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps

build="$root/build/release"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOKE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
exec "$build/bench/spoke-bench" schemes "$@"
