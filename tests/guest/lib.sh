# Helpers for the guest-side test scripts (sourced; runs inside vm/run).
STATE=/sys/kernel/sched_ext/state
cd /tmp || exit 1

# wait_state WANT SECS: wait until sched_ext's state is WANT. The waits
# below are timed by the clock ($SECONDS), not by a count of 0.1 s sleeps:
# under a heavy load each look, a fork of cat and of sleep, took far longer,
# and a 120 s wait took minutes.
wait_state() {
	local end=$((SECONDS + $2))
	while [ $SECONDS -lt $end ]; do
		[ "$(cat $STATE)" = "$1" ] && return 0
		sleep 0.1
	done
	echo "timeout waiting for state $1 (is $(cat $STATE))"
	return 1
}

# wait_enables N SECS: wait until sched_ext has enabled a scheduler N times
# since boot (enable_seq), and is enabled.
wait_enables() {
	local end=$((SECONDS + $2))
	while [ $SECONDS -lt $end ]; do
		[ "$(cat /sys/kernel/sched_ext/enable_seq)" -ge "$1" ] && [ "$(cat $STATE)" = enabled ] && return 0
		sleep 0.1
	done
	echo "timeout waiting for enable number $1 (enable_seq $(cat /sys/kernel/sched_ext/enable_seq), state $(cat $STATE))"
	return 1
}

# start_gmp LOG [ARGS]: start scx_gmp in the background; sets GMP_PID.
start_gmp() {
	local log=$1
	shift
	"$SCX_GMP" "$@" >"$log" 2>&1 &
	GMP_PID=$!
	wait_state enabled 60 || { cat "$log"; return 1; }
}

# stats_json: print the running scheduler's stats record (one line of JSON,
# from `scx_gmp --monitor --json`) as stats_json=..., or as NAME=... with
# stats_json NAME.
stats_json() {
	echo "${1:-stats_json}=$(timeout 20 "$SCX_GMP" --monitor 0.5 --json 2>/dev/null | head -n 1)"
}

# stop_gmp LOG: print the stats record, SIGTERM scx_gmp, print its exit code
# and final stats.
stop_gmp() {
	local log=$1
	stats_json
	kill -TERM "$GMP_PID"
	wait "$GMP_PID"
	local rc=$?
	echo "gmp_exit=$rc"
	# A failed run: the agent's own account of why (its log, without the
	# stats lines).
	[ "$rc" = 0 ] || agent_log "$log" 30 | sed 's/^/gmp_log: /'
	# And user mode's own part of the kernel's dump (user/bpf, `dump`):
	# each CPU's DSQ, idle bit and hotplug state, cut off above.
	[ "$rc" = 0 ] || grep '^gmp: ' "$log" | sed 's/^/gmp_log: /'
	wait_state disabled 30
	grep -A1 '^SCHED ' "$log" | tail -n 2
	grep -E 'dispatches deferred|stalled task|CPU hotplug events' "$log" || true
}

# agent_log LOG N: the last N lines of the agent's log, without its stats
# lines: its own account of why it exited.
agent_log() {
	grep -v -E '^(SCHED |  runnext )' "$1" | tail -n "$2"
}

# why_left: why sched_ext left, if it did: the kernel's words (its last
# sched_ext lines, not the boot command line, which names the scx_gmp
# cache), and the agent's (the end of /tmp/gmp.log, if any).
why_left() {
	dmesg | grep -E 'sched_ext|scx_' | grep -v -i 'command line' | tail -n 15
	[ ! -f /tmp/gmp.log ] || agent_log /tmp/gmp.log 20
}

# check_trace TRACE: run `scx_gmp check` on TRACE; print its exit, the
# trace's size, the lost tasks it found, its first violations and its summary.
check_trace() {
	local out=$1.check
	"$SCX_GMP" check "$1" >"$out" 2>&1
	echo "check_exit=$? trace_lines=$(wc -l <"$1") trace_bytes=$(stat -c %s "$1")"
	echo "nothing_lost_violations=$(grep -c 'nothing-lost' "$out")"
	grep -m 20 '^violation' "$out"
	grep -E '^(checked|worst|pidleget|differs|scx_gmp: error)' "$out"
	trace_context "$1" "$out"
}

