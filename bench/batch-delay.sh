# Guest side of bench/batch-delay: OUT BIN ROUNDS BASE SCHED...
out=$1 bin=$2 rounds=$3 base=$4
shift 4
n=$(nproc)
for r in $(seq "$rounds"); do
	for s in "$@"; do
		d=$out/cyclictest-$s-$r
		mkdir -p "$d"
		BASE_BIN=$base bash "$(dirname "$0")/waits.sh" "$d" "$bin" "$s" idle \
			cyclictest -m -q -t "$n" -i 1000 -D 8 >/dev/null || { echo "batch-delay: cyclictest under $s failed" >&2; exit 1; }
		d=$out/pingpong-$s-$r
		mkdir -p "$d"
		BASE_BIN=$base bash "$(dirname "$0")/waits.sh" "$d" "$bin" "$s" idle \
			"$bin/examples/gmp-load" pingpong --rounds 5000 >/dev/null || { echo "batch-delay: pingpong under $s failed" >&2; exit 1; }
		echo "round $r: $s done"
	done
done
