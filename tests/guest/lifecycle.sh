# lifecycle.sh SCX_GMP [ARGS]: load, identify, refuse a second instance and a
# non-root user, be watched with --monitor, go on across CPU hotplug (both
# modes resize themselves), unload on SIGTERM.
SCX_GMP=$1
GMP_ARGS=${2:-}
. "$(dirname "$0")/lib.sh"
# It takes about 4 minutes; past 10 it has hung.
hang_guard 600
echo "before=$(cat $STATE)"
setpriv --reuid=65534 --regid=65534 --clear-groups "$SCX_GMP" $GMP_ARGS 2>/tmp/nonroot.err
echo "nonroot_exit=$? nonroot_err=$(cat /tmp/nonroot.err)"
# While it loads beside a CPU hog per CPU: a task that only sleeps is
# never kept off the CPUs long (user mode once froze every task but the
# kernel's for seconds after attaching: README, "When things go wrong").
# The hogs matter: a wakeup that finds an idle CPU runs there in either mode.
stress-ng --cpu "$(nproc)" -t 25 >/dev/null 2>&1 &
hogs=$!
longest_gap 25 >/tmp/start_gap &
gapper=$!
start_gmp /tmp/gmp.log $GMP_ARGS || exit 1
wait $gapper $hogs
echo "start_gap_ms=$(cat /tmp/start_gap)"
echo "state=$(cat $STATE) ops=$(cat /sys/kernel/sched_ext/root/ops)"
"$SCX_GMP" $GMP_ARGS 2>/tmp/second.err
echo "second_exit=$? second_err=$(cat /tmp/second.err)"
"$SCX_GMP" $GMP_ARGS --slice-us 5 2>/tmp/badarg.err
echo "badarg_exit=$? badarg_err=$(head -1 /tmp/badarg.err)"
timeout 15 "$SCX_GMP" --monitor 1 >/tmp/mon.out 2>&1
echo "monitor_lines=$(grep -c '^SCHED ' /tmp/mon.out)"
hotplug_seq0=$(cat /sys/kernel/sched_ext/hotplug_seq)
echo "after_offline=$(hotplug 1 0 90) cpus=$(nproc)"
echo "after_online=$(hotplug 1 1 90) cpus=$(nproc)"
# Then CPU 1 off and on 10 times more, a second each way, beside wakeups
# that look for idle CPUs (a shell loop of short sleeps) and stress-ng's
# CPU, pipe, fork and futex load, and 25 s after (RCU reports a stall after
# 21 s): a task left on the way in a CPU that went offline shows as a
# reload or an ejection (user mode's once did in 2 cycles, and once in 7;
# under this load, its tasks were once stranded in the DSQ of a CPU back
# online, README "Hotplug").
seq0=$(cat /sys/kernel/sched_ext/enable_seq)
cpu1_cycles_under_load 10 25
# The kernel's count of hotplug events while the scheduler was loaded: it
# saw each one (procresize).
echo "hotplug_events=$(($(cat /sys/kernel/sched_ext/hotplug_seq) - hotplug_seq0))"
echo "cycles_state=$(cat $STATE) cycles_reloads=$(($(cat /sys/kernel/sched_ext/enable_seq) - seq0))"
stop_gmp /tmp/gmp.log
echo "after=$(cat $STATE)"
# The systemd unit's command line (dist/scx_gmp.service), as systemd would run
# it: ExecStart with its $SCX_GMP_FLAGS from the defaults file, stopped by
# SIGTERM. The guest has no systemd, so this runs the line itself.
unit=$(dirname "$0")/../../dist/scx_gmp.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
SCX_GMP_FLAGS=$GMP_ARGS
cmd=${exec_start//\/usr\/local\/bin\/scx_gmp/$SCX_GMP}
cmd=${cmd//\$SCX_GMP_FLAGS/$SCX_GMP_FLAGS}
$cmd >/tmp/unit.log 2>&1 &
unit_pid=$!
wait_state enabled 60 && echo "unit_state=$(cat $STATE)"
kill -TERM $unit_pid
wait $unit_pid
echo "unit_exit=$? unit_after=$(wait_state disabled 30 >/dev/null; cat $STATE)"
stop_guard
