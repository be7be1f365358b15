#!/usr/bin/env bash
# run.sh - the main job: install what is missing, build (Release) and run
#   scripts/run.sh                 spoke-demo: the service under a server-like load, ~10 s
#   scripts/run.sh schemes [...]   spoke-bench schemes: the paper's comparison of the schemes
#   scripts/run.sh service [...]   (or any other spoke-bench subcommand)
# Extra arguments go to the program (e.g. --seconds 5, or --json / --plot out.png).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps

build="$root/build/release"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOKE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
if [ $# -eq 0 ] || [ "${1#-}" != "$1" ]; then
  exec "$build/examples/spoke-demo" "$@"
fi
exec "$build/bench/spoke-bench" "$@"
