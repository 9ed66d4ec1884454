# Sourced by bench/waits.sh and tests/guest/idlewait.sh: the kernel's
# scheduler events in ftrace's buffer, for bench/waits.py.
FTRACE=/sys/kernel/tracing

# ftrace_start EVENT...: mount tracefs if need be, empty a 40 MB-a-CPU
# buffer, enable the sched EVENTs (sched_switch, sched_wakeup, ...), and
# start tracing.
ftrace_start() {
	mountpoint -q $FTRACE || mount -t tracefs none $FTRACE || return 1
	echo 40000 >$FTRACE/buffer_size_kb
	echo >$FTRACE/trace
	local e
	for e in "$@"; do
		echo 1 >$FTRACE/events/sched/"$e"/enable || return 1
	done
	echo 1 >$FTRACE/tracing_on
}

# ftrace_stop FILE: stop tracing and write the buffer to FILE as text.
ftrace_stop() {
	echo 0 >$FTRACE/tracing_on
	cat $FTRACE/trace >"$1"
}
