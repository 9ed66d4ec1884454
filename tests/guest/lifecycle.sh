# lifecycle.sh SCX_GMP [ARGS]: load, identify, refuse a second instance and a
# non-root user, be watched with --monitor, come back after CPU hotplug
# (the kernel asks for a restart), unload on SIGTERM.
SCX_GMP=$1
GMP_ARGS=${2:-}
. "$(dirname "$0")/lib.sh"
echo "before=$(cat $STATE)"
setpriv --reuid=65534 --regid=65534 --clear-groups "$SCX_GMP" $GMP_ARGS 2>/tmp/nonroot.err
echo "nonroot_exit=$? nonroot_err=$(cat /tmp/nonroot.err)"
start_gmp /tmp/gmp.log $GMP_ARGS || exit 1
echo "state=$(cat $STATE) ops=$(cat /sys/kernel/sched_ext/root/ops)"
"$SCX_GMP" $GMP_ARGS 2>/tmp/second.err
echo "second_exit=$? second_err=$(cat /tmp/second.err)"
"$SCX_GMP" $GMP_ARGS --slice-us 5 2>/tmp/badarg.err
echo "badarg_exit=$? badarg_err=$(head -1 /tmp/badarg.err)"
timeout 15 "$SCX_GMP" --monitor 1 >/tmp/mon.out 2>&1
echo "monitor_lines=$(grep -c '^SCHED ' /tmp/mon.out)"
seq0=$(cat /sys/kernel/sched_ext/enable_seq)
echo 0 >/sys/devices/system/cpu/cpu1/online
wait_enables $((seq0 + 1)) 90 && echo "restarted_after_offline=yes cpus=$(nproc)"
echo 1 >/sys/devices/system/cpu/cpu1/online
wait_enables $((seq0 + 2)) 90 && echo "restarted_after_online=yes cpus=$(nproc)"
stop_gmp /tmp/gmp.log
echo "after=$(cat $STATE)"
