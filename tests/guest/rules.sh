# rules.sh SCX_GMP GMP_LOAD [ARGS]: one phase per Go rule, each under a fresh
# scx_gmp, printing the workload's result and scx_gmp's final counters.
SCX_GMP=$1 GMP_LOAD=$2 GMP_ARGS=${3:-}
. "$(dirname "$0")/lib.sh"
phase() {
	local name=$1
	shift
	echo "== phase $name"
	start_gmp "/tmp/$name.log" $GMP_ARGS || exit 1
	"$GMP_LOAD" "$@"
	stop_gmp "/tmp/$name.log"
}
phase fanout fanout --threads 1000 --busy-ms 20 --gate
phase spin spin --threads $(($(nproc) * 2)) --secs 3
phase pingpong pingpong --rounds 5000
