# Guest side of bench/run: OUT BIN QUICK REPS PEER_BIN ONLY SCHEDS [BASE_BIN]
# (SCHEDS: the schedulers each round runs, each round starting one further
# down the list; bench/run chooses them).
# Appends "<round> <scheduler> <workload> <metric> <value>" lines to
# OUT/results.txt.
out=$1 bin=$2 quick=$3 reps=$4 peer_bin=$5 only=$6 scheds=$7 base_bin=${8:-}
res=$out/results.txt
. "$(dirname "${BASH_SOURCE[0]}")/sched.sh"
. "$(dirname "${BASH_SOURCE[0]}")/hogs.sh"
cd /tmp || exit 1
: >"$res" # vm/run may run this again on a new boot: start afresh
rm -f "$out/died.txt"
n=$(nproc)
sysctl -qw kernel.bpf_stats_enabled=1
# Live code patching: a perf stat that opens a per-task event and closes it
# flips perf's static keys (perf_sched_events, the software events' keys),
# some five text patches each, and under TCG a CPU now and then executes a
# patch's int3 after the patch is done, which kills the guest (vm/run). A
# holder keeps those keys on for the whole run, so that the workloads' perf
# stats patch nothing: in one probe, five perf stats made 24 patches, and 0
# beside the holder (a scheduler's start and stop makes 8). The holder opens
# the events run counts, so that it holds every key they flip.
perf_events=context-switches,cpu-migrations,task-clock
perf stat -x, -e "$perf_events" -o /dev/null -- sleep infinity >/dev/null 2>&1 &
keys_holder=$!
trap 'pkill -P "$keys_holder"' EXIT # its sleep: perf stat then exits

if [ "$quick" = 1 ]; then t=2 hb=50 fan=200 rounds=1000 depth=7; else t=5 hb=200 fan=1000 rounds=5000 depth=10; fi

# Stop the scheduler. One that died or was ejected during the round would
# leave EEVDF's numbers under its name. scx_gmp (either mode, a variant or
# --base-dir build) then makes the whole run fail, with its log. A peer
# (scx_bpfland, scx_rustland: crates.io builds, not ours) is reported in
# OUT/died.txt ("<round> <scheduler> <why>"), its numbers from that round
# are dropped, and it sits out the rounds after (dead): one peer's ejection
# once cost a 26-minute run.
dead=
stop_sched() {
	[ -n "$SCHED_PID" ] || return 0
	local alive=1 rc why
	kill -0 "$SCHED_PID" 2>/dev/null && [ "$(cat $state)" = enabled ] || alive=0
	kill -INT "$SCHED_PID" 2>/dev/null
	wait "$SCHED_PID"
	rc=$?
	for _ in $(seq 100); do [ "$(cat $state)" = disabled ] && break; sleep 0.1; done
	[ "$alive" = 0 ] || [ "$rc" != 0 ] || return 0
	echo "bench: $sched did not survive round $round (exit $rc):" >&2
	tail -20 /tmp/sched.log >&2
	dmesg | grep 'sched_ext:' | tail -3 >&2
	case "$sched" in
	bpfland | rustland) ;;
	*) exit 1 ;;
	esac
	why=$(grep -o 'EXIT: .*' /tmp/sched.log | tail -n 1)
	echo "$round $sched ${why:-exit $rc}" >>"$out/died.txt"
	sed -i "/^$round $sched /d" "$res"
	dead="$dead $sched"
	echo "bench: $sched sits out the rounds after this one" >&2
}

# The scheduler's processes: scx_gmp --mode user is a supervisor with the
# agent as its child. -> pids=(...); none for EEVDF.
sched_pids() {
	pids=()
	[ -z "$SCHED_PID" ] || pids=("$SCHED_PID" $(pgrep -P "$SCHED_PID"))
}

