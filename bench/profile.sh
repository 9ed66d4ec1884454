# Guest side of a whole-system profile, run with vm/run:
#   vm/run --cpus 4 --rwdir DIR -- bash bench/profile.sh DIR BIN ROUNDS SCHEDS CMD...
# e.g. bash bench/profile.sh /tmp/p $PWD/target/release 2 eevdf,gmp \
#        $PWD/target/release/examples/gmp-load forkjoin --depth 10 --leaf-us 2000
# For each round and each scheduler in SCHEDS (eevdf, or gmp[+OPTION...] as
# in bench/run: scx_gmp from BIN; bench/sched.sh starts it), runs CMD under `perf record -a -g`
# (cpu-clock, 499 Hz) and writes DIR/r<round>-<sched>.txt (the hottest
# symbols) and DIR/g<round>-<sched>.txt (their callers), and appends CMD's
# output to DIR/out.txt. Emulated timings compare only within one boot.
out=$1 bin=$2 rounds=$3 scheds=${4//,/ } peer_bin=
shift 4
. "$(dirname "${BASH_SOURCE[0]}")/sched.sh"
cd /tmp || exit 1
sysctl -qw kernel.perf_event_paranoid=-1 kernel.kptr_restrict=0
for round in $(seq "$rounds"); do
	for s in $scheds; do
		start_sched "$s" || exit 1
		[ -z "$SCHED_PID" ] || sleep 2
		perf record -q -a -g -e cpu-clock -F 499 -o /tmp/perf.data -- "$@" >/tmp/cmd.txt 2>&1
		echo "round=$round sched=$s $(tr '\n' ' ' </tmp/cmd.txt)" | tee -a "$out/out.txt"
		perf report -i /tmp/perf.data --no-children --sort sym --stdio -g none 2>/dev/null |
			grep -v '^#' | grep -v '^$' | head -25 >"$out/r$round-$s.txt"
		syms=$(awk '$2 == "[k]" || $2 == "[.]" {print $3}' "$out/r$round-$s.txt" | head -6 | paste -sd,)
		perf report -i /tmp/perf.data --no-children --stdio -g caller,2,callee,function,percent \
			--symbols="$syms" 2>/dev/null | grep -v '^#' | grep -v '^$' | head -200 >"$out/g$round-$s.txt"
		end_sched scx_gmp "in round $round" || exit 1
	done
done
