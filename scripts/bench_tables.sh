#!/usr/bin/env bash
# bench_tables.sh - Markdown tables from spoke-bench --json output.
#   scripts/bench_tables.sh <in.json>      ("-" reads stdin)
# For result rows ({"<subject>":..,"workload":..,"n":..,"ns_per_op":..}, from
# `schemes` or `peers`): one table per workload, a row per subject, a column
# per N; a cell is "median (ratio x)" when the row has a ratio, "cap" or
# "skipped" (the reasons are listed under the table); a cell in another unit
# than the table's first row is marked "*" and its unit listed under the
# table. For `latency` rows: one table of p50 / p99 / p99.9 / max (us) per
# pending count, tick and load, with the slack in effect, the process's CPU %
# and context switches per second (when the run reports them; "-" if not);
# and its stolen-CPU rows as one table, a row per figure (and the host's steal
# time, when the run reports it) and a column per configuration ("rescue
# off", ...), a skipped column with its reason.
# Needs bash and awk (mawk is enough). Used for docs/results/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 1 ]; then
  echo "usage: $0 <in.json>" >&2
  exit 2
fi
awk "$(cat "$root/scripts/json.awk")"'
# Remember v in list l once, in order of first appearance.
function add(l, v) {
  if ((l, v) in seen) return
  seen[l, v] = 1
  list[l, ++n[l]] = v
}
function count(x) {
  if (x >= 1000 && x == 10 ^ int(log(x) / log(10) + 0.5)) return "1e" int(log(x) / log(10) + 0.5)
  return x
}
function fig(x) { x += 0; return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x) }
{
  line = $0
  if (jstr(line, "bench") == "latency" && jstr(line, "workload") == "stolen-cpu") {
    c = "rescue " jstr(line, "rescue")
    add("stolen", c)
    stall = jnum(line, "stall_ms"); stimers = jnum(line, "timers")
    spend = jnum(line, "pending"); stick = jnum(line, "tick_us")
    if ((r = jstr(line, "skipped")) != "" || (r = jstr(line, "error")) != "") {
      sv[c] = "skip"; add("stolen_why", c ": " r)
      next
    }
    sv[c, "p50"] = fig(jnum(line, "p50_us")); sv[c, "p99"] = fig(jnum(line, "p99_us"))
    sv[c, "p99.9"] = fig(jnum(line, "p999_us")); sv[c, "max"] = fig(jnum(line, "max_us"))
    sv[c, "in"] = jnum(line, "in_stall") " of " jnum(line, "n")
    sv[c, "steal"] = jnum(line, "steal_ms") != "" ? jnum(line, "steal_ms") : "-"
    next
  }
  if (jstr(line, "bench") == "latency" && jnum(line, "p99_us") != "") {
    key = jnum(line, "pending") SUBSEP jnum(line, "tick_us") SUBSEP jstr(line, "load")
    add("late", key)
    late[key] = fig(jnum(line, "p50_us")) " | " fig(jnum(line, "p99_us")) " | " \
      fig(jnum(line, "p999_us")) " | " fig(jnum(line, "max_us"))
    nsamp[key] = jnum(line, "n")
    cost[key] = (jnum(line, "slack_us") != "" ? fig(jnum(line, "slack_us")) : "-") " | " \
      (jnum(line, "cpu_pct") != "" ? sprintf("%.0f", jnum(line, "cpu_pct")) : "-") " | " \
      (jnum(line, "csw_per_s") != "" ? sprintf("%.0f", jnum(line, "csw_per_s")) : "-")
    next
  }
  split(line, kv, "\""); subj_key = kv[2]; subj = jstr(line, subj_key)
  w = jstr(line, "workload"); x = jnum(line, "n")
  if (subj == "" || w == "" || x == "" || x == 0) next
  add("w", w); add("s" w, subj); add("n" w, x + 0)
  if ((v = jnum(line, "ns_per_op")) != "") {
    cell[w, subj, x + 0] = fig(v) (jnum(line, "ratio") != "" ? sprintf(" (%.2fx)", jnum(line, "ratio")) : "")
    # The first unit of a workload heads its table; a row in another unit is marked.
    u = jstr(line, "unit")
    if (!(w in unit)) unit[w] = u
    else if (u != unit[w]) { cell[w, subj, x + 0] = cell[w, subj, x + 0] " *"; add("why" w, subj ": * " u) }
  } else if ((r = jstr(line, "cap")) != "" || (r = jstr(line, "skipped")) != "") {
    kind = jstr(line, "cap") != "" ? "cap" : "skipped"
    cell[w, subj, x + 0] = kind
    add("why" w, subj " at " count(x) ": " r)
  }
}
END {
  for (i = 1; i <= n["w"]; i++) {
    w = list["w", i]
    printf "\n**%s** (%s)\n\n| %s |", w, unit[w] != "" ? unit[w] : "ns/op", subj_key
    for (j = 1; j <= n["n" w]; j++) printf " %s |", count(list["n" w, j])
    printf "\n|---|"
    for (j = 1; j <= n["n" w]; j++) printf "--:|"
    printf "\n"
    for (s = 1; s <= n["s" w]; s++) {
      subj = list["s" w, s]
      printf "| %s |", subj
      for (j = 1; j <= n["n" w]; j++) {
        c = cell[w, subj, list["n" w, j]]
        printf " %s |", c == "" ? "-" : c
      }
      printf "\n"
    }
    if (n["why" w] > 0) {
      printf "\n"
      for (j = 1; j <= n["why" w]; j++) printf "- %s\n", list["why" w, j]
    }
  }
  if (n["stolen"] > 0) {
    printf "\nStolen CPU: shard 0'"'"'s CPU taken for %s ms by a SCHED_FIFO busy thread, %s timers on shard 0 due meanwhile (pool callbacks), %s pending, tick %s us\n\n| lateness (us) |", stall, stimers, count(spend), stick
    for (i = 1; i <= n["stolen"]; i++) printf " %s |", list["stolen", i]
    printf "\n|---|"
    for (i = 1; i <= n["stolen"]; i++) printf "--:|"
    printf "\n"
    split("p50 p99 p99.9 max in steal", fields, " ")
    for (f = 1; f <= 6; f++) {
      printf "| %s |", fields[f] == "in" ? "ran during the stall" : \
        fields[f] == "steal" ? "host steal on the other CPUs, all runs (ms)" : fields[f]
      for (i = 1; i <= n["stolen"]; i++) {
        c = list["stolen", i]
        printf " %s |", sv[c] == "skip" ? "skipped" : sv[c, fields[f]]
      }
      printf "\n"
    }
    if (n["stolen_why"] > 0) {
      printf "\n"
      for (j = 1; j <= n["stolen_why"]; j++) printf "- %s\n", list["stolen_why", j]
    }
  }
  if (n["late"] > 0) {
    printf "\n| pending | tick (us) | load | samples | p50 | p99 | p99.9 | max | slack (us) | CPU %% | switches/s |\n"
    printf "|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n"
    for (i = 1; i <= n["late"]; i++) {
      split(list["late", i], k, SUBSEP)
      printf "| %s | %s | %s | %s | %s | %s |\n", count(k[1]), k[2], k[3], nsamp[list["late", i]], late[list["late", i]], cost[list["late", i]]
    }
  }
}
' "$1"
