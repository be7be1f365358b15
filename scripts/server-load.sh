#!/usr/bin/env bash
# server-load.sh - spoke-httpd under load tools, every timer backend side by side, and
# nginx beside them where it is installed.
#
#   bash scripts/server-load.sh [--quick] [--json] [--plot out.png] [--rounds N] [--threads N]
#                               [--backends "spoke heap timerfd mutex-heap nginx"]
#   bash scripts/server-load.sh --self-test     the verdicts below on made-up runs (a ctest)
#
# 127.0.0.1 only. Workloads, each run for every server in turn (interleaved, so that a
# slow minute of the machine hits them all), --rounds times, figures averaged:
#   keepalive   wrk, 100 keep-alive connections: req/s, p50/p99 latency, server CPU
#               per request (/proc/PID/stat utime+stime of its processes, before and after)
#   idle-flood  spoke-httpd-load idle: C connections (10000, or what RLIMIT_NOFILE
#               allows: half of it, since timerfd needs two fds per connection), one
#               request each, then silent. How late each was closed after its idle
#               timeout, from packet timestamps (tcpdump on lo: the server's FIN minus
#               its response, minus the timeout; the server arms the timer after that
#               response, so this is its own lateness, without the client's queueing);
#               early = closed before the timeout. spoke-httpd also reports lateness on
#               its own clock (srv_*). Server CPU per connection-second.
#   idle-memory spoke-httpd-load hold: the servers' RssAnon growth per idle keep-alive
#               connection (C connections, one request each, held open)
#   reset-storm wrk, 1000 keep-alive connections as fast as they go: every request
#               resets its connection's timer
#   slowloris   slowhttptest -H: is the service available meanwhile, and does the
#               header timer close the slow connections (client_stall_s counts the
#               seconds slowhttptest's own loop did not run)
#   slow-read   slowhttptest -X on GET /big (1 MiB): does the write timer close them
#   deadline    spoke-httpd-load sleep: /sleep around --deadline-ms, exactly one
#               answer each, 200 never before the work, 504 never before the deadline
#               (spoke-httpd only: nginx has no /sleep)
# nginx runs with a generated configuration: the same idle, header and write timeouts,
# as many workers as loop threads, a tiny static answer for / and a 1 MiB file for /big.
#
# Every run is checked against what it claims (verdict_* below): wrk made its requests
# without socket errors or non-2xx answers; every connection of a flood was opened,
# answered and closed, none early by a spoke-httpd backend, tcpdump dropped no packet;
# slowhttptest opened as many connections as asked; every /sleep got one answer. A run
# that fails is flagged in its table's `ok` column, said on stderr, and the script exits
# 1 after printing. Each table gets a ratio to the spoke row, and the 1-minute load
# average at the start of each run (load1). A full run takes about 12 minutes, --quick 4.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# --- verdicts: each prints nothing and returns 0, or prints why and returns 1 --------

# verdict_wrk OUTPUT: wrk made requests, without socket errors or non-2xx answers.
verdict_wrk() {
  local reqs
  reqs=$(awk '/requests in/ {print $1}' <<<"$1")
  if [ -z "$reqs" ] || [ "$reqs" = 0 ]; then echo "wrk made no requests"; return 1; fi
  if grep -q "Socket errors" <<<"$1"; then grep "Socket errors" <<<"$1"; return 1; fi
  if grep -q "Non-2xx" <<<"$1"; then grep "Non-2xx" <<<"$1"; return 1; fi
  return 0
}

# verdict_slow CSV ASKED: slowhttptest opened ASKED connections. Its CSV has a row a
# second: Seconds,Closed,Pending,Connected,Service Available; Closed + Pending +
# Connected is every connection it has made so far.
verdict_slow() {
  local made
  made=$(awk -F, 'NR > 1 { n = $2 + $3 + $4; if (n > m) m = n } END { print m + 0 }' "$1")
  if [ "$made" -lt "$2" ]; then
    echo "slowhttptest made $made connections of the $2 asked"
    return 1
  fi
}

