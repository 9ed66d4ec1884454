# Guest side of a wakeup-wait trace, run with vm/run:
#   vm/run --cpus 2 --rwdir DIR -- bash bench/waits.sh DIR BIN SCHED HOGS CMD...
# e.g. bash bench/waits.sh /tmp/w $PWD/target/release gmp-user idle \
#        $PWD/target/release/examples/gmp-load pingpong --rounds 1000
# Starts SCHED (as in bench/run: eevdf, gmp, gmp-user, gmp+OPTION...; bench/sched.sh)
# from BIN (base and base-user from $BASE_BIN, the peers from $PEER_BIN), and with HOGS `idle` or `normal` one stress-ng CPU hog per CPU
# under SCHED_IDLE or SCHED_OTHER (`none`: no hogs). Then runs CMD with the
# kernel's wakeup, switch and migration events in ftrace's buffer, and writes
# the buffer to DIR/trace.txt and CMD's output to DIR/out.txt. A scheduler
# built with bpf_printk() or trace_marker writes lands in the same buffer.
# bench/waits.py reads the trace: how long each wakeup waited to run, and
# what the CPUs did meanwhile.
out=$1 bin=$2 sched=$3 hogs=$4 base_bin=${BASE_BIN:-} peer_bin=${PEER_BIN:-}
shift 4
. "$(dirname "${BASH_SOURCE[0]}")/sched.sh"
. "$(dirname "${BASH_SOURCE[0]}")/ftrace.sh"
. "$(dirname "${BASH_SOURCE[0]}")/hogs.sh"
case $hogs in
idle) policy=-i ;;
normal) policy=-o ;;
none) policy= ;;
*) echo "waits.sh: HOGS is idle, normal or none, not '$hogs'" >&2; exit 2 ;;
esac
cd /tmp || exit 1
n=$(nproc)
start_sched "$sched" || exit 1
HOGS_PID=
[ -z "$policy" ] || start_hogs "$policy" "$n" || { end_sched waits.sh; exit 1; }
ftrace_start sched_switch sched_wakeup sched_wakeup_new sched_migrate_task || exit 1
"$@" >"$out/out.txt" 2>&1
rc=$?
ftrace_stop "$out/trace.txt"
stop_hogs
end_sched "waits.sh: $sched" || exit 1
[ -z "$SCHED_PID" ] || cp /tmp/sched.log "$out/sched.log"
cat "$out/out.txt"
exit $rc
