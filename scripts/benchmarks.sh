#!/usr/bin/env bash
# benchmarks.sh - the runs behind docs/results/{peers,latency}.md, in one go on this
# machine: `spoke-bench peers` and `spoke-bench latency` with --json, then
# the plots and the Markdown tables made from that JSON.
#   scripts/benchmarks.sh [out-dir]     (default build/benchmarks)
# Writes <out-dir>/{peers,latency}.json, <out-dir>/{peers,latency}.md (tables),
# <out-dir>/{peers,latency}.png and <out-dir>/machine.txt. Takes ~8 minutes
# on 2 CPUs; run it on an otherwise idle machine. Copy the JSON, PNGs and
# tables to docs/results/ (with the machine, date and commit) to publish a run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/benchmarks}
mkdir -p "$out"
{
  date -u '+%Y-%m-%d %H:%M UTC'
  grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'
  echo "$(nproc) CPUs, Linux $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
} >"$out/machine.txt"
for sub in peers latency; do
  echo "=== spoke-bench $sub ==="
  bash "$root/scripts/run.sh" "$sub" --json >"$out/$sub.json"
  bash "$root/scripts/bench_tables.sh" "$out/$sub.json" >"$out/$sub.md"
  bash "$root/scripts/plot.sh" "$out/$sub.json" "$out" >/dev/null
done
cat "$out/machine.txt"
echo "=== results in $out ==="