# verdict_flood CONNS ASKED CLOSED EARLY_CLIENT EARLY_PKT MATCHED DROPPED STRICT:
# every connection opened and closed, each matched in the capture, no packet dropped;
# STRICT (spoke-httpd): none early.
verdict_flood() {
  local conns=$1 asked=$2 closed=$3 early_c=$4 early_p=$5 matched=$6 dropped=$7 strict=$8
  if [ "$conns" != "$asked" ]; then echo "opened $conns of $asked connections"; return 1; fi
  if [ "$closed" != "$conns" ]; then echo "$closed of $conns connections closed"; return 1; fi
  if [ "$matched" != "$conns" ]; then
    echo "the capture has the response and the close of $matched of $conns connections"
    return 1
  fi
  if [ "$dropped" != 0 ]; then echo "tcpdump dropped $dropped packets"; return 1; fi
  if [ "$strict" = 1 ] && { [ "$early_c" != 0 ] || [ "$early_p" != 0 ]; }; then
    echo "closed early: $early_c (client's clock), $early_p (packets)"
    return 1
  fi
}

# verdict_count WHAT GOT WANT: a count that must be exact.
verdict_count() {
  if [ "$2" != "$3" ]; then echo "$1: $2, want $3"; return 1; fi
}

# flood_lateness IDLE_MS < tcpdump -tt text of the server's packets with PSH or FIN: per
# client port, FIN time - last response time - IDLE_MS, then one line
# "matched=N early=N late_p50_ms=... late_p99_ms=... late_max_ms=...".
flood_lateness() {
  awk -v idle="$1" '
    { t = $1; dst = $5; sub(/:$/, "", dst); fl = $7
      if (fl ~ /F/) { if (dst in resp && !(dst in fin)) fin[dst] = t }
      else if (fl ~ /P/) resp[dst] = t }
    END {
      for (k in fin) { v = (fin[k] - resp[k]) * 1000 - idle; n++; late[n] = v; if (v < 0) early++ }
      if (n) {
        # awk has no sort: a shell sort, fast enough for tens of thousands
        for (gap = int(n / 2); gap > 0; gap = int(gap / 2))
          for (i = gap + 1; i <= n; i++) { x = late[i]; j = i
            while (j > gap && late[j - gap] > x) { late[j] = late[j - gap]; j -= gap }
            late[j] = x }
      }
      p50 = n ? late[int((n - 1) * 0.50) + 1] : 0; p99 = n ? late[int((n - 1) * 0.99) + 1] : 0
      printf "matched=%d early=%d late_p50_ms=%.3f late_p99_ms=%.3f late_max_ms=%.3f\n",
             n, early, p50, p99, n ? late[n] : 0 }'
}

