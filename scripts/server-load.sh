#!/usr/bin/env bash
# server-load.sh - spoke-httpd under load tools, every timer backend side by side.
#
#   bash scripts/server-load.sh [--quick] [--json] [--plot out.png] [--rounds N] [--threads N]
#                               [--backends "spoke heap timerfd mutex-heap"]
#
# 127.0.0.1 only. Workloads, each run for every backend in turn (interleaved, so that
# a slow minute of the machine hits them all), --rounds times, figures averaged:
#   keepalive   wrk, 100 keep-alive connections: req/s, p50/p99 latency, server CPU
#               per request (/proc/PID/stat utime+stime before and after)
#   idle-flood  spoke-httpd-load idle: C connections (10000, or what RLIMIT_NOFILE
#               allows once the soft limit is raised to the hard one: half of it, since
#               timerfd needs two fds per connection), one request
#               each, then silent; server CPU per connection-second while they wait,
#               and when each was closed against --idle-ms (none early; late p50/p99/max)
#   reset-storm wrk, 1000 keep-alive connections as fast as they go: every request
#               resets its connection's timer
#   slowloris   slowhttptest -H: is the service available meanwhile, and does the
#               header timer close the slow connections (its CSVs are kept in the
#               build directory; client_stall_s counts the seconds it did not run)
#   slow-read   slowhttptest -X on GET /big (1 MiB): does the write timer close them
#   deadline    spoke-httpd-load sleep: /sleep around --deadline-ms, exactly one
#               answer each, 200 never before the work, 504 never before the deadline
# Prints a table per workload, a row per backend, each figure with its ratio to the
# spoke row; --json prints one JSON document instead. A full run takes about 8
# minutes, --quick about 2.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

quick=0 json=0 plot="" rounds="" threads=2 backends="spoke heap timerfd mutex-heap"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --json) json=1 ;;
    --plot) plot=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --threads) threads=$2; shift ;;
    --backends) backends=$2; shift ;;
    *) echo "usage: $0 [--quick] [--json] [--plot PNG] [--rounds N] [--threads N] [--backends LIST]" >&2
       exit 2 ;;
  esac
  shift
done
if [ "$quick" = 1 ]; then
  : "${rounds:=1}"; ka_s=3; storm_s=3; flood_idle_ms=2000; slow_s=8; sleeps=100
else
  : "${rounds:=2}"; ka_s=8; storm_s=8; flood_idle_ms=4000; slow_s=15; sleeps=200
fi

# The load tools, installed as scripts/deps.sh installs the build's packages: with
# apt-get as root, else the line to run is printed.
missing=""
for p in wrk slowhttptest libhttp-parser-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "server-load: installing missing Debian packages:$missing" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "server-load: missing Debian packages. Run as root:" >&2
    echo "  apt-get update && apt-get install -y$missing" >&2
    exit 1
  fi
fi

build="$root/build/server-load"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOKE_BUILD_TESTS=OFF -DSPOKE_BUILD_EXAMPLES=ON \
      -DSPOKE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j 2 --target spoke-httpd spoke-httpd-load >/dev/null
httpd="$build/examples/spoke-httpd" load="$build/examples/spoke-httpd-load"

# Idle flood size: ours and the server's limits are both raised to the hard limit,
# and the timerfd backend spends two fds per connection (socket and timerfd): every
# backend gets the same count, the most that timerfd can hold.
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
flood=10000
[ $(((hard - 200) / 2)) -lt $flood ] && flood=$(((hard - 200) / 2))
ulimit -Sn "$hard"

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

