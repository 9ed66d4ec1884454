# trace.sh SCX_GMP GMP_LOAD: run each workload under `scx_gmp --trace` and
# check its trace with `scx_gmp check`; then check a copy of one trace with a
# single decision altered, which the checker must refuse. GMP_ARGS, when
# set, are more options for scx_gmp.
SCX_GMP=$1 GMP_LOAD=$2
. "$(dirname "$0")/lib.sh"
n=$(nproc)
traced() {
	local name=$1
	shift
	echo "== trace $name"
	# shellcheck disable=SC2086 # GMP_ARGS are words
	start_gmp "/tmp/$name.log" --trace "/tmp/$name.trace" ${GMP_ARGS:-} || exit 1
	"$@" >"/tmp/$name.out" 2>&1
	echo "workload_exit=$?"
	# Its last line (gmp-load's summary), to tell a run that did less work.
	echo "workload_out=$(tail -n 1 "/tmp/$name.out" | cut -c1-300)"
	stop_gmp "/tmp/$name.log"
	check_trace "/tmp/$name.trace"
	# The agent's own records, and the trace's span: it drains the ring on
	# a clock, about 20 times a second, not once per record.
	echo "agent_records=$(grep -c " pid=$GMP_PID " "/tmp/$name.trace")"
	awk '!/^#/ && NF { if (!t0) t0 = $1; t1 = $1 }
		END { printf "trace_ms=%d\n", (t1 - t0) / 1e6 }' "/tmp/$name.trace"
}
traced fanout "$GMP_LOAD" fanout --threads 1000 --busy-ms 20 --gate
traced spin "$GMP_LOAD" spin --threads $((n * 2)) --secs 3
# Slices expire to the GRQ while every CPU is busy: wakep() wakes none, and
# each such put kicks the other CPUs instead (kick.grq); with
# --go-grq-put, Go's globrunqput, none does.
echo "spin_grq_kicks=$(awk '$2 == "kick.grq"' /tmp/spin.trace | wc -l)"
GMP_ARGS="--go-grq-put" traced gospin "$GMP_LOAD" spin --threads $((n * 2)) --secs 3
echo "gospin_grq_kicks=$(awk '$2 == "kick.grq"' /tmp/gospin.trace | wc -l)"
traced pingpong "$GMP_LOAD" pingpong --rounds 5000
# Wakeups of a thread still leaving its CPU, which the kernel queues there
# without select_cpu() (why=oncpu).
echo "pingpong_oncpu=$(grep -c ' why=oncpu ' /tmp/pingpong.trace)"
# Go's idle stack: each wakep() of the ping-pong wakes the CPU that idled
# last (the checker counts those among its wakeps).
GMP_ARGS="--go-pidle" traced pidle "$GMP_LOAD" pingpong --rounds 5000
traced stress stress-ng -t 20 --aggressive -M -c "$n" -f "$n" --affinity 1 \
	--affinity-delay 1 --affinity-pin
# timers_beside_hogs NAME: cyclictest's timer wakeups beside a CPU hog on
# every CPU, traced as NAME; NAME_puts= counts the preempted tasks' puts
# (why=preempt), which must keep to the rules too, and NAME_at_once= the
# wakeups run at once in their place (pick.preempt), which the checker holds
# to the preemption knobs in the trace's header.
timers_beside_hogs() {
	traced "$1" sh -c "stress-ng --cpu $n -t 6 >/dev/null 2>&1 &
	cyclictest -m -q -t $n -i 1000 -D 5 >/dev/null; wait"
	echo "$1_puts=$(grep -c ' why=preempt ' "/tmp/$1.trace")"
	echo "$1_at_once=$(grep -c ' pick[.]preempt ' "/tmp/$1.trace")"
}
# With wakeup preemption for every task; under the defaults, where a timer
# wakeup preempts a CPU hog of another process (--cross-process-preempt-us);
# and with 0, Go's rule, where none is.
GMP_ARGS="--wakeup-preempt-us 250" timers_beside_hogs preempt
timers_beside_hogs xpreempt
GMP_ARGS="--cross-process-preempt-us 0" timers_beside_hogs gopreempt
# longest_wait NAME TRACE HOGS: the longest waits from a put to the run, in
# ms, of the SCHED_IDLE hogs whose pids are in the file HOGS
# (NAME_hog_wait_ms=), and from a put on the GRQ of the other tasks
# (NAME_grq_wait_ms=).
longest_wait() {
	awk -v n="$1" 'NR == FNR { hog[$1] = 1; next }
		$1 ~ /^[0-9]+$/ { split($5, f, "="); pid = f[2] }
		$2 ~ /^put[.]/ { at[pid] = $1; grq[pid] = $2 == "put.grq" }
		$2 ~ /^run[.]/ && (pid in at) {
			w = $1 - at[pid]
			if (pid in hog) { if (w > h) h = w }
			else if (grq[pid] && w > g) g = w
			delete at[pid]
		}
		END { printf "%s_hogs=%d %s_hog_wait_ms=%d %s_grq_wait_ms=%d\n",
			n, length(hog), n, h / 1e6, n, g / 1e6 }' "$3" "$2"
}
# Timer wakeups beside a SCHED_IDLE hog on every CPU: the hogs, preempted
# by each wakeup, never leave the LRQs empty, so a task whose slice ran out
# went to the GRQ and waited there for a CPU's 61st schedtick, 34 to 86 ms.
# A CPU runs a task that is not a hog before one, from its LRQ or from the
# GRQ (idle_last()).
traced idle sh -c "chrt -i 0 stress-ng --cpu $n -t 7 >/dev/null 2>&1 &
	sleep 1; pgrep stress-ng >/tmp/hogs.pids
	cyclictest -m -q -t $n -i 1000 -D 5 >/dev/null; wait"