self_test() {
  local t fails=0 out
  t=$(mktemp -d)
  expect() { # expect 0|1 DESCRIPTION COMMAND...: the verdict must be that
    local want=$1 what=$2 got=0; shift 2
    "$@" >/dev/null || got=1
    if [ "$got" != "$want" ]; then echo "FAIL: $what: verdict $got, want $want"; fails=$((fails + 1)); fi
  }
  local wrk_ok="Running 3s test @ http://127.0.0.1:1/
  2 threads and 100 connections
  301234 requests in 3.00s, 30.1MB read
Requests/sec: 100411.33"
  expect 0 "a clean wrk run" verdict_wrk "$wrk_ok"
  expect 1 "wrk with socket errors" verdict_wrk "$wrk_ok
  Socket errors: connect 0, read 12, write 0, timeout 0"
  expect 1 "wrk with non-2xx answers" verdict_wrk "$wrk_ok
  Non-2xx or 3xx responses: 17"
  expect 1 "wrk that made no request" verdict_wrk "  0 requests in 3.00s, 0B read"
  printf 'Seconds,Closed,Pending,Connected,Service Available\n0,0,0,0,500\n1,0,20,53,500\n2,0,0,73,500\n' >"$t/short.csv"
  printf 'Seconds,Closed,Pending,Connected,Service Available\n0,0,0,0,500\n1,0,200,300,500\n2,100,0,400,500\n' >"$t/full.csv"
  expect 1 "slowhttptest made 73 of 500 connections" verdict_slow "$t/short.csv" 500
  expect 0 "slowhttptest made all 500" verdict_slow "$t/full.csv" 500
  expect 0 "a clean flood" verdict_flood 100 100 100 0 0 100 0 1
  expect 1 "a flood that opened fewer" verdict_flood 73 100 73 0 0 73 0 1
  expect 1 "a flood with connections left open" verdict_flood 100 100 99 0 0 99 0 1
  expect 1 "a flood with early closes (spoke-httpd)" verdict_flood 100 100 100 0 3 100 0 1
  expect 0 "a flood with early closes (nginx: measured, not failed)" verdict_flood 100 100 100 2 3 100 0 0
  expect 1 "a flood whose capture dropped packets" verdict_flood 100 100 100 0 0 100 5 1
  expect 1 "a flood whose capture missed a close" verdict_flood 100 100 100 0 0 98 0 1
  expect 1 "a deadline run answering fewer once" verdict_count answered_once 199 200
  # The lateness of three connections from made-up tcpdump lines (idle 2000 ms).
  out=$(flood_lateness 2000 <<'EOF'
100.000100 IP 127.0.0.1.8080 > 127.0.0.1.50001: Flags [P.], seq 1:90, ack 1, length 89
100.000200 IP 127.0.0.1.8080 > 127.0.0.1.50002: Flags [P.], seq 1:90, ack 1, length 89
100.000300 IP 127.0.0.1.8080 > 127.0.0.1.50003: Flags [P.], seq 1:90, ack 1, length 89
102.000600 IP 127.0.0.1.8080 > 127.0.0.1.50001: Flags [F.], seq 90, ack 1, length 0
101.990200 IP 127.0.0.1.8080 > 127.0.0.1.50002: Flags [F.], seq 90, ack 1, length 0
102.003300 IP 127.0.0.1.8080 > 127.0.0.1.50003: Flags [F.], seq 90, ack 1, length 0
EOF
)
  if [ "$out" != "matched=3 early=1 late_p50_ms=0.500 late_p99_ms=0.500 late_max_ms=3.000" ]; then
    echo "FAIL: flood_lateness: $out"; fails=$((fails + 1))
  fi
  rm -rf "$t"
  if [ "$fails" != 0 ]; then echo "server-load self-test: FAIL ($fails)"; return 1; fi
  echo "server-load self-test: PASS"
}

quick=0 json=0 plot="" rounds="" threads=2 backends=""
while [ $# -gt 0 ]; do
  case "$1" in
    --self-test) self_test; exit $? ;;
    --quick) quick=1 ;;
    --json) json=1 ;;
    --plot) plot=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --threads) threads=$2; shift ;;
    --backends) backends=$2; shift ;;
    *) echo "usage: $0 [--quick] [--json] [--plot PNG] [--rounds N] [--threads N] [--backends LIST] | --self-test" >&2
       exit 2 ;;
  esac
  shift
done
if [ "$quick" = 1 ]; then
  : "${rounds:=1}"; ka_s=3; storm_s=3; flood_idle_ms=2000; slow_s=8; sleeps=100; hold=5000
else
  : "${rounds:=2}"; ka_s=8; storm_s=8; flood_idle_ms=4000; slow_s=15; sleeps=200; hold=10000
fi

# The load tools (scripts/deps.sh, set "load"): installed with apt-get as root, else
# the line to run is printed.
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
spoke_install_deps lib load
if [ -z "$backends" ]; then
  backends="spoke heap timerfd mutex-heap"
  command -v nginx >/dev/null && backends="$backends nginx"
fi

build="$root/build/server-load"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOKE_BUILD_TESTS=OFF -DSPOKE_BUILD_EXAMPLES=ON \
      -DSPOKE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j 2 --target spoke-httpd spoke-httpd-load >/dev/null
