# Sourced by bench/guest.sh, bench/profile.sh and bench/waits.sh, in the
# guest, and by bench/run and bench/batch-delay, on the host (uses_base).
# start_sched NAME: start scheduler NAME (eevdf, gmp, gmp-user, bpfland,
# rustland, or a variant gmp+OPTION[+OPTION...]) from $bin (the peers from
# $peer_bin; base and base-user, another build, and their variants
# base+OPTION..., from $base_bin), with its log in /tmp/sched.log; wait until
# sched_ext is on.
state=/sys/kernel/sched_ext/state

# from_base NAME: does scheduler NAME run another build's scx_gmp, from
# $base_bin (base, base-user, or a variant base+OPTION...)?
from_base() {
	case "${1%%+*}" in base | base-user) return 0 ;; esac
	return 1
}

# uses_base "NAMES": does any of the schedulers NAMES run from $base_bin?
uses_base() {
	local s
	for s in $1; do from_base "$s" && return 0; done
	return 1
}

start_sched() { # name -> SCHED_PID (empty for eevdf)
	SCHED_PID=
	case "$1" in
	eevdf) return 0 ;;
	gmp) "$bin/scx_gmp" >/tmp/sched.log 2>&1 & ;;
	gmp-user) "$bin/scx_gmp" --mode user >/tmp/sched.log 2>&1 & ;;
	base) "$base_bin/scx_gmp" >/tmp/sched.log 2>&1 & ;;
	base-user) "$base_bin/scx_gmp" --mode user >/tmp/sched.log 2>&1 & ;;
	bpfland) "$peer_bin/scx_bpfland" >/tmp/sched.log 2>&1 & ;;
	rustland) "$peer_bin/scx_rustland" >/tmp/sched.log 2>&1 & ;;
	gmp+* | gmp-user+* | base+* | base-user+*) # a variant: gmp+go-handoff+slice-us=5000 -> --go-handoff --slice-us=5000
		local opts=() o from=$bin
		case "${1%%+*}" in *-user) opts=(--mode user) ;; esac
		if from_base "$1"; then from=$base_bin; fi
		IFS=+ read -ra o <<<"${1#*+}"
		for o in "${o[@]}"; do opts+=("--$o"); done
		"$from/scx_gmp" "${opts[@]}" >/tmp/sched.log 2>&1 & ;;
	*) echo "bench: unknown scheduler $1" >&2; return 1 ;;
	esac
	SCHED_PID=$!
	for _ in $(seq 300); do
		[ "$(cat $state)" = enabled ] && return 0
		kill -0 "$SCHED_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench: $1 did not start:" >&2
	cat /tmp/sched.log >&2
	return 1
}

# end_sched WHO [WHEN]: stop the scheduler start_sched started (SIGINT) and
# wait for it; if it exited non-zero, say so with its log's tail on stdout
# ("WHO exited N WHEN:") and return 1.
end_sched() {
	[ -n "$SCHED_PID" ] || return 0
	kill -INT "$SCHED_PID"
	wait "$SCHED_PID" && return 0
	echo "$1 exited $?${2:+ $2}:"
	tail /tmp/sched.log
	return 1
}
