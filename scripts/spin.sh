#!/usr/bin/env bash
# spin.sh - check the Promela model of the timer state word and of the rescue
# handoff (percpu/state.pml, docs/design/model.md) with Spin.
#
#   scripts/spin.sh                   every configuration CI runs (--list), each an
#                                     exhaustive search for assertion violations,
#                                     deadlocks and cycles: fails on any
#   scripts/spin.sh NAME...           those configurations
#   scripts/spin.sh --mutants [M...]  each known-bad variant of the model (or those
#                                     named) with the configuration that must catch
#                                     it: fails unless Spin finds a violation in each
#   scripts/spin.sh --list            the configurations and the mutants
#   scripts/spin.sh --names           the configurations' names, one a line
#   scripts/spin.sh --mutant-names    the mutants' names and configurations, NAME|CONFIG
#                                     a line
#   -D...                             model switches (state.pml header) added to a
#                                     NAME's; with no NAME: one search with those alone
#                                     over state.pml's defaults, e.g. -DNFOREIGN=2
#   --depth N                         bounded search: at most N steps deep (pan -mN)
#   --trail                           print the counterexample of a violation
#   --keep DIR                        work in DIR (default: a temporary directory)
#
# Each search is pan -l (non-progress cycles; the model has no progress labels,
# so any cycle is one) with the model's own watchdog for deadlocks. Needs spin
# (Debian package `spin`) and gcc.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
modeldir="$root/percpu"

# name|how pan is compiled|switches|what it reaches. A search of a few million
# states or more pays for gcc -O2 (about 10 s more than -O0, and about half the
# search time); a smaller one does not.
configs=(
  "oneshot|-O2|-DKIND=0 -DNFOREIGN=1 -DFOPS=2 -DOOPS=2 -DGENS=2|one-shot timers run on the pool; the owner starts (direct), resets and cancels its own, a foreign thread resets, cancels and cancel_syncs, two calls each; the slot reused"
  "periodic|-O2|-DKIND=1 -DNFOREIGN=1 -DFOPS=2 -DOOPS=1|periodic timers run on the pool (re-armed through the inbox), reset and cancelled (STOP) while armed, queued or running, by the owner and a foreign thread"
  "inline|-O0|-DKIND=3 -DPOOL=0 -DNFOREIGN=1 -DFOPS=2 -DOOPS=1 -DGENS=2|no pool: the owner runs one-shot and periodic callbacks inline and re-arms at once; the slot reused"
  "recall|-O2|-DKIND=3 -DRECALL=1 -DNFOREIGN=1 -DFOPS=1 -DOOPS=1|the shard attached (from a pool callback: ATTACHING_NOWAIT, or at once) while a run is queued on the pool: runner_recall, recalled runs taken by the owner and run inline"
  "destroy|-O0|-DKIND=1 -DDESTROY=1 -DNFOREIGN=1 -DFOPS=1 -DOOPS=1|spoke_destroy_release after the last call: periodic runs that end parked, runs left on the pool, every pending timer's argument handed back once"
  "ttl|-O0|-DKIND=4 -DLAWN_FAILS=1 -DNFOREIGN=1 -DFOPS=1 -DOOPS=1|TTL timers (and the other kinds) on the stage or in the lawn, which may refuse one: owner_make_oneshot, then the wheel"
  "wrap|-O0|-DKIND=0 -DNFOREIGN=1 -DFOPS=4 -DOOPS=0|four foreign calls: four resets wrap the 2-bit sequence inside the owner's claim window"
  "reuse|-O2|-DKIND=3 -DSTARTER=1 -DGENS=3 -DNFOREIGN=1 -DFOPS=4 -DOOPS=0|a foreign thread's arena holds the slot: starts travel as FRESH messages, one-shot or periodic, three generations until the slot is spent"
  "rescue_pool|-O2|-DKIND=0 -DRESCUE=1 -DNFOREIGN=1 -DFOPS=1 -DOOPS=0|a peer rescues the managed shard while its owner lets go and comes back mid-rescue; a foreign start, reset, cancel or cancel_sync lands while the rescuer claims and dispatches to the pool"
  "rescue_race|-O0|-DKIND=0 -DRESCUE=2 -DPOOL=0 -DNFOREIGN=0 -DOOPS=1|two rescuers race for a shard with no pool: movable runs run on the rescuer after it lets go, the others wait on owner_runs; the owner's own call goes through the inbox while the shard is held"
  "rescue_periodic|-O0|-DKIND=1 -DRESCUE=1 -DNFOREIGN=0 -DOOPS=1|a periodic timer rescued: dispatched to the pool, re-armed through the inbox, reset or cancelled by its owner during the rescue"
  "rescue_inline|-O0|-DKIND=3 -DRESCUE=1 -DPOOL=0 -DNFOREIGN=0 -DOOPS=1 -DGENS=2|no pool: a movable one-shot or periodic run runs on the rescuer (a periodic one re-armed through the inbox), the others wait on owner_runs for the owner's thread; the slot reused"
  "rescue_detach|-O0|-DKIND=0 -DRESCUE=1 -DATTACHED=1 -DDETACH=1 -DNFOREIGN=0 -DOOPS=1|an attached owner (its call count in its arena) rescued: movable runs to the pool, the others left to the owner; it calls, polls and detaches (or its new thread fails to start) during a rescue"
  "rescue_destroy|-O0|-DKIND=0 -DRESCUE=1 -DDESTROY=1 -DNFOREIGN=0 -DOOPS=1|destroy begins during a rescue: the shard handed back, every run ended or its argument handed back"
  "rescue_fence|-O0|-DKIND=0 -DRESCUE=2 -DASYM=0 -DPOOL=0 -DNFOREIGN=0 -DOOPS=1|no membarrier: both sides of the handshake run a full fence"
)