httpd="$build/examples/spoke-httpd" load="$build/examples/spoke-httpd-load"

# Idle flood size: ours and the servers' limits are both raised to the hard limit,
# and the timerfd backend spends two fds per connection (socket and timerfd): every
# server gets the same count, the most that timerfd can hold.
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
flood=10000
[ $(((hard - 200) / 2)) -lt $flood ] && flood=$(((hard - 200) / 2))
[ "$hold" -gt "$flood" ] && hold=$flood
ulimit -Sn "$hard"

tmp=$(mktemp -d)
chmod 755 "$tmp" # nginx workers (not root) read $tmp/nginx/www
server_pid="" tcpdump_pid="" flagged=0
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  if [ -n "$tcpdump_pid" ]; then kill "$tcpdump_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

clk=$(getconf CLK_TCK)
# utime + stime of the server's processes (nginx: master and workers), in clock ticks
cpu_ticks() {
  local p sum=0
  for p in $(server_pids); do
    sum=$((sum + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
  done
  echo "$sum"
}
server_pids() {
  if [ "$kind" = nginx ]; then echo "$server_pid" $(pgrep -P "$server_pid"); else echo "$server_pid"; fi
}
load1() { cut -d' ' -f1 /proc/loadavg; }

# nginx_conf PORT IDLE_MS HEADER_MS WRITE_MS: the configuration of the nginx column.
nginx_conf() {
  mkdir -p "$tmp/nginx/www"
  [ -f "$tmp/nginx/www/big" ] || head -c 1048576 /dev/zero | tr '\0' x >"$tmp/nginx/www/big"
  cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes $threads;
worker_rlimit_nofile $hard;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log error;
events { worker_connections $hard; }
http {
  access_log off;
  default_type text/plain;
  keepalive_timeout ${2}ms;
  keepalive_requests 1000000000;
  client_header_timeout ${3}ms;
  client_body_timeout ${3}ms;
  send_timeout ${4}ms;
  client_body_temp_path $tmp/nginx/body;
  server {
    listen 127.0.0.1:$1 reuseport;
    location = / { return 200 "hello from nginx\n"; }
    location = /big { root $tmp/nginx/www; }
  }
}
EOF
}

# start_server KIND [--idle-ms MS] [--header-ms MS] [--write-ms MS] [spoke-httpd options]:
# sets server_pid, port and kind.
start_server() {
  kind=$1; shift
  if [ "$kind" != nginx ]; then
    "$httpd" --port 0 --threads "$threads" --timers "$kind" "$@" >"$tmp/server.out" 2>&1 &
    server_pid=$!
    # Up to a minute: on two shared cores at load 20 a start has taken over 10 s.
    for _ in $(seq 1200); do
      if head -1 "$tmp/server.out" 2>/dev/null | grep -q '^listening on'; then break; fi
      sleep 0.05
    done
    port=$(head -1 "$tmp/server.out" | sed 's/.*://')
    [ -n "$port" ] || { echo "server-load: spoke-httpd did not start:" >&2; cat "$tmp/server.out" >&2; exit 1; }
    return
  fi
  local idle=5000 header=10000 write=10000
  while [ $# -gt 0 ]; do
    case "$1" in
      --idle-ms) idle=$2 ;; --header-ms) header=$2 ;; --write-ms) write=$2 ;;
    esac
    shift 2
  done
  for _ in $(seq 20); do
    port=$((20000 + RANDOM % 20000))
    nginx_conf "$port" "$idle" "$header" "$write"
    : >"$tmp/nginx/error.log"
    nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx/" >"$tmp/server.out" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return; fi
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  done
  echo "server-load: nginx did not start:" >&2; cat "$tmp/nginx/error.log" "$tmp/server.out" >&2; exit 1
}