echo "before_idle=$(awk '$2 ~ /^pick[.](lrq|grq)-before-idle$/' /tmp/idle.trace | wc -l)"
longest_wait idle /tmp/idle.trace /tmp/hogs.pids
# The same hogs beside twice as many CPU-bound threads as CPUs: their
# slices run out to the GRQ, which never empties, so a hog passed over for
# them would never run; one queued 100 ms runs in Go's order.
traced idlestarve sh -c "chrt -i 0 stress-ng --cpu $n -t 6 >/dev/null 2>&1 &
	sleep 1; pgrep stress-ng >/tmp/hogs.pids
	$GMP_LOAD spin --threads $((n * 2)) --secs 4; wait"
longest_wait starve /tmp/idlestarve.trace /tmp/hogs.pids
# A delayed wakep(): request workers wake one another (a mutex hand-off)
# and run on, so the timer must wake an idle CPU for a woken task that
# still waits in their runnext (wakep-late).
GMP_ARGS="--wakep-delay-us 200" traced wakepdelay "$GMP_LOAD" request --workers $((4 * n)) \
	--load 0.3 --secs 4
echo "wakep_late=$(grep -o 'wakep-late=[0-9]*' /tmp/wakepdelay.log | tail -n 1 | cut -d= -f2)"
# The same delay only while over 100% of kicks are slow, which they never
# are: every wakeup's wakep() is at once, as Go's, and none is late.
GMP_ARGS="--wakep-delay-us 200 --wakep-delay-slow-pct 100" traced wakepfast "$GMP_LOAD" request \
	--workers $((4 * n)) --load 0.3 --secs 3
echo "wakepfast_late=$(grep -o 'wakep-late=[0-9]*' /tmp/wakepfast.log | tail -n 1 | cut -d= -f2)"
echo "wakepfast_kicks=$(grep -o 'kick answered=[0-9]*' /tmp/wakepfast.log | tail -n 1 | cut -d= -f2)"
# puts PREFIX TRACE: print PREFIXidle_puts=, the wakeups TRACE put on idle
# CPUs directly (put.idle), and PREFIXwake_puts=, all its wakeups' puts,
# wherever they went: how many wakeups a run had depends on how much of the
# host the guest got.
puts() {
	awk -v p="$1" '$2 == "put.idle" { idle++ } $2 ~ /^put\./ && $3 == "why=wake" { wakes++ }
		END { printf "%sidle_puts=%d %swake_puts=%d\n", p, idle, p, wakes }' "$2"
}
# The same load's wakeups on idle CPUs without an option that makes them:
# only those into another process (the agent's stats, the shell).
puts base_ /tmp/wakepdelay.trace
# Wakeups on idle CPUs: the dispatcher wakes idle workers, which must run
# on idle CPUs directly (put.idle), each one accounted for by the checker.
GMP_ARGS="--ready-idle" traced readyidle "$GMP_LOAD" request --workers $((4 * n)) \
	--load 0.3 --secs 3
puts "" /tmp/readyidle.trace
# The same, only while kicks are slow: at 4 vCPUs on 2 host cores some
# kick takes over 1 ms to answer, and with a threshold of 1% a single slow
# one among the last 64 turns it on.
GMP_ARGS="--ready-idle-slow-pct 1" traced slowkick "$GMP_LOAD" request --workers $((4 * n)) \
	--load 0.3 --secs 3
echo "slowkick_slow=$(grep -o 'wait-us=[0-9]* slow=[0-9]*' /tmp/slowkick.log | tail -n 1 | cut -d= -f3)"
puts slowkick_ /tmp/slowkick.trace
# An LRQ head that waited behind runnext: the dispatcher's bursts push
# woken workers out of its runnext to the LRQ, and with the bound each of
# them runs before the runnext task once it has waited 500 us (lrq-aged),
# which the checker holds to the header's lrq_max_wait_ns.
GMP_ARGS="--lrq-max-wait-us 500" traced lrqaged "$GMP_LOAD" request --workers $((4 * n)) \
	--load 0.3 --secs 3
