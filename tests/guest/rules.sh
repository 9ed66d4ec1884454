# rules.sh SCX_GMP GMP_LOAD [ARGS [FAST_ARGS]]: one phase per Go rule, each
# under a fresh scx_gmp ARGS, printing the workload's result and scx_gmp's
# final counters; then the wakeup paths that skip Go's queues (a sync
# hand-off, a kernel lock, an idle CPU) under scx_gmp FAST_ARGS (default:
# ARGS).
SCX_GMP=$1 GMP_LOAD=$2 GMP_ARGS=${3:-}
FAST_ARGS=${4-$GMP_ARGS}
. "$(dirname "$0")/lib.sh"
phase() {
	local name=$1 args=$2
	shift 2
	echo "== phase $name"
	start_gmp "/tmp/$name.log" $args || exit 1
	"$@"
	stop_gmp "/tmp/$name.log"
}
phase fanout "$GMP_ARGS" "$GMP_LOAD" fanout --threads 1000 --busy-ms 20 --gate
phase spin "$GMP_ARGS" "$GMP_LOAD" spin --threads $(($(nproc) * 2)) --secs 3
# One CPU-bound thread per CPU: each gets a CPU of its own.
phase spread "$GMP_ARGS" "$GMP_LOAD" spin --threads "$(nproc)" --secs 3
phase pingpong "$GMP_ARGS" "$GMP_LOAD" pingpong --rounds 5000
# A task that only sleeps, beside a SCHED_IDLE hog on every CPU: each of
# its timer wakeups preempts the hog on its CPU (idle_yields()); by default
# (not --go-ready) user mode runs it there without the agent
# (run_beside_idle()), and on an idle CPU ahead of the hogs the agent
# committed to it (only_idle_queued()).
batch() {
	local hogs
	chrt -i 0 stress-ng --cpu "$(nproc)" -t 8 >/dev/null 2>&1 &
	hogs=$!
	sleep 1
	echo "batch_gap_ms=$(longest_gap 4)"
	wait "$hogs"
}
phase batch "$FAST_ARGS" batch
# Threads queueing for their process's memory-map lock while a CPU hog
# runs on every CPU: by default (not --go-handoff) user mode runs a wakeup
# from that lock next on the waker's CPU without the agent (lock_handoff()).
locks() {
	local hogs
	stress-ng --cpu "$(nproc)" -t 8 >/dev/null 2>&1 &
	hogs=$!
	sleep 1
	"$GMP_LOAD" maplock --threads $((2 * $(nproc))) --secs 3
	wait "$hogs"
}
phase locks "$FAST_ARGS" locks
# User mode's bound on those hand-offs, cut from Go's 61 to 1 between two
# dispatch() calls on a CPU (a testing option): the wakeups past it go
# through the agent, and the threads still finish.
case " $FAST_ARGS " in
*" --mode user "*) phase streak "$FAST_ARGS --debug-lock-streak 1" locks ;;
esac
# A pipe ping-pong between two threads (sync wakeups within one process,
# which hand off: across processes BPF mode prefers an idle CPU) and a
# futex one with idle CPUs.
phase wakeups "$FAST_ARGS" sh -c "perf bench sched pipe -T -l 5000 | grep usecs/op && $GMP_LOAD pingpong --rounds 2000"