# name|configuration|what is wrong
mutants=(
  "ORPHAN_IGNORES_WRITING|oneshot|spoke_st_retired and spoke_handle_retired ignore WRITING: a generation ends and its handle is freed while a reset holds WRITING"
  "RUNNER_FREES_BEFORE_FINISH|oneshot|finish_run frees the handle before runner_finish's CAS"
  "RUNNER_RETIRE_FALLS_INTO_RUN|periodic|runner_claim_run: a failed retire of a CANCELLED word falls into the run's CAS on the reloaded word"
  "OWNER_RESET_RELEASE_STORE|oneshot|owner_reset_release stores the claimed word without WRITING instead of a fetch_and"
  "PERIODIC_CANCEL_NO_STOP|periodic|any_try_cancel returns 0 on a running periodic timer without setting STOP"
  "CLAIM_NO_GIVE_BACK|wrap|claim_expiry neither reads the deadline again after its claim nor gives the timer back (owner_give_back)"
  "DIRECT_RESET_NO_WRITING|oneshot|reset_direct bumps the sequence without holding WRITING across its store"
  "NO_ASK_RESET_MESSAGE|oneshot|claim_expiry leaves a timer whose reset holds WRITING without asking for a message (owner_ask_reset_message)"
  "LOST_WAKEUP|oneshot|finish_run does not wake the cancel_sync waiting on WAITERS"
  "CANCEL_POSTS_TWICE|oneshot|any_try_cancel asks for a post though a message is queued (INBOX set)"
  "CANCEL_DIRECT_IGNORES_WRITING|oneshot|cancel_direct frees the owner's armed timer while a foreign reset holds WRITING"
  "PUBLISH_STALE_NEXT|oneshot|writer_publish computes its next word once, not from each word its failed CAS reloads"
  "RETIRE_GIVES_UP|oneshot|retire_cancelled does not retry when owner_retire_cancelled's CAS fails"
  "CLAIM_NO_RELOAD|oneshot|claim_expiry retries owner_claim_expiry with the word it first read (a CAS that does not reload): the owner spins"
  "RECALL_CLEARS_RESET|recall|owner_take_message clears RESET on a recalled run too"
  "MAKE_ONESHOT_MISSING|ttl|a TTL timer the lawn refused goes to the wheel without owner_make_oneshot"
  "PARK_RETIRES|destroy|runner_finish retires a periodic timer that destroy stops, instead of parking it"
  "FRESH_NOT_INIT|reuse|arena_take hands out a fresh slot without starter_init_fresh (generation 0)"
  "AUX_NOT_FREED|periodic|spoke_handle_release does not give back a periodic timer's second slot"
  "OWNER_CANCEL_SAME_GEN|oneshot|owner_cancel_direct frees the word without the next generation"
  "CANCEL_DIRECT_NO_DISARM|oneshot|cancel_direct frees the handle without taking it out of its engine"
  "DISARM_BY_NEW_WORD|ttl|cancel_direct disarms by the word after its CAS (FREE, no kind) instead of the word before it"
  "LAZY_FIRES_AT_FILED|oneshot|claim_expiry fires a timer at the deadline its node was filed for, not the one a later reset stored"
  "OWNER_CHECKS_BEFORE_BUSY|rescue_race|the owner looks at rescue before it counts itself busy (with membarrier: the light fence's compiler barrier missing)"
  "RESCUER_IGNORES_BUSY|rescue_race|rescuer_take does not look at the owner's counts"
  "RESCUER_NO_FENCE|rescue_race|rescuer_take without the heavy fence: the owner's count may still sit in its store buffer"
  "OWNER_NO_FENCE|rescue_fence|without membarrier, the owner's side without its full fence: its count stays buffered past its load of rescue"
  "RESCUER_RELEASES_EARLY|rescue_race|the rescuer lets go of the shard before it has taken its list of runs"
  "RESCUER_RUNS_NON_MOVABLE|rescue_race|rescuer_place keeps a run that must stay on the owner's thread for the rescuer to run"
  "DUE_STORE_DROPS_RESCUE|rescue_race|a write of the shard's due (a lowering, a holder's publish) stores the due alone, dropping the rescue bit beside it"
  "DUE_WRITE_NOT_ATOMIC|rescue_race|a write of the shard's due loads the word and later stores what it computed: a rescue bit taken or let go in between is undone"
)

