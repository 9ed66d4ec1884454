# statspipe.sh SCX_GMP [ARGS]: scx_gmp --stats 0.1 writing into a pipe that
# nobody reads (a terminal or journald that fell behind), beside a CPU hog
# per CPU. The pipe fills in about 16 s; 30 s in, the scheduler must still be
# enabled, and it must have skipped stats lines rather than wait for a reader
# that only it can run. Then the pipe is drained and scx_gmp stopped.
SCX_GMP=$1
GMP_ARGS=${2:-}
. "$(dirname "$0")/lib.sh"
n=$(nproc)
rm -f /tmp/stats.fifo
mkfifo /tmp/stats.fifo
# Held open read-write: a reader exists, and it never reads.
exec 3<>/tmp/stats.fifo
"$SCX_GMP" $GMP_ARGS --stats 0.1 >/tmp/stats.fifo 2>/tmp/gmp.log &
GMP_PID=$!
wait_state enabled 60 || { cat /tmp/gmp.log; exit 1; }
stress-ng --cpu "$n" -t 30 >/tmp/stress.log 2>&1
echo "stress_exit=$?"
echo "state_while_full=$(cat $STATE)"
# Drain the pipe in the background while scx_gmp stops.
cat <&3 >/tmp/stats.out &
drain=$!
kill -TERM "$GMP_PID"
wait "$GMP_PID"
echo "gmp_exit=$?"
exec 3<&-
sleep 1
kill "$drain" 2>/dev/null
echo "stats_lines=$(grep -c '^SCHED ' /tmp/stats.out)"
sed -n 's/.*stats lines skipped (stdout full): \([0-9]*\).*/stats_skipped=\1/p' /tmp/gmp.log
dmesg | grep 'sched_ext:' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
