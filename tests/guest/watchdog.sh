# watchdog.sh SCX_GMP GMP_WATCH [ARGS]: a task the scheduler never runs
# (the hidden --debug-stall-comm) must make the kernel's watchdog eject it,
# and scx_gmp must print the kernel's reason and exit 1. SCX_TIMEOUT_MS
# shortens the watchdog to 3 s for the test. The kernel's dump carries our
# own lines, a "gmp: cpuN ..." line with each CPU's queues. The lost-task
# watcher, GMP_WATCH, must name the stalled task before the watchdog fires:
# it is the check the soak relies on, so here it is shown to fail.
SCX_GMP=$1 GMP_WATCH=$2 GMP_ARGS=${3:-}
. "$(dirname "$0")/lib.sh"
cp "$(command -v sleep)" /tmp/gmp-stallme
export SCX_TIMEOUT_MS=3000
start_gmp /tmp/gmp.log $GMP_ARGS --debug-stall-comm gmp-stallme || exit 1
"$GMP_WATCH" --secs 6 --interval-ms 250 --runnable-ms 1000 >/tmp/watch.out 2>&1 &
watch=$!
sleep 0.5
/tmp/gmp-stallme 0.2 &
stalled=$!
wait "$GMP_PID"
echo "gmp_exit=$?"
echo "state_after=$(wait_state disabled 30 >/dev/null; cat $STATE)"
wait "$stalled" && echo "stalled_task_finished=yes"
wait "$watch"
echo "watch_exit=$? $(tail -n 1 /tmp/watch.out)"
grep '^lost: ' /tmp/watch.out
grep -m1 'error' /tmp/gmp.log | sed 's/^/reason: /'
echo "dump_cpus=$(grep -c '^gmp: cpu[0-9]' /tmp/gmp.log) nproc=$(nproc)"
