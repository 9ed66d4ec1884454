# rthold.sh SCX_GMP [ARGS]: real-time tasks hold every CPU for 10 s while
# sched_ext tasks wait: stress-ng's mutex stressor, whose threads run at
# SCHED_FIFO and which ends only when its parent, a sched_ext task, signals
# it. sched_ext tasks then run only within the kernel's deadline server
# share, on the CPUs where one of them is queued. Under user mode those
# servers once stopped for good (a server pick that found no task stops the
# server while tasks stay counted on its CPU): the stressor never ended, RCU
# stalled, and the kernel ejected the scheduler (or hung ejecting it).
# Then a real-time hog holds one CPU under a CPU-bound load: handoffp.
SCX_GMP=$1
GMP_ARGS=${2:-}
. "$(dirname "$0")/lib.sh"
start_gmp /tmp/gmp.log $GMP_ARGS || exit 1
start=$SECONDS
stress-ng --mutex "$(nproc)" -t 10 >/tmp/stress.log 2>&1
rc=$?
echo "stress_exit=$rc stress_secs=$((SECONDS - start))"
[ "$rc" = 0 ] || grep -iE 'fail|error|abort' /tmp/stress.log | head -n 5 | sed 's/^/stress: /'
echo "state_after_stress=$(cat $STATE)"
# handoffp: a real-time hog holds CPU 1 for 3 s while CPU-bound sched_ext
# tasks queue on every CPU. Once the hog has held it for a slice, the held
# CPU's queues go to the global queue for the other CPUs (the retake
# counters grow), instead of waiting the 3 s out.
stats_json stats_before_hold
stress-ng --cpu $((2 * $(nproc))) -t 6 >/dev/null 2>&1 &
load=$!
sleep 1
timeout 3 chrt -f 50 taskset -c 1 sh -c 'while :; do :; done'
wait $load
echo "hold_load_exit=$?"
echo "rcu_stall_warnings=$(dmesg | grep -c 'rcu_preempt detected stalls')"
stop_gmp /tmp/gmp.log
dmesg | grep 'sched_ext:' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