# trace_context TRACE CHECK: the trace is lost with the guest, so print what
# a violation needs to be explained: the 8 events before the first one, and
# the last events of the task it names ("task N"), each with its index.
trace_context() {
	local first v pid
	first=$(grep -m 1 '^violation: event ' "$2") || return 0
	v=$(echo "$first" | awk '{print $3}')
	pid=$(echo "$first" | grep -oE 'task [0-9]+' | head -n 1 | awk '{print $2}')
	awk -v v="$v" -v pid="$pid" '/^#/ || NF == 0 { next }
		{ n = i++ } n > v { exit }
		n >= v - 8 || (pid != "" && index($0, " pid=" pid " ")) {
			print "trace " n ": " $0 }' "$1" | tail -n 40
}

# tell PREFIX: print each line of stdin with PREFIX, and put it in the
# kernel log too, at error level (vm/run's console file gets errors and
# worse), so that it reaches that file even when the guest is too stuck to
# bring the output back.
tell() {
	local l
	while IFS= read -r l; do
		echo "$1$l"
		echo "<3>$1$l" >/dev/kmsg
	done
}

# hang_guard SECS: if this script still runs SECS from now, print every
# task in uninterruptible sleep with its kernel stack, and kill the script
# (exit 137). A task blocked in the kernel cannot be killed, and waiting
# for it would hold the test until vm/run's timeout; this way the test
# fails at once, and says where the tasks were blocked. It runs
# SCHED_FIFO, outside sched_ext, so that a stuck scheduler cannot hold it
# up too. Sets GUARD_PID (stop_guard).
hang_guard() {
	local main=$$
	(
		chrt -f -p 1 $BASHPID >/dev/null
		sleep "$1" || exit 0 # stop_guard killed the sleep
		kill -0 "$main" || exit 0
		{
			echo "hung_after_s=$1: still running, and the tasks in uninterruptible sleep:"
			ps -o pid,stat,etime,args --ppid "$main"
			# One grep over every thread: 10,000 of them take one awk each too long.
			for t in $(grep -l '^State:[[:space:]]*D' /proc/[0-9]*/task/[0-9]*/status); do
				t=${t%/status}
				echo "${t#/proc/} $(cat "$t/comm") $(cat "$t/wchan")"
				sed 's/^/  /' "$t/stack"
			done
			echo "sched_ext $(cat $STATE)"
			why_left
		} | tell "hung: "
		kill -KILL "$main"
	) 2>/dev/null &
	GUARD_PID=$!
	disown "$GUARD_PID" # no "Terminated" notices when stop_guard kills it
}

