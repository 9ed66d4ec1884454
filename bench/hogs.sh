# Sourced by bench/guest.sh and bench/waits.sh, in the guest: CPU hogs for
# the rows that measure a task beside a busy machine.

# start_hogs POLICY N: start N stress-ng CPU hogs under chrt POLICY (-o for
# SCHED_OTHER, -i for SCHED_IDLE), and return once every hog has run
# (HOGS_PID: stress-ng's parent). stress-ng takes over a second under TCG
# to fork its workers, and a 100 ms ping-pong started at once ran beside a
# machine that was mostly idle. Returns 1 if stress-ng exits or its hogs do
# not all run within 60 s. Run it in a writable directory (stress-ng's).
start_hogs() {
	local policy=$1 n=$2 i c ran kids st
	chrt "$policy" 0 stress-ng --cpu "$n" -t 600 >/dev/null 2>&1 &
	HOGS_PID=$!
	# Builtins only: a poll that forked would load the CPUs it waits on.
	for i in $(seq 600); do
		ran=0 kids=()
		read -r -a kids <"/proc/$HOGS_PID/task/$HOGS_PID/children" 2>/dev/null
		for c in "${kids[@]}"; do
			# utime (field 14): the hog has been on a CPU for a tick.
			read -r -a st <"/proc/$c/stat" 2>/dev/null && [ "${st[13]:-0}" -gt 0 ] && ran=$((ran + 1))
		done
		[ "$ran" -ge "$n" ] && return 0
		if ! kill -0 "$HOGS_PID" 2>/dev/null; then
			echo "bench: stress-ng exited before its $n hogs ran (it needs a writable working directory)" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "bench: $n stress-ng hogs did not all run within 60 s" >&2
	stop_hogs
	return 1
}

# stop_hogs: stop the hogs start_hogs started, if any.
stop_hogs() {
	[ -n "${HOGS_PID:-}" ] || return 0
	kill "$HOGS_PID" 2>/dev/null
	wait "$HOGS_PID" 2>/dev/null
}
