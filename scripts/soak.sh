#!/usr/bin/env bash
# soak.sh - run the stress programs for as long as asked, in one build.
#   scripts/soak.sh [variant] [seconds-per-program] [program...]
#     variant   plain (default), thread or address,undefined
#     seconds   per program (default 600)
#     program   churn reset expiry callbacks periodic lawn attached destroy
#               (default: all, in that order)
# Each program runs with --soak: no operation limit, its rounds repeat until
# the time is up. Stops at the first failing program; its seed is in the
# output (rerun it with --seed). SPOKE_SOAK_SEED=N passes the same seed to all.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps
spoke_sanitizer_env

variant=${1:-plain}
seconds=${2:-600}
shift $(( $# > 2 ? 2 : $# ))
programs=("$@")
[ ${#programs[@]} -eq 0 ] &&
  programs=(churn reset expiry callbacks periodic lawn attached destroy)
case "$seconds" in
  ''|*[!0-9]*|0) echo "soak.sh: seconds must be a positive integer, not '$seconds'" >&2; exit 2 ;;
esac

spoke_build_variant "$variant"
seed_args=()
[ -n "${SPOKE_SOAK_SEED:-}" ] && seed_args=(--seed "$SPOKE_SOAK_SEED")
for p in "${programs[@]}"; do
  exe="$spoke_build/stress/stress_$p"
  if [ ! -x "$exe" ]; then
    echo "soak.sh: no stress program '$p' (looked for $exe)" >&2
    exit 2
  fi
  echo "=== soak: stress_$p, $variant, ${seconds} s ==="
  "$exe" --soak --seconds "$seconds" "${seed_args[@]}"
done
echo "=== soak: ${programs[*]} passed ($variant, ${seconds} s each) ==="