usage() { sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

mode=configs depth=100000 bounded=0 keep="" trail=0 extra=() names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mutants) mode=mutants ;;
    --list) mode=list ;;
    --names) mode=names ;;
    --mutant-names) mode=mutant_names ;;
    --depth) depth=$2; bounded=1; shift ;;
    --trail) trail=1 ;;
    --keep) keep=$2; shift ;;
    -D*) extra+=("$1") ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "spin.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
  esac
  shift
done

config_field() { # name, field (2: compile, 3: switches) -> its value, or fail
  local c
  for c in "${configs[@]}"; do
    [ "${c%%|*}" = "$1" ] && { echo "$c" | cut -d'|' -f"$2"; return 0; }
  done
  echo "spin.sh: no configuration '$1' (--list)" >&2
  return 1
}

if [ "$mode" = names ]; then
  for c in "${configs[@]}"; do echo "${c%%|*}"; done
  exit 0
fi
if [ "$mode" = mutant_names ]; then
  for m in "${mutants[@]}"; do echo "$m" | cut -d'|' -f1,2; done
  exit 0
fi
if [ "$mode" = list ]; then
  echo "configurations (scripts/spin.sh NAME):"
  for c in "${configs[@]}"; do
    IFS='|' read -r n _ d what <<<"$c"
    printf '  %-9s %s\n            %s\n' "$n" "$d" "$what"
  done
  echo "mutants (scripts/spin.sh --mutants NAME; switch -DMUTANT_NAME):"
  for m in "${mutants[@]}"; do
    IFS='|' read -r n c what <<<"$m"
    printf '  %-30s [%s] %s\n' "$n" "$c" "$what"
  done
  exit 0
fi
command -v spin >/dev/null || { echo "spin.sh: spin is not installed (apt-get install spin)" >&2; exit 2; }
command -v gcc >/dev/null || { echo "spin.sh: gcc is not installed" >&2; exit 2; }

if [ -n "$keep" ]; then work=$keep; mkdir -p "$work"; else
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
cp "$modeldir"/state*.pml "$work/"

# The steps of a counterexample that change shared state (pan's trail,
# replayed), the state word decoded: status, kind, sequence, generation, flags.
print_trail() { # dir, switches...
  local dir=$1; shift
  echo "spin.sh: counterexample (each step that changes shared state, and the change):"
  (cd "$dir" && spin "$@" -t -p -g state.pml 2>&1) | awk '
    function word(v,   s, n, i, f, b) {
      split("FREE ARMED DISPATCHED RUNNING CANCELLED AUX AUX_FREE", n, " ")
      split("one-shot periodic ttl ?", k, " ")
      s = n[v % 8 + 1] " " k[int(v / 128) % 4 + 1] " seq " int(v / 512) % 4 " gen " int(v / 16384) % 4
      split("8 INBOX 16 RESET 32 STOP 64 WAITERS 2048 WRITING 4096 ORPHAN 8192 FRESH 65536 MOVABLE", f, " ")
      for (i = 1; i < 16; i += 2) { b = f[i] + 0; if (int(v / b) % 2) s = s " " f[i + 1] }
      return s
    }
    function flush() { if (changes != "") print head changes; changes = "" }
    /^ *[0-9]+:[[:space:]]+proc/ {
      n = $1; sub(/:$/, "", n)
      if (n != stepno) { flush(); stepno = n }
      split($0, p, "[][]"); sub(/\(state [0-9]+\)/, "", p[1]); gsub(/[[:space:]]+/, " ", p[1])
      sub(/^ /, "", p[1]); head = sprintf("%-48s", p[1])
      next
    }
    /^[[:space:]]+[A-Za-z_]+(\[[0-9]\])? = -?[0-9]+$/ {
      var = $1; val = $3
      if (var !~ /^(W|A|deadline|base|now|eng_on|eng_d|eng_in|inq|poolq|slot|aslot|mode|stopping|pend|running|fsleep\[[0-9]\]|rescue|turning|turning_sb|in_call|in_call_sb|oarena|rescuing|orun|rrun|ocs|rcs)$/ ||
          last[var] == val) next
      last[var] = val
      changes = changes (changes == "" ? "" : ", ") var " = " (var ~ /^[WA]$/ ? word(val) : val)
      next
    }
    /assertion violated|timeout|cycle|^#processes/ { flush(); print }
    END { flush() }' | tail -n 150
}

