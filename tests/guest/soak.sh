# soak.sh SCX_GMP GMP_LOAD SECS [ARGS]: SECS of mixed load under scx_gmp:
# stress-ng's scheduler class and the fork/clone/exec/yield/futex/pipe/sock/
# cpu/affinity stressors, a cgroup v2 cpuset confining a fan-out to half the
# CPUs, nice 19 and SCHED_IDLE hogs, a 10,000-thread fan-out, and CPU hotplug
# off and on, with a lost-task watcher beside them. Prints each workload's
# exit, the agent's RSS near the start and at the end, what the watcher
# found, and sched_ext's kernel log. SCX_GMP=none runs the same load
# under the kernel's own scheduler, as a control.
SCX_GMP=$1 GMP_LOAD=$2 SECS=$3 GMP_ARGS=${4:-}
. "$(dirname "$0")/lib.sh"
n=$(nproc)
half=$((n / 2))
sysctl -qw kernel.threads-max=200000 kernel.pid_max=200000
# A process killed by a signal is named in the kernel log, with the signal.
sysctl -qw kernel.print-fatal-signals=1
# Every hung-task warning is printed (the kernel stops at 10 by default).
sysctl -qw kernel.hung_task_warnings=-1
# The whole soak takes SECS and a few minutes more (the 60 s one about 3);
# past twice that plus 6 minutes it has hung.
hang_guard $((SECS * 2 + 360))
stall_watch
if [ "$SCX_GMP" != none ]; then
	start_gmp /tmp/gmp.log $GMP_ARGS || exit 1
fi
# The lost-task watcher, for as long as the load runs (it is stopped after
# the last workload): a thread runnable for 2 s without running while a CPU
# it may use idled for half of that is lost (examples/gmp-watch.rs; the
# watchdog test shows it catching one).
"$(dirname "$GMP_LOAD")/gmp-watch" --secs $((SECS * 10)) >/tmp/watch.out 2>&1 &
watch=$!

# The agent's resident memory (kB): the scheduling process itself (in user
# mode, the scx_gmp-user child).
agent_rss() {
	local pid
	[ "$SCX_GMP" = none ] && echo 0 && return
	pid=$(pgrep -x scx_gmp-user || echo "$GMP_PID")
	awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"
}

# stress-ng's scheduler class: each of its stressors in turn with one
# instance per CPU, 3 s each (1 s if a pass would not fit in SECS), pass
# after pass for SECS. Prints the worst exit: a code other than 0, 2 and 3
# (stress-ng's "some failed" and "no resources") wins over those. All 45
# stressors at once (--all 1) is more than the kernel's own scheduler
# survives in a 4-vCPU TCG guest: RCU stalls within a minute (README).
class_passes() {
	local per=3 nclass end=$((SECONDS + SECS)) rc worst=0 passes=0
	nclass=$(stress-ng --class 'scheduler?' 2>&1 | sed 's/.*stressors://' | wc -w)
	[ $((nclass * per)) -gt "$SECS" ] && per=1
	while :; do
		timeout $((nclass * per * 4 + 120)) stress-ng --class scheduler --sequential "$n" -t "$per"
		rc=$?
		passes=$((passes + 1))
		case $rc in
		0) ;;
		2 | 3) [ "$worst" = 0 ] && worst=$rc ;;
		*) worst=$rc ;;
		esac
		[ $((SECONDS + nclass * per)) -le $end ] || break
	done
	echo "class passes=$passes stressors=$nclass seconds_each=$per"
	return $worst
}

class_passes >/tmp/class.log 2>&1 &
class=$!
timeout $((SECS + 120)) stress-ng --fork 1 --clone 1 --exec 1 --yield 1 --futex 1 --pipe 1 \
	--sock 1 --cpu 1 --affinity 1 -t "$SECS" >/tmp/mix.log 2>&1 &
mix=$!
nice -n 19 stress-ng --cpu 1 -t "$SECS" >/dev/null 2>&1 &
nice19=$!
chrt -i 0 stress-ng --cpu 1 -t "$SECS" >/dev/null 2>&1 &
idle=$!