# CPU PIDS used so far, and the system's context switches, read with bash
# builtins only (nothing started or exited while it reads):
# now=(<utime+stime ticks> <their BPF programs' run time, ns> <ctxt>)
# (run time: kernel.bpf_stats_enabled).
tck=$(getconf CLK_TCK)
sched_cpu_now() {
	local p f k v line ticks=0 ns=0 ctxt=0 st
	for p; do
		{ read -r line <"/proc/$p/stat"; } 2>/dev/null || continue # gone
		read -r -a st <<<"${line##*) }"
		ticks=$((ticks + st[11] + st[12]))
		for f in /proc/"$p"/fdinfo/*; do
			while read -r k v; do
				[ "$k" = run_time_ns: ] && ns=$((ns + v))
			done <"$f"
		done 2>/dev/null
	done
	while read -r k v; do [ "$k" = ctxt ] && ctxt=$v; done </proc/stat
	now=("$ticks" "$ns" "$ctxt")
}

# CPU the scheduler itself used so far (ms): its processes and their BPF
# programs' run time.
sched_cpu_ms() {
	local pids now
	sched_pids
	[ ${#pids[@]} -gt 0 ] || { echo 0; return; }
	sched_cpu_now "${pids[@]}"
	echo $(((now[0] * 1000 / tck) + now[1] / 1000000))
}

emit() { echo "$round $sched $1 $2 $3" >>"$res"; }

# kick_counters: BPF-mode scx_gmp's cumulative wakep() kicks, those answered
# and those answered after over 1 ms ("kicks answered slow"), from one
# --monitor sample; nothing for the other schedulers. They show whether an
# option that reads the share of slow kicks (--ready-idle-slow-pct,
# --wakep-delay-slow-pct) could have acted in a workload.
kick_counters() {
	case "$sched" in gmp | gmp+* | base | base+*) ;; *) return 0 ;; esac
	timeout 10 "$bin/scx_gmp" --monitor 0.1 --json 2>/dev/null | head -n 1 |
		awk '{
			n = split("kicks kicks_answered kicks_slow", k, " ")
			for (i = 1; i <= n; i++) {
				key = "\"" k[i] "\":"
				if (!match($0, key "[0-9]+"))
					exit
				v = v (i > 1 ? " " : "") substr($0, RSTART + length(key), RLENGTH - length(key))
			}
			print v
		}'
}

# The idle workload: the scheduler's own CPU while nothing runs, over SECS,
# and the whole system's context switches a second. Between its two
# readings (sched_cpu_now) nothing starts or exits: the wait is a read on a
# FIFO, where run's perf stat, sleep and sched_cpu_ms's pgrep start and
# exit inside the window: scheduling those was about three quarters of
# what run read for scx_gmp under emulation
# (bench/results/idle-probe-9e824eb.md).
idle_fifo=/tmp/bench-idle.fifo
[ -p "$idle_fifo" ] || mkfifo "$idle_fifo"
idle() { # SECS
	want idle || return 0
	local pids a b t0 t1 ms now
	sched_pids
	exec 8<>"$idle_fifo"
	t0=$EPOCHREALTIME
	sched_cpu_now "${pids[@]}"
	a=("${now[@]}")
	read -r -t "$1" -u 8 _
	sched_cpu_now "${pids[@]}"
	b=("${now[@]}")
	t1=$EPOCHREALTIME
	exec 8<&-
	ms=$(((${t1//[.,]/} - ${t0//[.,]/}) / 1000))
	emit idle ctx_switches_per_s $(((b[2] - a[2]) * 1000 / ms))
	[ "$sched" = eevdf ] || emit idle sched_cpu_ms_per_s "$(awk -v t=$((b[0] - a[0])) -v ns=$((b[1] - a[1])) \
		-v tck="$tck" -v ms="$ms" 'BEGIN {printf "%.1f", (t * 1000 / tck + ns / 1e6) * 1000 / ms}')"
}

# kv KEY: the value of KEY=... in a gmp-load result line.
kv() { tr ' ' '\n' </tmp/out.txt | sed -n "s/^$1=//p"; }

# cyclictest's wakeup latency over all its threads, from its JSON histogram
# (1 us bins; a sample past the histogram counts as the maximum). A thread
# that never woke has "avg": -nan, which is not JSON: it is read as null
# (a user-mode quick round lost its cyclictest row to it).
cyclic_lat() {
	python3 -c '
import json, re
text = re.sub(r":\s*-?nan\b", ": null", open("/tmp/ct.json").read())
t = json.loads(text)["thread"].values()
lat = sorted((int(us), n) for th in t for us, n in th["histogram"].items())
mx = max(th["max"] for th in t)
total = sum(th["cycles"] for th in t)
def pct(p):
    seen = 0
    for us, n in lat:
        seen += n
        if seen >= p * total:
            return us
    return mx
print("lat_p50_us", pct(0.50))
print("lat_p99_us", pct(0.99))
print("lat_max_us", mx)'
}

# run WORKLOAD CMD...: run CMD under perf stat; emit its counters and what
# the parser for WORKLOAD finds in its output.
# want WORKLOAD: whether --only (if given) names it.
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

run() {
	local w=$1
	shift
	want "$w" || return 0
	local c0 t0 t1 c1 k0 k1
	read -r -a k0 <<<"$(kick_counters)"
	c0=$(sched_cpu_ms)
	t0=$(date +%s%N)
	perf stat -x, -e "$perf_events" -o /tmp/perf.csv -- "$@" >/tmp/out.txt 2>&1
	t1=$(date +%s%N)
	c1=$(sched_cpu_ms)
	read -r -a k1 <<<"$(kick_counters)"
	case "$w" in
	stress-cpu | stress-sock | stress-idle)
		emit "$w" bogo_ops_per_s "$(awk '/metrc:/ && $5 ~ /^[0-9]/ && $4 != "stressor" {print $9; exit}' /tmp/out.txt)" ;;
	hackbench-*) emit "$w" time_s "$(awk '/^Time:/ {print $2}' /tmp/out.txt)" ;;
	perf-pipe | perf-pipe-idle) emit "$w" usecs_per_op "$(awk '/usecs\/op/ {print $1}' /tmp/out.txt)" ;;
	perf-messaging) emit "$w" time_s "$(awk '/Total time/ {print $3}' /tmp/out.txt)" ;;
	fanout | forkjoin) emit "$w" makespan_ms "$(kv makespan_ms)" ;;
	pingpong | pingpong-idle) for m in rtt_p50_us rtt_p99_us; do emit "$w" $m "$(kv $m)"; done ;;
	maplock) emit "$w" ops_per_s "$(kv ops_per_s)" ;;
	request-*) for m in wakes wake_p50_us wake_p99_us req_p50_us req_p99_us req_per_s sent_per_s; do emit "$w" $m "$(kv $m)"; done ;;
	cyclictest | cyclictest-idle) cyclic_lat | while read -r m v; do emit "$w" "$m" "$v"; done ;;
	esac
	local secs_ms=$(((t1 - t0) / 1000000))
	emit "$w" ctx_switches_per_s "$(awk -F, -v ms="$secs_ms" '$3 == "context-switches" {printf "%.0f", $1 * 1000 / ms}' /tmp/perf.csv)"
	emit "$w" migrations_per_s "$(awk -F, -v ms="$secs_ms" '$3 == "cpu-migrations" {printf "%.0f", $1 * 1000 / ms}' /tmp/perf.csv)"
	emit "$w" task_clock_ms "$(awk -F, '$3 == "task-clock" {printf "%.0f", $1}' /tmp/perf.csv)"
	[ "$sched" = eevdf ] || emit "$w" sched_cpu_ms_per_s "$(awk -v c=$((c1 - c0)) -v ms="$secs_ms" 'BEGIN {printf "%.1f", c * 1000 / ms}')"
	if [ ${#k0[@]} = 3 ] && [ ${#k1[@]} = 3 ]; then
		emit "$w" kicks_per_s $(((k1[0] - k0[0]) * 1000 / secs_ms))
		emit "$w" kicks_slow_pct "$(awk -v a=$((k1[1] - k0[1])) -v s=$((k1[2] - k0[2])) 'BEGIN {printf "%.1f", a ? s * 100 / a : 0}')"
	fi
}

# beside_hogs POLICY WORKLOAD CMD...: run WORKLOAD while stress-ng keeps
# every CPU busy under chrt's POLICY (-o normal, -i SCHED_IDLE).
beside_hogs() {
	local policy=$1
	shift
	want "$1" || return 0
	start_hogs "$policy" "$n" || exit 1
	run "$@"
	stop_hogs
}

# Each round starts one scheduler further down the list (eevdf,gmp,x;
# gmp,x,eevdf; x,eevdf,gmp...), so that no scheduler always runs second or
# last: in one 2-vCPU boot, cyclictest's median beside CPU hogs read 3% to
# 31% higher for whichever of two builds ran second, in 6 of 7 pairs, with
# either first (docs/benchmarks.md, "--lrq-max-wait-us 1000 by default").
read -ra order <<<"$scheds"
for round in $(seq "$reps"); do
	k=$(((round - 1) % ${#order[@]}))
	for sched in "${order[@]:k}" "${order[@]:0:k}"; do
		case " $dead " in *" $sched "*) continue ;; esac
		echo "bench: round $round/$reps: $sched" >&2
		start_sched "$sched" || exit 1
		# The scheduler's own CPU on an idle system (sched_cpu_ms_per_s),
		# after 3 s for its start-up to settle, over 4 times the usual
		# run: the agent's CPU is counted in clock ticks (10 ms each), so
		# over 5 s one tick more or less would be 2 ms/s.
		want idle && sleep 3
		idle "$((t * 4))"
		run stress-cpu stress-ng --cpu "$n" -t "$t" --metrics-brief
		# The batch job alone: the same CPU load under SCHED_IDLE, which
		# runs a shorter slice (--idle-slice-us).
		run stress-idle chrt -i 0 stress-ng --cpu "$n" -t "$t" --metrics-brief
		[ "$quick" = 1 ] || run stress-sock stress-ng --sock "$n" -t "$t" --metrics-brief
		run hackbench-pipe hackbench -p -g 4 -l "$hb"
		run perf-pipe perf bench sched pipe -l "$((rounds * 4))"
		[ "$quick" = 1 ] || run perf-messaging perf bench sched messaging -g 4 -l 50
		[ "$quick" = 1 ] || run hackbench-sock hackbench -g 4 -l "$hb"
		run fanout "$bin/examples/gmp-load" fanout --threads "$fan" --busy-ms 5 --gate
		[ "$quick" = 1 ] || run forkjoin "$bin/examples/gmp-load" forkjoin --depth "$depth" --leaf-us 2000
		run pingpong "$bin/examples/gmp-load" pingpong --rounds "$rounds"
		# A server's dispatcher waking workers: light (0.3 of the CPUs'
		# capacity) and overloaded (1.5).
		run request-light "$bin/examples/gmp-load" request --workers $((4 * n)) --load 0.3 --secs "$t"
		run request-over "$bin/examples/gmp-load" request --workers $((4 * n)) --load 1.5 --secs "$t"
		# cyclictest's timer wakeups (normal priority, so that the scheduler
		# under test places them) beside a CPU-bound load on every CPU.
		beside_hogs -o cyclictest cyclictest -m -q -t "$n" -i 1000 -D "$t" -h 100000 --json=/tmp/ct.json
		# Threads queueing for their process's memory-map lock (woken from
		# an uninterruptible sleep) while a CPU-bound load keeps every CPU
		# busy.
		beside_hogs -o maplock "$bin/examples/gmp-load" maplock --threads $((2 * n)) --secs "$t"
		# The interactive task beside a batch job: the same ping-pong while
		# SCHED_IDLE hogs keep every CPU busy (scx_gmp has no priorities).
		beside_hogs -i pingpong-idle "$bin/examples/gmp-load" pingpong --rounds "$((rounds / 5))"
		# The pipe hand-off beside the same batch job: a sync wakeup, which
		# the ping-pong's futex is not.
		beside_hogs -i perf-pipe-idle perf bench sched pipe -l "$rounds"
		# One wakeup beside a batch job: the same timers while SCHED_IDLE hogs
		# keep every CPU busy. Its max is the longest a batch job delayed an
		# interactive task.
		beside_hogs -i cyclictest-idle cyclictest -m -q -t "$n" -i 1000 -D "$t" -h 100000 --json=/tmp/ct.json
		stop_sched
	done
done
echo "bench: done" >&2