# stop_server: SIGTERM, wait; spoke-httpd's stats line is left in $stats.
stop_server() {
  kill -TERM "$server_pid"
  if ! wait "$server_pid"; then
    echo "server-load: $kind exited with $?" >&2; cat "$tmp/server.out" >&2; exit 1
  fi
  server_pid=""
  stats=""
  [ "$kind" != nginx ] && stats=$(grep '^stats ' "$tmp/server.out")
  return 0
}
stat() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$stats"; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# Results: lines "workload server metric value" in $tmp/results.
record() { echo "$1 $2 $3 $4" >>"$tmp/results"; }
# judge WORKLOAD SERVER VERDICT-COMMAND...: the ok column, and the run flagged if not.
judge() {
  local w=$1 b=$2 why; shift 2
  if why=$("$@"); then record "$w" "$b" ok 1; return; fi
  record "$w" "$b" ok 0
  flagged=1
  echo "server-load: FLAGGED $w $b round $r: $why" >&2
}

wrk_run() { # wrk_run SERVER WORKLOAD CONNS SECONDS
  local b=$1 w=$2 c=$3 s=$4 t0 t1 out
  record "$w" "$b" load1 "$(load1)"
  start_server "$b"
  t0=$(cpu_ticks)
  # --timeout 10s: a request unanswered for that long is a socket error (verdict_wrk);
  # wrk's 2 s default flags a loaded machine's stalls, not the server.
  out=$(wrk -t 2 -c "$c" -d "${s}s" --timeout 10s --latency "http://127.0.0.1:$port/" 2>&1) || true
  t1=$(cpu_ticks)
  stop_server
  local reqs rps p50 p99 conv
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  # wrk prints 50%/99% latencies with a unit (us, ms, s): convert to ms.
  conv='function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
        if (v ~ /s$/) return v * 1000; return v }'
  p50=$(awk "$conv"' $1 == "50%" {print ms($2)}' <<<"$out")
  p99=$(awk "$conv"' $1 == "99%" {print ms($2)}' <<<"$out")
  record "$w" "$b" req_per_s "${rps:-0}"
  record "$w" "$b" p50_ms "${p50:-0}"
  record "$w" "$b" p99_ms "${p99:-0}"
  record "$w" "$b" cpu_us_per_req "$(awk -v d=$((t1 - t0)) -v r="${reqs:-0}" -v k="$clk" \
    'BEGIN { printf "%.3f", r ? d / k * 1e6 / r : 0 }')"
  judge "$w" "$b" verdict_wrk "$out"
}

# capture_settle CONNS: packets may still wait in the capture ring for tcpdump (which
# writes each one it takes, -U); stopped now, it would lose them without counting them as
# dropped. Wait until the capture holds the response and the FIN of each of CONNS
# connections, or has not grown for 5 s.
capture_settle() {
  local want=$((2 * ${1:-0})) got prev=-1 still=0
  while :; do
    got=$(tcpdump -r "$tmp/flood.pcap" -nn 2>/dev/null | wc -l)
    [ "$got" -ge "$want" ] && return
    if [ "$got" = "$prev" ]; then
      still=$((still + 1))
      [ "$still" -ge 10 ] && return
    else
      still=0
    fi
    prev=$got
    sleep 0.5
  done
}

