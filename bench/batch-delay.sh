# Guest side of bench/batch-delay: OUT BIN ROUNDS BASE SCHED...
out=$1 bin=$2 rounds=$3 base=$4
shift 4
n=$(nproc)

# traced NAME SCHED CMD...: CMD under SCHED beside the SCHED_IDLE hogs,
# traced into $out/NAME-SCHED-$r (bench/waits.sh).
traced() {
	local name=$1 s=$2 d
	shift 2
	d=$out/$name-$s-$r
	mkdir -p "$d"
	BASE_BIN=$base bash "$(dirname "$0")/waits.sh" "$d" "$bin" "$s" idle "$@" >/dev/null ||
		{ echo "batch-delay: $name under $s failed" >&2; exit 1; }
}

for r in $(seq "$rounds"); do
	for s in "$@"; do
		traced cyclictest "$s" cyclictest -m -q -t "$n" -i 1000 -D 8
		traced pingpong "$s" "$bin/examples/gmp-load" pingpong --rounds 5000
		echo "round $r: $s done"
	done
done