echo "lrq_aged=$(awk '$2 == "pick.lrq-aged"' /tmp/lrqaged.trace | wc -l)"
# A real-time waker: a SCHED_FIFO shell writes to a pipe that a task of
# ours reads. The shell holds its CPU as a syscall holds Go's P, but the
# kernel says so (cpu_release) only when it preempts one of our tasks, and
# this one mostly starts on an idle CPU. So no wakeup that the shell makes
# may put the reader on the shell's own CPU, read from the kernel's
# sched_waking (the waker and its CPU) and sched_wakeup (the CPU it was
# queued on) events: rtwaker_rt_wakes= the shell's wakeups of the reader,
# rtwaker_on_rt_cpu= those queued on the shell's CPU. Only wakeups of a
# reader that slept count: one that the shell preempted between setting
# its sleeping state and calling schedule() is still queued on the
# shell's CPU, and the kernel wakes it there without select_cpu()
# (ttwu_runnable()); its last switch out (sched_switch) says R+, not S.
# Those are rtwaker_runnable=. --go-cross-process leaves out the idle CPUs
# that a wakeup into another process goes to.
rt_waker() {
	chrt -f 10 sh -c 'echo $$ >/tmp/writer.pid
		i=0; while [ $i -lt 200 ]; do echo x; sleep 0.002; i=$((i + 1)); done' |
		sh -c 'echo $$ >/tmp/reader.pid; exec cat >/dev/null'
}
T=/sys/kernel/tracing
[ -d $T/events/sched ] || mount -t tracefs nodev $T
for ev in sched_waking sched_wakeup; do
	echo 'comm == "cat"' >$T/events/sched/$ev/filter
	echo 1 >$T/events/sched/$ev/enable
done
echo 'prev_comm == "cat"' >$T/events/sched/sched_switch/filter
echo 1 >$T/events/sched/sched_switch/enable
echo >$T/trace
GMP_ARGS="--go-cross-process" traced rtwaker rt_waker
echo 0 >$T/events/sched/enable
# Lines: "WAKER-PID [CPU] FLAGS TS: sched_waking: comm=cat pid=N ...", then
# "... sched_wakeup: comm=cat pid=N prio=P target_cpu=C", and the reader's
# "... sched_switch: prev_comm=cat prev_pid=N prev_prio=P prev_state=S ...".
# A waking in an interrupt (h or s in FLAGS) is not the shell's own. Each
# wakeup on the shell's CPU is printed with the 5 events before it.
awk -v w="sh-$(cat /tmp/writer.pid)" -v r="$(cat /tmp/reader.pid)" '
	/^[^#]/ { last[n++ % 6] = $0 }
	/sched_switch:/ && $0 ~ " prev_pid=" r " " {
		slept = $0 ~ / prev_state=[SD] /
		next
	}
	$0 !~ " pid=" r " " { next }
	/sched_waking:/ {
		waker = ($1 == w && $3 !~ /[hs]/) ? $2 : ""
		if (waker != "" && !slept) { runnable++; waker = "" }
		slept = 0
		next
	}
	/sched_wakeup:/ && waker != "" {
		split($NF, t, "="); rt++
		if ("[" sprintf("%03d", t[2]) "]" == waker) {
			on++
			for (i = n - 6; i < n; i++) if (i >= 0) print "rtwaker_hit: " last[i % 6]
		}
		waker = ""
	}
	END {
		printf "rtwaker_rt_wakes=%d rtwaker_on_rt_cpu=%d rtwaker_runnable=%d\n",
			rt, on, runnable
	}' $T/trace

# One decision altered: the first steal claims to have wanted one task more.
awk '!done && $2 == "pick.steal" {
	for (i = 3; i <= NF; i++) if ($i ~ /^want=/) { split($i, a, "="); $i = "want=" (a[2] + 1) }
	done = 1
} { print }' /tmp/fanout.trace >/tmp/altered.trace
"$SCX_GMP" check /tmp/altered.trace >/tmp/altered.check 2>&1
echo "altered_exit=$?"
grep -m 1 '^violation' /tmp/altered.check
# A pipe between two processes, by default: each sync wakeup into the other
# process runs on an idle CPU (put.idle) when one is, and is handed off on
# the waker's CPU otherwise.
traced crossproc perf bench sched pipe -l 5000
echo "crossproc_idle_puts=$(awk '$2 == "put.idle"' /tmp/crossproc.trace | wc -l)"