# CPU hotplug under load: both modes resize themselves, with no reload.
hotplug_at=$(awk '{print $1}' /proc/uptime)
if [ "$SCX_GMP" = none ]; then
	echo 0 >/sys/devices/system/cpu/cpu1/online && echo hotplug_off=done
	echo 1 >/sys/devices/system/cpu/cpu1/online && echo hotplug_on=done
else
	off=$(hotplug 1 0 120)
	echo "hotplug_off=$off"
	on=$(hotplug 1 1 120)
	echo "hotplug_on=$on"
	# Not kept: why, at once, before the rest of the soak runs on, or hangs.
	[ "$off $on" = "kept kept" ] || why_left | sed 's/^/hotplug_why: /'
fi
hotplug_done_at=$(awk '{print $1}' /proc/uptime)

sleep $((SECS / 10))
echo "rss_start_kb=$(agent_rss)"

# A cpuset of the first half of the CPUs, with a fan-out confined to it.
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/gmp-half
echo "0-$((half - 1))" >/sys/fs/cgroup/gmp-half/cpuset.cpus
(echo $BASHPID >/sys/fs/cgroup/gmp-half/cgroup.procs &&
	exec "$GMP_LOAD" fanout --threads 200 --busy-ms 20 --gate) >/tmp/cpuset.out 2>&1
echo "cpuset_exit=$? cpuset_cpus=0-$((half - 1)) $(cat /tmp/cpuset.out)"

"$GMP_LOAD" fanout --threads 10000 --busy-ms 1 --gate >/tmp/fan10k.out 2>&1
echo "fan10k_exit=$? $(cat /tmp/fan10k.out)"

wait "$class"
echo "class_exit=$? $(tail -n 1 /tmp/class.log)"
wait "$mix"
echo "mix_exit=$?"
wait "$nice19"
echo "nice19_exit=$?"
wait "$idle"
echo "idle_exit=$?"
kill -TERM "$watch"
wait "$watch"
echo "watch_exit=$? $(tail -n 1 /tmp/watch.out)"
grep '^lost: ' /tmp/watch.out
echo "rss_end_kb=$(agent_rss)"
echo "state_after_soak=$(cat $STATE)"
# RCU's stall warnings: a task preempted in an RCU read-side section that
# waited 21 s to run again (the kernel ejects the scheduler only later).
echo "rcu_stall_warnings=$(dmesg | grep -c 'rcu_preempt detected stalls')"
dmesg | grep -A2 'rcu_preempt detected stalls' | sed 's/^\[[ 0-9.]*\] /rcu: /'
echo "hotplug_at=$hotplug_at hotplug_done_at=$hotplug_done_at"
# Processes a signal killed (print-fatal-signals, above).
echo "fatal_signals=$(dmesg | grep -c 'potentially unexpected fatal signal')"
dmesg | grep -A1 'potentially unexpected fatal signal' | head -n 20 | sed 's/^\[[ 0-9.]*\] /fatal: /'
# The kernel's hung-task warnings: a task in uninterruptible sleep for
# 120 s (a stall that the watchdog does not see: the task is not runnable).
echo "hung_task_warnings=$(dmesg | grep -c 'blocked for more than')"
dmesg | grep 'blocked for more than' | head -n 10 | sed 's/^\[[ 0-9.]*\] /hung: /'
# The first one's kernel stack: what the task waited for.
dmesg | sed -n '/blocked for more than/,/<\/TASK>/p' | sed '/<\/TASK>/q' |
	grep -E 'Call Trace|blocked on|^\[[ 0-9.]*\]  [a-z_]' | head -n 16 | sed 's/^\[[ 0-9.]*\] /hung_stack: /'
stop_guard
[ "$SCX_GMP" = none ] && exit 0
stop_gmp /tmp/gmp.log
# With --trace FILE among ARGS: the decision checker's verdict on the soak.
case " $GMP_ARGS " in
*" --trace "*)
	trace=${GMP_ARGS#*--trace }
	trace=${trace%% *}
	check_trace "$trace"
	;;
esac
dmesg | grep 'sched_ext:' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
