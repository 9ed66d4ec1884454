# Guest side of vm/demo: scx_gmp with --stats 1 under a Go-shaped fan-out and
# a stress-ng mix, then a clean SIGTERM.
bin=$1 secs=$2
cd /tmp || exit 1
echo "sched_ext: $(cat /sys/kernel/sched_ext/state)"
"$bin/scx_gmp" --stats 1 &
pid=$!
for _ in $(seq 100); do [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] && break; sleep 0.1; done
echo "sched_ext: $(cat /sys/kernel/sched_ext/state), ops $(cat /sys/kernel/sched_ext/root/ops)"
"$bin/examples/gmp-load" fanout --threads 1000 --busy-ms 10 --gate
stress-ng --cpu "$(nproc)" --pipe 2 -t "$secs" --metrics-brief 2>&1 | grep -E 'stressor|cpu |pipe '
kill -TERM "$pid"
wait "$pid"
rc=$?
echo "scx_gmp exited $rc; sched_ext: $(cat /sys/kernel/sched_ext/state)"
exit $rc