flood_run() {
  local b=$1 t0 t1 out w0 w1 late dropped
  record idle-flood "$b" load1 "$(load1)"
  start_server "$b" --idle-ms "$flood_idle_ms"
  # The server's responses and FINs, stamped by the kernel as they leave. Immediate
  # mode: a buffered capture loses the packets of its last block when it is stopped.
  tcpdump --immediate-mode -U -i lo -nn -B 16384 -s 96 -w "$tmp/flood.pcap" \
    "tcp and src host 127.0.0.1 and src port $port and (tcp[tcpflags] & (tcp-fin|tcp-push) != 0)" \
    2>"$tmp/tcpdump.err" &
  tcpdump_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$tmp/tcpdump.err" && break; sleep 0.05; done
  t0=$(cpu_ticks); w0=$(date +%s.%N)
  out=$("$load" idle --port "$port" --conns "$flood" --idle-ms "$flood_idle_ms" \
        --tick-us 1000 --timeout-s 120) || true
  t1=$(cpu_ticks); w1=$(date +%s.%N)
  stop_server
  capture_settle "$(field conns "$out")"
  kill -INT "$tcpdump_pid"; wait "$tcpdump_pid" || true; tcpdump_pid=""
  dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$tmp/tcpdump.err")
  late=$(tcpdump -r "$tmp/flood.pcap" -nn -tt 2>/dev/null | flood_lateness "$flood_idle_ms")
  local conns field
  conns=$(field conns "$out")
  record idle-flood "$b" conns "${conns:-0}"
  record idle-flood "$b" early "$(field early "$late")"
  for field in late_p50_ms late_p99_ms late_max_ms; do
    record idle-flood "$b" "$field" "$(field "$field" "$late")"
  done
  if [ "$b" != nginx ]; then
    record idle-flood "$b" srv_late_p50_ms "$(awk -v v="$(stat idle_close_late_p50_us)" 'BEGIN { print v / 1000 }')"
    record idle-flood "$b" srv_late_p99_ms "$(awk -v v="$(stat idle_close_late_p99_us)" 'BEGIN { print v / 1000 }')"
  fi
  # CPU from the first connect to the last close, per connection and second.
  record idle-flood "$b" cpu_ns_per_conn_s "$(awk -v d=$((t1 - t0)) -v k="$clk" -v c="${conns:-1}" \
    -v w0="$w0" -v w1="$w1" 'BEGIN { printf "%.1f", d / k * 1e9 / (c * (w1 - w0)) }')"
  cp "$tmp/flood.pcap" "$build/idle-flood-$b.pcap" # the last one, kept for a look after the run
  judge idle-flood "$b" verdict_flood "${conns:-0}" "$flood" "$(field closed "$out")" \
    "$(field early "$out")" "$(field early "$late")" "$(field matched "$late")" \
    "${dropped:-unknown}" "$([ "$b" = nginx ] && echo 0 || echo 1)"
}

memory_run() {
  local b=$1 out
  record idle-memory "$b" load1 "$(load1)"
  start_server "$b" --idle-ms 600000
  out=$("$load" hold --port "$port" --conns "$hold" --pids "$(server_pids)") || true
  stop_server
  record idle-memory "$b" conns "$(field conns "$out")"
  record idle-memory "$b" bytes_per_conn "$(field bytes_per_conn "$out")"
  judge idle-memory "$b" verdict_count "connections held" "$(field conns "$out")/$(field failures "$out")" "$hold/0"
}

