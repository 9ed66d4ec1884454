# bench/hotplug.sh A B [ROUNDS] [CYCLES]: in the guest (vm/run --cpus 4 --
# bash bench/hotplug.sh A B), compare two scx_gmp builds across CPU hotplug.
# Round by round, A then B, each is loaded beside stress-ng's CPU, pipe,
# fork and futex load and a loop of short sleeps while CPU 1 goes off and on
# CYCLES times (default 20), a second each way. One line per run: the
# agent's exit code, its released and procresize counters and longest wait
# (max_wait_us), and the kernel's count of moves to an inactive CPU's local
# DSQ that it turned away (SCX_EV_DISPATCH_LOCAL_DSQ_OFFLINE, since the
# load: the events file exists only while a scheduler is loaded). With
# HOTPLUG_TRACE=1 each run also records a trace (--trace), and B's checker
# adds its summary: violations, the longest wait with the put and the pick
# it came from, and how long the tasks that the CPU going offline gave to
# the global queue waited to run (procresize).
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
	echo "usage: bench/hotplug.sh A B [ROUNDS] [CYCLES]: A and B are scx_gmp binaries, in a guest of vm/run" >&2
	exit 2
fi
[ -e /sys/kernel/sched_ext/state ] || { echo "bench/hotplug.sh: no sched_ext here: run it in a guest of vm/run" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2") ROUNDS=${3:-3} CYCLES=${4:-20}
. "$(dirname "$0")/../tests/guest/lib.sh"
EVENTS=/sys/kernel/sched_ext/root/events
trace=()
[ "${HOTPLUG_TRACE:-0}" = 1 ] && trace=(--trace /tmp/hotplug.trace)
for round in $(seq "$ROUNDS"); do
	for which in A B; do
		if [ $which = A ]; then SCX_GMP=$A; else SCX_GMP=$B; fi
		rm -f /tmp/hotplug.trace
		start_gmp /tmp/gmp.log "${trace[@]}" || exit 1
		cpu1_cycles_under_load "$CYCLES" 5
		turned=$(awk '/DISPATCH_LOCAL_DSQ_OFFLINE/ {print $NF}' $EVENTS 2>/dev/null)
		stop_gmp /tmp/gmp.log >/tmp/stop.out
		counts=$(sed -n 's/^stats_json=//p' /tmp/stop.out | python3 -c 'import json, sys
d = json.load(sys.stdin)
print("released=%s procresize=%s max_wait_us=%s" % (d["released"], d["procresize"], d["max_wait_us"]))' 2>/dev/null)
		echo "round=$round build=$which exit=$(sed -n 's/^gmp_exit=//p' /tmp/stop.out) ${counts:-stats=missing} turned_away=${turned:-?}"
		if [ ${#trace[@]} -gt 0 ]; then
			"$B" check /tmp/hotplug.trace 2>&1 | grep -E "^checked|^released|^worst" | sed 's/^/  /'
		fi
	done
done
