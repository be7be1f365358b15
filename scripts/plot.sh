#!/usr/bin/env bash
# plot.sh - PNGs from spoke-bench --json output.
#   scripts/plot.sh <in.json> <out-dir>
# <in.json> holds JSON lines of any spoke-bench subcommand (several runs may be
# concatenated; "-" reads stdin). Written into <out-dir>:
#   <subject>s.png  result rows {"<subject>":..,"workload":..,"n":..,"ns_per_op":..}
#                   (schemes.png from `schemes`, peers.png from `peers`): one
#                   log-log panel per workload, ns/op (or the row's unit)
#                   against N, one line per subject.
#   latency.png     rows of `spoke-bench latency`: per tick, the lateness
#                   histograms (share of the samples per log-spaced bucket),
#                   one colour per pending count, dashed with the load; and a
#                   panel of p99 against pending, one line per tick and load.
# Other rows (`service`, latency's stolen-cpu rows - a table, see
# bench_tables.sh - skipped and error rows) are counted and left out.
# Needs bash, awk (mawk is enough) and gnuplot (gnuplot-nox, from deps.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps bench

if [ $# -ne 2 ]; then
  echo "usage: $0 <in.json> <out-dir>" >&2
  exit 2
fi
in=$1
out=$2
mkdir -p "$out"
if [ "$in" != "-" ] && [ ! -r "$in" ]; then
  echo "plot.sh: cannot read $in" >&2
  exit 1
fi

# awk turns the rows into one gnuplot script (data inline, as datablocks).
script=$(awk -v out="$out" "$(cat "$root/scripts/json.awk")"'
# A gnuplot single-quoted string.
function q(s) { gsub(/\047/, "\047\047", s); return "\047" s "\047" }
# 1e3 for powers of ten from 1000 up, as spoke-bench prints counts.
function count(n,   e, m) {
  m = n; e = 0
  while (m >= 10 && m % 10 == 0) { m /= 10; e++ }
  return (m == 1 && e >= 3) ? "1e" e : n
}
# A workload in words, for a panel title; an unknown one as it is.
function wl_words(w) {
  if (w == "W1") return "W1: start + stop of a random outstanding timer"
  if (w == "W2-advance") return "W2: drain the N timers by one advance(2^{20})"
  if (w == "W2-tick") return "W2: drain the N timers by 2^{20} calls of advance(1)"
  if (w == "W3") return "W3: memory (RSS) per outstanding timer"
  if (w == "dep-load") return "memory floor: one dependent load over the memory of N timers"
  if (w == "reset-own") return "reset-own: a random pending timer reset by its owner'"'"'s thread"
  if (w == "reset-foreign") return "reset-foreign: a random pending timer reset by another thread"
  return w
}
# A page title in words for the rows of one subject key (scheme, peer, ...).
function page_words(key) {
  if (key == "scheme") return "Timer engines (spoke-bench schemes): N outstanding timers, delays uniform in [1, 2^{20}) ticks, median of the runs"
  if (key == "peer") return "spoke beside other timer implementations (spoke-bench peers): N outstanding timers, median of the runs"
  return "spoke-bench: " key "s"
}
# A unit as an axis label.
function unit_words(u) {
  if (u == "" || u == "ns/op") return "ns per operation"
  if (u == "B/timer") return "bytes per timer"
  if (u ~ /^ns\/load/) return "ns per dependent load"
  return u
}
function tick_name(us) { return (us >= 1000 && us % 1000 == 0) ? (us / 1000) " ms" : us " us" }
# Index of s in list name (appending it if new): order of first appearance.
function idx(name, s,   i) {
  for (i = 1; i <= nlist[name]; i++) if (list[name, i] == s) return i
  list[name, ++nlist[name]] = s
  return nlist[name]
}
# A PNG of np panels, two a row.
function layout(np, title, file,   cols, rows) {
  cols = np > 1 ? 2 : 1
  rows = int((np + cols - 1) / cols)
  printf "set terminal pngcairo size %d,%d font \047Sans,10\047\n", 820 * cols, 520 * rows
  printf "set output %s\nset multiplot layout %d,%d title %s\n", q(file), rows, cols, q(title)
}
BEGIN {
  ncolour = split("#9400d3 #009e73 #56b4e9 #e69f00 #8b4513 #0032b2 #e41a1c #000000 " \
                  "#ff69b4 #808000 #00ced1 #708090", colour, " ")
  skipped = 0
}
{
  line = $0
  if (line !~ /^\{"/) next
  match(line, /^\{"[^"]*"/)
  key = substr(line, 3, RLENGTH - 3)
  if (key != "bench" && jnum(line, "ns_per_op") != "") {       # a result row
    k = idx("keys", key)
    w = idx("wl" k, jstr(line, "workload"))
    s = idx("subj" k, jstr(line, key))
    unit[k, w] = jstr(line, "unit")
    res[k, w, s] = res[k, w, s] jnum(line, "n") " " jnum(line, "ns_per_op") "\n"
    next
  }
  if (jstr(line, "bench") == "latency" && jstr(line, "workload") == "lateness" && jnum(line, "p99_us") != "") {
    t = idx("ticks", jnum(line, "tick_us") + 0)
    p = idx("pend", jnum(line, "pending") + 0)
    l = idx("loads", jstr(line, "load"))
    p99[t, l] = p99[t, l] jnum(line, "pending") " " jnum(line, "p99_us") "\n"
    # hist: [[lo_us,hi_us,count],...] -> an outlined step histogram, % of the
    # samples on a log axis (so the tail shows), empty buckets at a floor of 1e-4 %
    h = jraw(line, "hist"); sub(/^\[\[/, "", h); sub(/\]\].*/, "", h)
    nb = split(h, b, /\],\[/); total = jnum(line, "n") + 0; d = ""; prev = ""
    for (i = 1; i <= nb; i++) {
      split(b[i], f, ",")
      lo = f[1] + 0 > 0 ? f[1] : f[2] / 10
      share = total > 0 ? 100 * f[3] / total : 0
      if (prev != lo) d = d (prev != "" ? prev " 1e-4\n" : "") lo " 1e-4\n"
      d = d lo " " share "\n" f[2] " " share "\n"
      prev = f[2]
    }
    hist[t, p, l] = d prev " 1e-4\n"
    next
  }
  skipped++
}
END {
  print "set grid\nset key outside right top font \047,9\047 noenhanced\nset format y \047%g\047"
  for (k = 1; k <= nlist["keys"]; k++) {
    layout(nlist["wl" k], page_words(list["keys", k]), out "/" list["keys", k] "s.png")
    print "set logscale xy 10\nset format x \04710^{%L}\047\nset xlabel \047N outstanding timers\047"
    for (w = 1; w <= nlist["wl" k]; w++) {
      printf "set title %s\nset ylabel %s\n", q(wl_words(list["wl" k, w])), q(unit_words(unit[k, w]))
      cmd = "plot"
      for (s = 1; s <= nlist["subj" k]; s++) {
        if (res[k, w, s] == "") continue
        printf "$r%d_%d_%d << EOD\n%sEOD\n", k, w, s, res[k, w, s]
        cmd = cmd sprintf("%s $r%d_%d_%d using 1:2 with linespoints lw 2 lc rgb \047%s\047 pt %d title %s", \
          cmd == "plot" ? "" : ",", k, w, s, colour[(s - 1) % ncolour + 1], (s - 1) % 13 + 1, q(list["subj" k, s]))
      }
      print (cmd == "plot" ? "plot 1/0 notitle" : cmd)
    }
    print "unset multiplot\nset output"
  }
  if (nlist["ticks"] > 0) {
    layout(nlist["ticks"] + 1, "spoke-bench latency: how late the service fires timers, by tick length and pending count", out "/latency.png")
    print "set format x \04710^{%L}\047\nset logscale xy 10\nset yrange [1e-4:100]"
    print "set key inside left top font \047,8\047"
    print "set xlabel \047lateness (us)\047\nset ylabel \047% of the samples\047"
    for (t = 1; t <= nlist["ticks"]; t++) {
      printf "set title %s\n", q("tick " tick_name(list["ticks", t]))
      cmd = "plot"
      for (p = 1; p <= nlist["pend"]; p++)
        for (l = 1; l <= nlist["loads"]; l++) {
          if (hist[t, p, l] == "") continue
          printf "$h%d_%d_%d << EOD\n%sEOD\n", t, p, l, hist[t, p, l]
          cmd = cmd sprintf("%s $h%d_%d_%d using 1:2 with lines lw 2 lc rgb \047%s\047 dt %d title %s", \
            cmd == "plot" ? "" : ",", t, p, l, colour[(p - 1) % ncolour + 1], list["loads", l] == "none" ? 1 : 2, \
            q(count(list["pend", p]) " pending" (list["loads", l] == "none" ? "" : ", with load")))
        }
      print cmd
    }
    print "set key outside right top font \047,9\047\nset autoscale y"
    print "set title \047p99 lateness\047\nset xlabel \047pending timers\047\nset ylabel \047p99 (us)\047"
    cmd = "plot"
    for (t = 1; t <= nlist["ticks"]; t++)
      for (l = 1; l <= nlist["loads"]; l++) {
        if (p99[t, l] == "") continue
        printf "$p%d_%d << EOD\n%sEOD\n", t, l, p99[t, l]
        cmd = cmd sprintf("%s $p%d_%d using 1:2 with linespoints lw 2 lc rgb \047%s\047 dt %d pt %d title %s", \
          cmd == "plot" ? "" : ",", t, l, colour[(t - 1) % ncolour + 1], list["loads", l] == "none" ? 1 : 2, \
          (t - 1) % 13 + 1, q("tick " tick_name(list["ticks", t]) (list["loads", l] == "none" ? "" : ", with load")))
      }
    print cmd
    print "unset multiplot\nset output"
  }
  if (skipped) printf "plot.sh: %d rows left out (not results or latency rows)\n", skipped > "/dev/stderr"
  if (nlist["keys"] + nlist["ticks"] == 0) { print "plot.sh: nothing to plot" > "/dev/stderr"; exit 1 }
}' "$in")
printf '%s\n' "$script" | gnuplot
ls -1 "$out"/*.png
