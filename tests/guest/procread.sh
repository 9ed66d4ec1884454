# procread.sh SCX_GMP [ARGS]: every task's /proc/<pid>/stat read in a loop
# (what ps, top and pgrep do) beside a CPU hog on every CPU, for longer than
# the kernel's RCU stall timeout (21 s). Readers preempted while they build
# a kworker's name hold a kernel mutex that an agent reading the same file
# would wait for: a deadlock that the kernel ends by ejecting the scheduler.
SCX_GMP=$1
GMP_ARGS=${2:-}
SECS=40
. "$(dirname "$0")/lib.sh"
n=$(nproc)
start_gmp /tmp/gmp.log $GMP_ARGS || exit 1
stress-ng --cpu "$n" -t "$SECS" >/dev/null 2>&1 &
hogs=$!
readers=()
for _ in $(seq $((2 * n))); do
	(
		end=$((SECONDS + SECS))
		while [ "$SECONDS" -lt "$end" ]; do cat /proc/[0-9]*/stat >/dev/null 2>&1; done
	) &
	readers+=($!)
done
reads_ok=yes
for _ in $(seq "$SECS"); do
	sleep 1
	[ "$(cat $STATE)" = enabled ] || { reads_ok=no; break; }
done
kill "$hogs" "${readers[@]}" 2>/dev/null
wait "$hogs" "${readers[@]}" 2>/dev/null
echo "state_after_reads=$(cat $STATE) held=$reads_ok"
stop_gmp /tmp/gmp.log
dmesg | grep 'sched_ext:' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