# longest_gap SECS: for SECS, wake up every 5 ms and print the longest
# time (ms) between two wakeups: how long a task that only sleeps was kept
# off every CPU. Shell builtins only (a read that times out on a FIFO held
# open for writing), so that no fork adds to it.
longest_gap() {
	local end=$((SECONDS + $1)) fifo last now worst=0 fd
	fifo=$(mktemp -u /tmp/gap.XXXXXX)
	mkfifo "$fifo"
	exec {fd}<>"$fifo"
	last=${EPOCHREALTIME//[.,]/}
	while [ $SECONDS -lt $end ]; do
		read -r -t 0.005 -u "$fd"
		now=${EPOCHREALTIME//[.,]/}
		[ $((now - last)) -gt $worst ] && worst=$((now - last))
		last=$now
	done
	exec {fd}<&-
	rm -f "$fifo"
	echo $((worst / 1000))
}

# stall_watch: at RCU's first stall warning (a task it waits for has not
# run for 21 s), and again at the next one a minute or more later, make the
# kernel print what every CPU runs and holds: sched_ext's dump of every CPU
# and its queues (sysrq D, which goes to the tracing buffer: copied into the
# kernel log as "scx_dump:" lines), a backtrace of every busy CPU (sysrq l)
# and the tasks in uninterruptible sleep (sysrq w), with the console opened
# to every level from then on (it may print them later). It runs
# SCHED_DEADLINE (2 ms in every 20 ms), above every real-time and sched_ext
# task, so CPUs held by real-time spinners do not hold it off as they held
# off a SCHED_FIFO one; a deadline task may not fork, so it uses shell
# builtins only. Sets WATCH_PID (stop_guard ends it).
stall_watch() {
	local trace=/sys/kernel/tracing
	mountpoint -q $trace || mount -t tracefs none $trace 2>/dev/null
	echo 1 >$trace/events/sched_ext/sched_ext_dump/enable 2>/dev/null
	echo >$trace/trace 2>/dev/null
	(
		chrt -d -T 2000000 -P 20000000 -D 20000000 -p 0 $BASHPID || exit 0
		local line reports=0 last=-60 st errors=0 n
		exec 3</dev/kmsg
		while [ $errors -lt 100 ]; do
			# A read fails when the log overwrote a record before it was read.
			IFS= read -r -u 3 line || { errors=$((errors + 1)) && continue; }
			errors=0
			case $line in
			*"detected stalls"* | *"kthread starved"*) ;;
			*) continue ;;
			esac
			[ "$SECONDS" -ge $((last + 60)) ] || continue
			last=$SECONDS reports=$((reports + 1))
			read -r st <$STATE
			echo "<3>stall: report $reports at ${SECONDS}s of the script, sched_ext $st" >/dev/kmsg
			echo 8 >/proc/sys/kernel/printk
			echo D >/proc/sysrq-trigger
			n=0
			while IFS= read -r line && [ $n -lt 600 ]; do
				case $line in "#"* | "") continue ;; esac
				echo "<3>scx_dump: ${line##*sched_ext_dump: }" >/dev/kmsg
				n=$((n + 1))
			done <$trace/trace
			echo >$trace/trace
			echo l >/proc/sysrq-trigger
			echo w >/proc/sysrq-trigger
			[ $reports -lt 2 ] || break
		done
	) 2>/dev/null &
	WATCH_PID=$!
	disown "$WATCH_PID"
}

# stop_guard: the script finished in time. Killing its sleep ends the guard.
stop_guard() {
	pkill -P "$GUARD_PID"
	kill "$GUARD_PID" 2>/dev/null # in case it had not started its sleep
	[ -z "${WATCH_PID:-}" ] || { kill "$WATCH_PID"; pkill -P "$WATCH_PID"; } 2>/dev/null
}

# hotplug CPU 0|1 SECS: take CPU offline (0) or bring it online (1) under
# scx_gmp, and print how the scheduler took it: "kept" (still enabled 5 s
# later, never reloaded: both modes resize themselves), "restarted" (the
# kernel asked for a restart and scx_gmp was back within SECS), or "failed".
hotplug() {
	local seq0
	seq0=$(cat /sys/kernel/sched_ext/enable_seq)
	echo "$2" >"/sys/devices/system/cpu/cpu$1/online"
	sleep 5
	if [ "$(cat /sys/kernel/sched_ext/enable_seq)" = "$seq0" ] && [ "$(cat $STATE)" = enabled ]; then
		echo kept
	elif wait_enables $((seq0 + 1)) "$3" >/dev/null; then
		echo restarted
	else
		echo failed
	fi
}

# cpu1_cycles_under_load N AFTER: take CPU 1 offline and bring it back N
# times, a second each way, beside wakeups that look for idle CPUs (a shell
# loop of short sleeps) and stress-ng's CPU, pipe, fork and futex load,
# which go on for AFTER seconds more (the lifecycle test, bench/hotplug.sh).
cpu1_cycles_under_load() {
	local i sleeper load
	(while :; do sleep 0.01; done) &
	sleeper=$!
	stress-ng --cpu "$(nproc)" --pipe 2 --fork 1 --futex 1 -t 3000 >/dev/null 2>&1 &
	load=$!
	for i in $(seq "$1"); do
		echo 0 >/sys/devices/system/cpu/cpu1/online
		sleep 1
		echo 1 >/sys/devices/system/cpu/cpu1/online
		sleep 1
	done
	sleep "$2"
	kill $sleeper $load
	wait $load 2>/dev/null
}