clk=$(getconf CLK_TCK)
cpu_ticks() { # utime + stime of PID, in clock ticks
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# start_server BACKEND ARGS...: sets server_pid and port.
start_server() {
  local b=$1; shift
  "$httpd" --port 0 --threads "$threads" --timers "$b" "$@" >"$tmp/server.out" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    if head -1 "$tmp/server.out" 2>/dev/null | grep -q '^listening on'; then break; fi
    sleep 0.05
  done
  port=$(head -1 "$tmp/server.out" | sed 's/.*://')
  [ -n "$port" ] || { echo "server-load: spoke-httpd did not start:" >&2; cat "$tmp/server.out" >&2; exit 1; }
}

# stop_server: SIGTERM, wait, and leave its stats line in $stats.
stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || { echo "server-load: spoke-httpd exited with $?" >&2; cat "$tmp/server.out" >&2; exit 1; }
  server_pid=""
  stats=$(grep '^stats ' "$tmp/server.out")
}
stat() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$stats"; }

# Results: lines "workload backend metric value" in $tmp/results.
record() { echo "$1 $2 $3 $4" >>"$tmp/results"; }

wrk_run() { # wrk_run BACKEND WORKLOAD CONNS SECONDS
  local b=$1 w=$2 c=$3 s=$4 t0 t1 out
  start_server "$b"
  t0=$(cpu_ticks "$server_pid")
  out=$(wrk -t 2 -c "$c" -d "${s}s" --latency "http://127.0.0.1:$port/" 2>&1)
  t1=$(cpu_ticks "$server_pid")
  stop_server
  local reqs rps p50 p99
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  # wrk prints 50%/99% latencies with a unit (us, ms, s): convert to ms.
  conv='function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
        if (v ~ /s$/) return v * 1000; return v }'
  p50=$(awk "$conv"' $1 == "50%" {print ms($2)}' <<<"$out")
  p99=$(awk "$conv"' $1 == "99%" {print ms($2)}' <<<"$out")
  record "$w" "$b" req_per_s "$rps"
  record "$w" "$b" p50_ms "$p50"
  record "$w" "$b" p99_ms "$p99"
  record "$w" "$b" cpu_us_per_req "$(awk -v d=$((t1 - t0)) -v r="$reqs" -v k="$clk" \
    'BEGIN { printf "%.3f", r ? d / k * 1e6 / r : 0 }')"
  record "$w" "$b" timer_resets "$(stat timers_reset)"
}

flood_run() {
  local b=$1 t0 t1 out tick_us=1000 w0 w1
  start_server "$b" --idle-ms "$flood_idle_ms"
  t0=$(cpu_ticks "$server_pid"); w0=$(date +%s.%N)
  out=$("$load" idle --port "$port" --conns "$flood" --idle-ms "$flood_idle_ms" \
        --tick-us "$tick_us" --timeout-s 120) || { echo "server-load: idle flood check failed ($b): $out" >&2; exit 1; }
  t1=$(cpu_ticks "$server_pid"); w1=$(date +%s.%N)
  stop_server
  local conns field
  conns=$(sed -n 's/.* conns=\([0-9]*\).*/\1/p' <<<"$out")
  record idle-flood "$b" conns "$conns"
  for field in early late_p50_ms late_p99_ms late_max_ms; do
    record idle-flood "$b" "$field" "$(sed -n "s/.* $field=\([^ ]*\).*/\1/p" <<<"$out")"
  done
  # CPU while the connections wait, per connection and second of waiting.
  record idle-flood "$b" cpu_ns_per_conn_s "$(awk -v d=$((t1 - t0)) -v k="$clk" -v c="$conns" \
    -v w0="$w0" -v w1="$w1" 'BEGIN { printf "%.1f", d / k * 1e9 / (c * (w1 - w0)) }')"
  record idle-flood "$b" closed_by_idle "$(stat close_idle)"
}

