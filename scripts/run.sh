#!/usr/bin/env bash
# run.sh - the main job: install what is missing, build (Release) and run
#   scripts/run.sh                 spoke-demo: the service under a server-like load, ~10 s
#   scripts/run.sh schemes [...]   spoke-bench schemes: the paper's comparison of the schemes
#   scripts/run.sh service [...]   (or any other spoke-bench subcommand)
# Extra arguments go to the program (e.g. --seconds 5, or --json / --plot out.png).
# The demo needs only the library's packages (deps.sh: lib); a spoke-bench
# subcommand also gets the bench set (libevent, libuv, gnuplot). Only the
# program to run is built; each step says what it does on stderr, and a
# failing step shows its log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"

if [ $# -eq 0 ] || [ "${1#-}" != "$1" ]; then
  target=spoke-demo exe=demo/spoke-demo sets=(lib) took="about 10 s"
else
  target=spoke-bench exe=bench/spoke-bench sets=(lib bench) took="about 15 s"
fi
say() { echo "spoke: $*" >&2; }

say "checking the Debian packages it needs (deps.sh: ${sets[*]})…"
spoke_install_deps "${sets[@]}"

build="$root/build/release"
log="$build/run-sh.log"
mkdir -p "$build"
# Run one step with its output in $log; show the log only if it fails.
step() {
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    say "failed: $*"
    exit 1
  fi
}
say "configuring in ${build#"$root"/}…"
step cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOKE_BUILD_TESTS=OFF \
  -DSPOKE_BUILD_DEMO=ON -DSPOKE_BUILD_BENCH=ON
say "building $target ($took on 2 CPUs the first time)…"
step cmake --build "$build" -j "$(nproc)" --target "$target"
say "running $target $*"
exec "$build/$exe" "$@"