# search DIR LABEL OPT SWITCHES...: compile (gcc OPT) and run one search in DIR; sets
# found (1: a violation), summary (one line).
search() {
  local dir=$1 label=$2 opt=$3 start end secs states sdepth mem err; shift 3
  mkdir -p "$dir"
  cp "$work"/state*.pml "$dir/"
  (cd "$dir" && spin "$@" -a state.pml >/dev/null &&
     gcc "$opt" -w -DNP -DCOLLAPSE -DMEMLIM=6000 -o pan pan.c)
  start=$(date +%s.%N)
  (cd "$dir" && ./pan -l -m"$depth" -w25 >pan.out 2>&1) || true
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  states=$(awk '/states, stored/ { print $1; exit }' "$dir/pan.out")
  sdepth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$dir/pan.out" | head -1)
  mem=$(awk '/total actual memory usage/ { printf "%.0f", $1 }' "$dir/pan.out")
  err=$(grep -m1 -E "^pan:1:" "$dir/pan.out" | sed 's/ (at depth [0-9]*)//' || true)
  found=0
  grep -q "errors: [1-9]" "$dir/pan.out" && found=1
  if [ $found = 0 ] && grep -qE "out of memory|Search not completed" "$dir/pan.out"; then
    found=2
    err=$(grep -m1 -E "out of memory|Search not completed" "$dir/pan.out")
  fi
  summary="$label: ${states:-?} states, depth ${sdepth:-?}, ${mem:-?} MB, $secs s${err:+: $err}"
  if [ $found = 0 ] && grep -q "max search depth too small" "$dir/pan.out"; then
    summary="$summary (bounded: depth $depth)"
    [ $bounded = 0 ] && found=2
  fi
}

fail=0
if [ "$mode" = configs ]; then
  if [ ${#names[@]} -eq 0 ]; then
    if [ ${#extra[@]} -gt 0 ]; then names=(custom); else
      for c in "${configs[@]}"; do names+=("${c%%|*}"); done; fi
  fi
  for n in "${names[@]}"; do
    if [ "$n" = custom ]; then defs="" opt=-O2; else
      defs=$(config_field "$n" 3) opt=$(config_field "$n" 2); fi
    # shellcheck disable=SC2206
    sw=($defs "${extra[@]}")
    search "$work/$n" "$n" "$opt" "${sw[@]}"
    case $found in
      0) echo "spin.sh: ok   $summary" ;;
      1) echo "spin.sh: FAIL $summary"; fail=1
         [ $trail = 1 ] && print_trail "$work/$n" "${sw[@]}" ;;
      *) echo "spin.sh: FAIL (search incomplete) $summary"; fail=1 ;;
    esac
  done
  [ $fail = 0 ] && echo "spin.sh: no violation in ${#names[@]} configuration(s), each exhaustive"
  exit $fail
fi

# --mutants: every one must be caught.
if [ ${#names[@]} -eq 0 ]; then
  for m in "${mutants[@]}"; do names+=("${m%%|*}"); done
fi
caught=0
for n in "${names[@]}"; do
  line=""
  for m in "${mutants[@]}"; do [ "${m%%|*}" = "$n" ] && line=$m; done
  [ -n "$line" ] || { echo "spin.sh: no mutant '$n' (--list)" >&2; exit 2; }
  IFS='|' read -r _ cfg _ <<<"$line"
  defs=$(config_field "$cfg" 3)
  # shellcheck disable=SC2206
  sw=("-DMUTANT_$n" $defs "${extra[@]}")
  # A mutant is caught early in its search: the quick compile pays off there.
  search "$work/mutant-$n" "$n [$cfg]" -O0 "${sw[@]}"
  if [ $found = 1 ]; then
    echo "spin.sh: caught  $summary"
    caught=$((caught + 1))
    [ $trail = 1 ] && print_trail "$work/mutant-$n" "${sw[@]}"
  else
    echo "spin.sh: MISSED $summary"
    fail=1
  fi
done
echo "spin.sh: $caught of ${#names[@]} mutant(s) caught"
exit $fail