slow_run() { # slow_run BACKEND MODE(H|X)
  local b=$1 m=$2 url w args avail
  start_server "$b" --header-ms 2000 --write-ms 2000
  if [ "$m" = H ]; then
    w=slowloris url="http://127.0.0.1:$port/"
    args=(-H -c 500 -i 1 -r 200 -x 16)
  else
    w=slow-read url="http://127.0.0.1:$port/big"
    args=(-X -c 200 -r 200 -w 10 -y 20 -n 2 -z 32 -k 3)
  fi
  (cd "$tmp" && timeout $((slow_s + 30)) slowhttptest "${args[@]}" -l "$slow_s" -p 2 \
     -u "$url" -g -o "$tmp/slow" >/dev/null 2>&1) || true
  stop_server
  # CSV: Seconds,Closed,Pending,Connected,Service Available, a row a second. The last
  # column is not an HTTP code: slowhttptest writes !is_dosed * num_connections, so it
  # is the connection count (-c, or fewer if sockets ran out) while its probe gets an
  # answer within -p seconds, and 0 once a probe went unanswered.
  avail=$(awk -F, 'NR > 1 { n++; if ($5 + 0 > 0) ok++ }
                   END { printf "%.0f", n ? 100 * ok / n : 0 }' "$tmp/slow.csv")
  record "$w" "$b" available_pct "$avail"
  # How long the test ran: it ends early once the server has closed every slow connection.
  record "$w" "$b" test_s "$(awk -F, 'NR > 1 { s = $1 } END { print s + 0 }' "$tmp/slow.csv")"
  # Seconds with no CSV row: slowhttptest's own loop did not run for them (a starved
  # client). Its probe's -p timeout is counted on that loop's clock, so a stall of -p
  # seconds marks the service unavailable however fast the server answers: read a
  # available_pct under 100 next to a non-zero stall as the client's, not the server's.
  record "$w" "$b" client_stall_s "$(awk -F, 'NR > 2 && $1 - p > 1 { g += $1 - p - 1 }
                                             NR > 1 { p = $1 } END { print g + 0 }' "$tmp/slow.csv")"
  cp "$tmp/slow.csv" "$build/slowhttptest-$w-$b-round$r.csv" # kept for a look after the run
  record "$w" "$b" connections "$(stat connections)"
  record "$w" "$b" closed_by_header "$(stat close_header)"
  record "$w" "$b" closed_by_write "$(stat close_write)"
  record "$w" "$b" closed_by_idle "$(stat close_idle)"
}

deadline_run() {
  local b=$1 out
  start_server "$b" --deadline-ms 1000 --workers 64
  out=$("$load" sleep --port "$port" --deadline-ms 1000 --sleeps "$sleeps" --timeout-s 120) || \
    { echo "server-load: /sleep check failed ($b): $out" >&2; exit 1; }
  stop_server
  record deadline "$b" requests "$(sed -n 's/.* requests=\([0-9]*\).*/\1/p' <<<"$out")"
  record deadline "$b" answered_once "$(sed -n 's/.* answered_once=\([0-9]*\).*/\1/p' <<<"$out")"
  record deadline "$b" ok200 "$(sed -n 's/.* ok200=\([0-9]*\).*/\1/p' <<<"$out")"
  record deadline "$b" ok504 "$(sed -n 's/.* ok504=\([0-9]*\).*/\1/p' <<<"$out")"
  record deadline "$b" violations "$(sed -n 's/.* failures=\([0-9]*\).*/\1/p' <<<"$out")"
  record deadline "$b" server_504 "$(stat resp_504)"
}

log() { [ "$json" = 1 ] || echo "$@" >&2; }
log "server-load: backends: $backends; $threads loop threads; $rounds round(s); idle flood $flood connections (RLIMIT_NOFILE hard $hard, timerfd uses 2 per connection)"
for r in $(seq "$rounds"); do
  for b in $backends; do log "  round $r keepalive $b";   wrk_run "$b" keepalive 100 "$ka_s"; done
  for b in $backends; do log "  round $r idle-flood $b";  flood_run "$b"; done
  for b in $backends; do log "  round $r reset-storm $b"; wrk_run "$b" reset-storm 1000 "$storm_s"; done
  for b in $backends; do log "  round $r slowloris $b";   slow_run "$b" H; done
  for b in $backends; do log "  round $r slow-read $b";   slow_run "$b" X; done
  for b in $backends; do log "  round $r deadline $b";    deadline_run "$b"; done
done

cp "$tmp/results" "$build/results.txt" # raw figures, kept for a look after the run

# Average over rounds, then print: a table per workload, or JSON.
awk -v json="$json" -v order="$backends" -v cap="$flood" '
  { k = $1 SUBSEP $2 SUBSEP $3; sum[k] += $4; n[k]++
    if (!($1 in wseen)) { wseen[$1] = 1; wl[++nw] = $1 }
    if (!(($1, $3) in mseen)) { mseen[$1, $3] = 1; ml[$1] = ml[$1] " " $3 } }
  END {
    nb = split(order, bs, " ")
    if (json) printf "{\"idle_flood_cap\": %d, \"workloads\": {", cap
    for (i = 1; i <= nw; i++) {
      w = wl[i]; nm = split(substr(ml[w], 2), ms, " ")
      if (json) {
        printf "%s\"%s\": {", (i > 1 ? ", " : ""), w
        for (j = 1; j <= nb; j++) {
          printf "%s\"%s\": {", (j > 1 ? ", " : ""), bs[j]
          for (m = 1; m <= nm; m++) { k = w SUBSEP bs[j] SUBSEP ms[m]
            printf "%s\"%s\": %g", (m > 1 ? ", " : ""), ms[m], n[k] ? sum[k] / n[k] : 0 }
          printf "}"
        }
        printf "}"
        continue
      }
      printf "\n%s%s\n", w, w == "idle-flood" ? " (" cap " connections)" : ""
      printf "%-11s", "backend"; for (m = 1; m <= nm; m++) printf " %22s", ms[m]; printf "\n"
      for (j = 1; j <= nb; j++) {
        printf "%-11s", bs[j]
        for (m = 1; m <= nm; m++) {
          k = w SUBSEP bs[j] SUBSEP ms[m]; v = n[k] ? sum[k] / n[k] : 0
          k0 = w SUBSEP "spoke" SUBSEP ms[m]; v0 = n[k0] ? sum[k0] / n[k0] : 0
          cell = sprintf("%.4g", v)
          if (bs[j] != "spoke" && v0 != 0) cell = cell sprintf(" (x%.2f)", v / v0)
          printf " %22s", cell
        }
        printf "\n"
      }
    }
    if (json) printf "}}\n"
  }' "$tmp/results"

# --plot: server CPU per request (keep-alive, reset storm) and per idle connection-second.
if [ -n "$plot" ]; then
  for b in $backends; do
    awk -v b="$b" '$2 == b && (($1 == "keepalive" || $1 == "reset-storm") && $3 == "cpu_us_per_req" ||
                   $1 == "idle-flood" && $3 == "cpu_ns_per_conn_s") { s[$1] += $4; n[$1]++ }
      END { printf "%s %g %g %g\n", b, s["keepalive"] / n["keepalive"],
            s["reset-storm"] / n["reset-storm"], s["idle-flood"] / n["idle-flood"] / 1000 }' \
      "$tmp/results"
  done >"$tmp/plot.dat"
  gnuplot <<GP
set terminal pngcairo size 1000,420 font ",10"
set output "$plot"
set multiplot layout 1,2 title "spoke-httpd on 127.0.0.1, $threads loop threads: server CPU by timer backend (lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set key top left
set title "wrk load: 100 keep-alive conns, and 1000 (reset storm)"
set ylabel "server CPU per request (us)"
set xlabel "timer backend"
set yrange [0:*]
plot "$tmp/plot.dat" using 2:xtic(1) title "keep-alive, 100 conns", "" using 3 title "reset storm, 1000 conns"
set title "idle flood: $flood connections silent after one request"
set ylabel "server CPU per connection-second (us)"
plot "$tmp/plot.dat" using 4:xtic(1) title "idle connections" lc rgb "#4a8"
unset multiplot
GP
  log "server-load: plot written to $plot"
fi
