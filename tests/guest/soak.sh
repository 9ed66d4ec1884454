# soak.sh SCX_GMP GMP_LOAD SECS [ARGS]: SECS of mixed load under scx_gmp:
# stress-ng's scheduler class and the fork/clone/exec/yield/futex/pipe/sock/
# cpu/affinity stressors, a cgroup v2 cpuset confining a fan-out to half the
# CPUs, nice 19 and SCHED_IDLE hogs, a 10,000-thread fan-out, and CPU hotplug
# off and on. Prints each workload's exit, the agent's RSS near the start and
# at the end, and sched_ext's kernel log.
SCX_GMP=$1 GMP_LOAD=$2 SECS=$3 GMP_ARGS=${4:-}
. "$(dirname "$0")/lib.sh"
n=$(nproc)
half=$((n / 2))
sysctl -qw kernel.threads-max=200000 kernel.pid_max=200000
start_gmp /tmp/gmp.log $GMP_ARGS || exit 1

# The agent's resident memory (kB): the scheduling process itself (in user
# mode, the scx_gmp-user child).
agent_rss() {
	local pid
	pid=$(pgrep -x scx_gmp-user || echo "$GMP_PID")
	awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"
}

timeout $((SECS + 120)) stress-ng --class scheduler --all 1 -t "$SECS" >/tmp/class.log 2>&1 &
class=$!
timeout $((SECS + 120)) stress-ng --fork 1 --clone 1 --exec 1 --yield 1 --futex 1 --pipe 1 \
	--sock 1 --cpu 1 --affinity 1 -t "$SECS" >/tmp/mix.log 2>&1 &
mix=$!
nice -n 19 stress-ng --cpu 1 -t "$SECS" >/dev/null 2>&1 &
nice19=$!
chrt -i 0 stress-ng --cpu 1 -t "$SECS" >/dev/null 2>&1 &
idle=$!

# CPU hotplug under load: the BPF mode resizes itself; in user mode the
# kernel asks scx_gmp to restart, twice.
hotplug_at=$(awk '{print $1}' /proc/uptime)
echo "hotplug_off=$(hotplug 1 0 120)"
echo "hotplug_on=$(hotplug 1 1 120)"
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
echo "class_exit=$?"
wait "$mix"
echo "mix_exit=$?"
wait "$nice19"
echo "nice19_exit=$?"
wait "$idle"
echo "idle_exit=$?"
echo "rss_end_kb=$(agent_rss)"
echo "state_after_soak=$(cat $STATE)"
# RCU's stall warnings: a task preempted in an RCU read-side section that
# waited 21 s to run again (the kernel ejects the scheduler only later).
echo "rcu_stall_warnings=$(dmesg | grep -c 'rcu_preempt detected stalls')"
dmesg | grep -A2 'rcu_preempt detected stalls' | sed 's/^\[[ 0-9.]*\] /rcu: /'
echo "hotplug_at=$hotplug_at hotplug_done_at=$hotplug_done_at"
stop_gmp /tmp/gmp.log
dmesg | grep 'sched_ext:' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
