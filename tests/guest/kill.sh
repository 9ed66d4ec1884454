# kill.sh SCX_GMP GMP_LOAD [ARGS]: kill -9 the agent under load. The kernel
# must fall back to its default scheduler, the running workload must finish,
# no scx_gmp process may be left (user mode's child dies with its parent),
# and a new scx_gmp must load right after.
SCX_GMP=$1 GMP_LOAD=$2 GMP_ARGS=${3:-}
. "$(dirname "$0")/lib.sh"
start_gmp /tmp/gmp.log $GMP_ARGS || exit 1
"$GMP_LOAD" fanout --threads 400 --busy-ms 20 --gate >/tmp/fan.out 2>&1 &
fan=$!
sleep 2
kill -9 "$GMP_PID"
wait "$GMP_PID" 2>/dev/null
wait_state disabled 30 && echo "state_after_kill=$(cat $STATE)"
# Each name on its own: pgrep matches at most 15 characters of a name.
left() { { pgrep -x scx_gmp; pgrep -x scx_gmp-user; } | wc -l; }
for _ in $(seq 50); do [ "$(left)" = 0 ] && break; sleep 0.1; done
echo "left_running=$(left)"
wait "$fan"
echo "fanout_exit=$? $(cat /tmp/fan.out)"
start_gmp /tmp/gmp2.log $GMP_ARGS && echo "reloaded=$(cat $STATE)"
stop_gmp /tmp/gmp2.log
