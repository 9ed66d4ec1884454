# survival.sh SCX_GMP [ARGS]: the scx CI survival run - stress-ng with affinity
# churn under scx_gmp - then check that no ejection happened.
SCX_GMP=$1
GMP_ARGS=${2:-}
. "$(dirname "$0")/lib.sh"
n=$(nproc)
start_gmp /tmp/gmp.log $GMP_ARGS || exit 1
stress-ng -t 30 --aggressive -M -c "$n" -f "$n" --affinity 1 --affinity-delay 1 \
	--affinity-pin >/tmp/stress.log 2>&1
echo "stress_exit=$?"
echo "state_after_stress=$(cat $STATE)"
stop_gmp /tmp/gmp.log
dmesg | grep 'sched_ext:' | sed 's/^\[[ 0-9.]*\] /dmesg: /'