slow_run() { # slow_run SERVER MODE(H|X)
  local b=$1 m=$2 url w args avail asked
  if [ "$m" = H ]; then
    w=slowloris asked=500
  else
    w=slow-read asked=200
  fi
  record "$w" "$b" load1 "$(load1)"
  start_server "$b" --header-ms 2000 --write-ms 2000
  if [ "$m" = H ]; then
    url="http://127.0.0.1:$port/"
    args=(-H -c "$asked" -i 1 -r 200 -x 16)
  else
    url="http://127.0.0.1:$port/big"
    args=(-X -c "$asked" -r 200 -w 10 -y 20 -n 2 -z 32 -k 3)
  fi
  rm -f "$tmp/slow.csv"
  (cd "$tmp" && timeout $((slow_s + 30)) slowhttptest "${args[@]}" -l "$slow_s" -p 2 \
     -u "$url" -g -o "$tmp/slow" >/dev/null 2>&1) || true
  stop_server
  [ -f "$tmp/slow.csv" ] || printf 'Seconds,Closed,Pending,Connected,Service Available\n' >"$tmp/slow.csv"
  # The last column is not an HTTP code: slowhttptest writes !is_dosed * num_connections,
  # so it is non-zero while its probe gets an answer within -p seconds, 0 once one did not.
  avail=$(awk -F, 'NR > 1 { n++; if ($5 + 0 > 0) ok++ }
                   END { printf "%.0f", n ? 100 * ok / n : 0 }' "$tmp/slow.csv")
  record "$w" "$b" asked "$asked"
  record "$w" "$b" made "$(awk -F, 'NR > 1 { n = $2 + $3 + $4; if (n > m) m = n } END { print m + 0 }' "$tmp/slow.csv")"
  record "$w" "$b" available_pct "$avail"
  # How long the test ran: it ends early once the server has closed every slow connection.
  record "$w" "$b" test_s "$(awk -F, 'NR > 1 { s = $1 } END { print s + 0 }' "$tmp/slow.csv")"
  # Seconds with no CSV row: slowhttptest's own loop did not run for them (a starved
  # client); its probe's -p timeout runs on that loop's clock, so read an
  # available_pct under 100 beside a non-zero stall as the client's, not the server's.
  record "$w" "$b" client_stall_s "$(awk -F, 'NR > 2 && $1 - p > 1 { g += $1 - p - 1 }
                                             NR > 1 { p = $1 } END { print g + 0 }' "$tmp/slow.csv")"
  cp "$tmp/slow.csv" "$build/slowhttptest-$w-$b-round$r.csv" # kept for a look after the run
  if [ "$b" != nginx ]; then
    if [ "$m" = H ]; then
      record "$w" "$b" closed_by_timer "$(stat close_header)"
    else
      record "$w" "$b" closed_by_timer "$(stat close_write)"
    fi
  fi
  judge "$w" "$b" verdict_slow "$tmp/slow.csv" "$asked"
}

deadline_run() {
  local b=$1 out
  record deadline "$b" load1 "$(load1)"
  start_server "$b" --deadline-ms 1000 --workers 64
  out=$("$load" sleep --port "$port" --deadline-ms 1000 --sleeps "$sleeps" --timeout-s 120) || true
  stop_server
  record deadline "$b" requests "$(field requests "$out")"
  record deadline "$b" answered_once "$(field answered_once "$out")"
  record deadline "$b" ok200 "$(field ok200 "$out")"
  record deadline "$b" ok504 "$(field ok504 "$out")"
  record deadline "$b" violations "$(field failures "$out")"
  judge deadline "$b" verdict_count "requests/answered once/violations" \
    "$(field requests "$out")/$(field answered_once "$out")/$(field failures "$out")" \
    "$sleeps/$sleeps/0"
}

log() { [ "$json" = 1 ] || echo "$@" >&2; }
log "server-load: servers: $backends; $threads loop threads (nginx: workers); $rounds round(s); idle flood $flood connections (RLIMIT_NOFILE hard $hard, timerfd uses 2 per connection); idle memory $hold connections; load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for b in $backends; do log "  round $r keepalive $b";   wrk_run "$b" keepalive 100 "$ka_s"; done
  for b in $backends; do log "  round $r idle-flood $b";  flood_run "$b"; done
  for b in $backends; do log "  round $r idle-memory $b"; memory_run "$b"; done
  for b in $backends; do log "  round $r reset-storm $b"; wrk_run "$b" reset-storm 1000 "$storm_s"; done
  for b in $backends; do log "  round $r slowloris $b";   slow_run "$b" H; done
  for b in $backends; do log "  round $r slow-read $b";   slow_run "$b" X; done
  for b in $backends; do
    [ "$b" = nginx ] && continue
    log "  round $r deadline $b"; deadline_run "$b"
  done
done
log "server-load: done; load $(cut -d' ' -f1-3 /proc/loadavg)"

cp "$tmp/results" "$build/results.txt" # raw figures, kept for a look after the run

# Average over rounds, then print: a table per workload, or JSON. ok is the minimum
# over rounds (0 if any round was flagged); a server without a figure shows "-".
awk -v json="$json" -v order="$backends" -v cap="$flood" -v hold="$hold" '
  { k = $1 SUBSEP $2 SUBSEP $3
    if ($3 == "ok") { if (!(k in n) || $4 < sum[k]) sum[k] = $4; n[k] = 1 }
    else { sum[k] += $4; n[k]++ }
    if (!($1 in wseen)) { wseen[$1] = 1; wl[++nw] = $1 }
    if (!(($1, $3) in mseen)) { mseen[$1, $3] = 1; ml[$1] = ml[$1] " " $3 } }
  function val(k) { return $3 == "ok" ? sum[k] : sum[k] / n[k] }
  END {
    nb = split(order, bs, " ")
    if (json) printf "{\"idle_flood_conns\": %d, \"idle_memory_conns\": %d, \"workloads\": {", cap, hold
    for (i = 1; i <= nw; i++) {
      w = wl[i]; nm = split(substr(ml[w], 2), ms, " ")
      if (json) {
        printf "%s\"%s\": {", (i > 1 ? ", " : ""), w
        nj = 0
        for (j = 1; j <= nb; j++) {
          if (!((w, bs[j], "ok") in n)) continue
          printf "%s\"%s\": {", (nj++ ? ", " : ""), bs[j]; nf = 0
          for (m = 1; m <= nm; m++) { k = w SUBSEP bs[j] SUBSEP ms[m]
            if (k in n) printf "%s\"%s\": %g", (nf++ ? ", " : ""), ms[m], ms[m] == "ok" ? sum[k] : sum[k] / n[k] }
          printf "}"
        }
        printf "}"
        continue
      }
      printf "\n%s%s\n", w, w == "idle-flood" ? " (" cap " connections)" : w == "idle-memory" ? " (" hold " connections)" : ""
      printf "%-11s", "server"; for (m = 1; m <= nm; m++) printf " %19s", ms[m]; printf "\n"
      for (j = 1; j <= nb; j++) {
        if (!((w, bs[j], "ok") in n)) continue
        printf "%-11s", bs[j]
        for (m = 1; m <= nm; m++) {
          k = w SUBSEP bs[j] SUBSEP ms[m]
          if (!(k in n)) { printf " %19s", "-"; continue }
          v = ms[m] == "ok" ? sum[k] : sum[k] / n[k]
          k0 = w SUBSEP "spoke" SUBSEP ms[m]; v0 = (k0 in n) ? sum[k0] / n[k0] : 0
          cell = sprintf("%.4g", v)
          if (bs[j] != "spoke" && v0 != 0 && ms[m] != "ok" && ms[m] != "load1") cell = cell sprintf(" (x%.2f)", v / v0)
          printf " %19s", cell
        }
        printf "\n"
      }
    }
    if (json) printf "}}\n"
  }' "$tmp/results"

# --plot: server CPU per request (keep-alive, reset storm) and memory per idle connection.
if [ -n "$plot" ]; then
  for b in $backends; do
    awk -v b="$b" '$2 == b && (($1 == "keepalive" || $1 == "reset-storm") && $3 == "cpu_us_per_req" ||
                   $1 == "idle-memory" && $3 == "bytes_per_conn") { s[$1] += $4; n[$1]++ }
      END { printf "%s %g %g %g\n", b, s["keepalive"] / n["keepalive"],
            s["reset-storm"] / n["reset-storm"], s["idle-memory"] / n["idle-memory"] }' \
      "$tmp/results"
  done >"$tmp/plot.dat"
  gnuplot <<GP
set terminal pngcairo size 1000,420 font ",10"
set output "$plot"
set multiplot layout 1,2 title "spoke-httpd (by timer backend) and nginx on 127.0.0.1, $threads loop threads / workers (lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set key top left
set title "wrk load: 100 keep-alive conns, and 1000 (reset storm)"
set ylabel "server CPU per request (us)"
set xlabel "server"
set yrange [0:*]
plot "$tmp/plot.dat" using 2:xtic(1) title "keep-alive, 100 conns", "" using 3 title "reset storm, 1000 conns"
set title "idle keep-alive connections: $hold held open after one request"
set ylabel "server RssAnon per idle connection (bytes)"
plot "$tmp/plot.dat" using 4:xtic(1) title "idle connection" lc rgb "#4a8"
unset multiplot
GP
  log "server-load: plot written to $plot"
fi
if [ "$flagged" = 1 ]; then
  echo "server-load: some runs did not do what they say (FLAGGED above, ok = 0): failing" >&2
  exit 1
fi
