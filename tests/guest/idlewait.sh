# idlewait.sh SCX_GMP GMP_LOAD WAITS_PY SECS RT [ARGS]: the light request load
# (a dispatcher waking 4 workers per CPU at 0.3 of the machine's capacity)
# for SECS under scx_gmp ARGS, with the kernel's wakeup and switch events in
# ftrace's buffer; then WAITS_PY (bench/waits.py) lists every wakeup of the
# load's threads that waited over 50 ms while a CPU idled for half of that
# wait or more, and its exit code is the script's. At this load the longest
# wait of any task is some 20 ms; a task left in an idle CPU's queue (user
# mode's idle-kick race: a decision drained in dispatch() for a CPU whose
# task then blocked) waited 104 to 330 ms.
#
# With RT=rt, cyclictest's SCHED_FIFO timer threads, one per CPU every
# 3 ms, run beside the load: each preempts whatever runs on its CPU, the
# user-mode agent among them. The agent put back in the middle of a pass
# waited for the timer's look, and the tasks it held with it: requests
# waited 1 to 3.6 s (docs/reliability.md).
SCX_GMP=$1 GMP_LOAD=$2 WAITS_PY=$3 SECS=$4 RT=$5 GMP_ARGS=${6:-}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$WAITS_PY")/ftrace.sh"
# shellcheck disable=SC2086 # GMP_ARGS are words
start_gmp /tmp/idlewait.log $GMP_ARGS || exit 1
ftrace_start sched_switch sched_wakeup sched_wakeup_new || exit 1
ct=
if [ "$RT" = rt ]; then
	cyclictest -m -q -p 50 -t "$(nproc)" -i 3000 -D "$((SECS + 2))" >/dev/null &
	ct=$!
fi
"$GMP_LOAD" request --workers $((4 * $(nproc))) --load 0.3 --secs "$SECS"
echo "workload_exit=$?"
if [ -n "$ct" ]; then
	wait "$ct"
	echo "cyclictest_exit=$?"
fi
ftrace_stop /tmp/idlewait.trace
echo "trace_lost=$(grep -c 'LOST' /tmp/idlewait.trace)"
stop_gmp /tmp/idlewait.log
dmesg | grep 'sched_ext:' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
python3 "$WAITS_PY" /tmp/idlewait.trace --over-ms 20 --show 2 --stranded-ms 50
echo "waits_exit=$?"
