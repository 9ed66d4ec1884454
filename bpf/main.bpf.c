/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_gmp: the Go runtime's G-M-P scheduling policy as a sched_ext scheduler.
 *
 * Each CPU is a Go P with a local run queue (LRQ, a user DSQ, capacity
 * lrq_cap) and a 1-task runnext slot (a vtime DSQ whose head is the newest
 * task); one user DSQ is Go's global run queue (GRQ). Each rule is a function
 * named after its Go counterpart in src/runtime/proc.go; the pure Rust model
 * in src/model.rs has the same names.
 *
 * Two moves sched_ext does not allow in ops.enqueue() (it may only insert the
 * task being enqueued) are done lazily, at the next dispatch of the CPU that
 * owns the queue, or by a thief before it steals from it: the runnext task
 * that a new one displaces (runnext_flush) and the half of a full LRQ that
 * runqputslow moves to the GRQ (runqputslow_flush). Until then a displaced
 * task waits in the runnext DSQ behind the new one, and counts as queued at
 * the LRQ tail.
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "kick.bpf.h"
#include "idle.bpf.h"
#include "process.bpf.h"
#include "timer.bpf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/* Knobs, set by the agent before load; the defaults are Go's (intf.h). */
const volatile u64 slice_ns = (u64)GMP_SLICE_US_DFL * GMP_NSEC_PER_USEC;
const volatile u64 min_slice_ns = (u64)GMP_MIN_SLICE_US_DFL * GMP_NSEC_PER_USEC;
const volatile u64 runnext_grace_ns = (u64)GMP_RUNNEXT_GRACE_US_DFL * GMP_NSEC_PER_USEC;
const volatile u32 lrq_cap = GMP_LRQ_CAP_DFL;
const volatile u32 global_every = GMP_GLOBAL_EVERY_DFL;
const volatile u32 steal_tries = GMP_STEAL_TRIES_DFL;
/* A sync wakeup is handed off as Go's ready() is, not directly (--go-handoff). */
const volatile bool go_handoff;
/* Every wakeup calls wakep(), as Go's ready() does, an idle waker's too (--go-wakep). */
const volatile bool go_wakep;
/* wakep() wakes the CPU that idled last, as Go's pidleget() (--go-pidle). */
const volatile bool go_pidle;
/* A GRQ put whose wakep() woke none kicks the other CPUs (off: --go-grq-put). */
const volatile bool grq_kick;
/* The GRQ head waits at most this long (--global-max-wait-ms); 0: Go's rule only. */
const volatile u64 global_max_wait_ns = (u64)GMP_GLOBAL_MAX_WAIT_MS_DFL * 1000 * 1000;
/* An LRQ head waits at most this long behind runnext (--lrq-max-wait-us); 0: Go's rule. */
const volatile u64 lrq_max_wait_ns = (u64)GMP_LRQ_MAX_WAIT_US_DFL * GMP_NSEC_PER_USEC;
/* A wakeup preempts a task that ran this long (--wakeup-preempt-us); 0: off. */
const volatile u64 wakeup_preempt_ns = (u64)GMP_WAKEUP_PREEMPT_US_DFL * GMP_NSEC_PER_USEC;
/* ... a task of another process (--cross-process-preempt-us); 0: off, Go's rule. */
const volatile u64 cross_preempt_ns = (u64)GMP_CROSS_PREEMPT_US_DFL * GMP_NSEC_PER_USEC;
const volatile u64 wakep_delay_ns = (u64)GMP_WAKEP_DELAY_US_DFL * GMP_NSEC_PER_USEC;
/*
 * ... only while the share of slow kicks is over this, in parts of
 * GMP_KICK_SHARE_ONE (--wakep-delay-slow-pct); 0: whenever wakep_delay_ns is.
 */
const volatile u32 wakep_delay_slow;
/* A SCHED_IDLE task's longest slice (--idle-slice-us); 0: slice_ns, Go's rule. */
const volatile u64 idle_slice_ns = (u64)GMP_IDLE_SLICE_US_DFL * GMP_NSEC_PER_USEC;
/* A running task's wakeup runs at once on an idle CPU, if one is (--ready-idle). */
const volatile bool ready_idle;
/*
 * ... and so does it while the share of slow kicks is over this, in parts of
 * GMP_KICK_SHARE_ONE (--ready-idle-slow-pct); 0: off.
 */
const volatile u32 ready_idle_slow;
/* A wakeup into another process runs at once on an idle CPU (off: --go-cross-process). */
const volatile bool cross_process_idle;
const volatile u32 nr_cpus = 1;				/* gomaxprocs */
const volatile u32 nr_coprimes = 1;			/* randomOrder.coprimes */
const volatile u32 coprimes[GMP_MAX_CPUS];

/*
 * Fault injection for the watchdog test only (scx_gmp --debug-stall-comm,
 * kept out of --help): a task with this command name is never queued, so
 * the kernel's watchdog must eject the scheduler. Empty: off.
 */
const volatile char stall_comm[16];

/* scx_gmp --trace: record every decision in trace_rb (intf.h, gmp_event). */
const volatile bool trace_on;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, GMP_TRACE_RB_BYTES);
} trace_rb SEC(".maps");

/* Per-CPU state and counters, read by the agent. */
struct gmp_cpu cpus[GMP_MAX_CPUS];

/* Global state, read by the agent. */
u64 nmspinning;		/* sched.nmspinning */
u32 nr_held;		/* CPUs with gmp_cpu.held set: retake looks only if any */
u64 nr_tasks;		/* tasks managed by scx_gmp (Go's threads) */
u64 runnext_seq;	/* orders runnext: newest first */
u64 pidle_seq;		/* orders sched.pidle (--go-pidle): pidleget() takes the newest */
s32 snap_grq;		/* GRQ length, filled by snapshot() */
s32 snap_idle;		/* idle CPUs, filled by snapshot() */
s64 kick_slow_share;	/* recent slow kicks, of GMP_KICK_SHARE_ONE: kick_answered() */

/*
 * task_ctx.runnext_cpu: gmp_select_cpu() put the woken task in no runnext,
 * so gmp_enqueue() queues it on its CPU's LRQ wherever the kernel calls it.
 * Called on the task's own CPU from the kernel's wakeup IPI, it took that
 * CPU for the waker's, and put the task in its runnext.
 */
#define GMP_NOT_NEXT -2

struct task_ctx {
	s32 runnext_cpu;	/* select_cpu() chose this waker CPU's runnext; GMP_NOT_NEXT: none */
	bool sync;		/* ... in a sync wakeup: the waker is about to sleep */
	bool yielded;		/* the slice ended in sched_yield() */
	bool inherit;		/* dispatched from runnext: keeps the slice */
	bool preempted;		/* preempt_for_wakeup() ended its slice */
	bool preempts;		/* ... for this task, woken: it starts a slice of its own */
	u64 resume_tick;	/* the preempted task's slice began here (tick_start); 0: none */
	u64 queued_at;		/* when gmp_enqueue() last took it (ns); 0: running */
	bool woken;		/* queued by a wakeup, not run since: lrq_starving() */
};

/* One timer per CPU for a delayed wakep() (wakep_later). */
struct wakep_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GMP_MAX_CPUS);
	__type(key, u32);
	__type(value, struct wakep_timer);
} wakep_timers SEC(".maps");

/* One timer per CPU for a wakeup preemption due later (preempt_for_wakeup()). */
struct preempt_timer {
	struct bpf_timer timer;
	u64 run_start;		/* the run it preempts: gmp_cpu.run_start */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GMP_MAX_CPUS);
	__type(key, u32);
	__type(value, struct preempt_timer);
} preempt_timers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

static __always_inline u64 lrq_dsq(s32 cpu) { return GMP_DSQ_LRQ + cpu; }
static __always_inline u64 runnext_dsq(s32 cpu) { return GMP_DSQ_RUNNEXT + cpu; }

static struct gmp_cpu *cpu_ctx(s32 cpu)
{
	u32 i = cpu;

	if (i >= GMP_MAX_CPUS)
		return NULL;
	/* Keep clang from dropping the mask the verifier needs (power of two). */
	barrier_var(i);
	return &cpus[i & (GMP_MAX_CPUS - 1)];
}

/*
 * Counters of loops over a DSQ live in map memory, one per CPU: the verifier
 * does not track their exact values, so the loop states converge. One slot
 * per CPU is enough because the walks that use it (runnext_flush,
 * runqputslow_flush, take_batch) never nest: each sets the counter to 0,
 * walks, and returns before the next one starts, and ops callbacks on one CPU
 * run with its rq locked and IRQs off, so none interrupts another.
 */
struct gmp_loop {
	s32 n;
	s32 flushed;	/* runnext_flush's own: it calls runqputslow_flush */
} __attribute__((aligned(64)));
struct gmp_loop loops[GMP_MAX_CPUS];

static struct gmp_loop *loop_slot(void)
{
	u32 i = bpf_get_smp_processor_id();

	if (i >= GMP_MAX_CPUS)
		return NULL;
	barrier_var(i);
	return &loops[i & (GMP_MAX_CPUS - 1)];
}

static s32 *loop_counter(void)
{
	struct gmp_loop *l = loop_slot();

	return l ? &l->n : NULL;
}

static struct task_ctx *task_ctx(const struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, (struct task_struct *)p, 0, 0);
}

/* Count event @s on the CPU this code runs on. */
static void stat_add(enum gmp_stat s, u64 n)
{
	struct gmp_cpu *c = cpu_ctx(bpf_get_smp_processor_id());

	if (c && s < GMP_NR_STATS)
		c->stats[s] += n;
}

/*
 * Start a trace record, or NULL when tracing is off (a constant: the verifier
 * drops the tracing code) or the ring buffer is full (counted). Any CPU.
 */
static __always_inline struct gmp_event *ev_new(u32 kind, u32 sub, s32 cpu, s32 pid)
{
	struct gmp_event *e;

	if (!trace_on)
		return NULL;
	e = bpf_ringbuf_reserve(&trace_rb, sizeof(*e), 0);
	if (!e) {
		stat_add(GMP_STAT_TRACE_DROPPED, 1);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts = bpf_ktime_get_ns();
	e->kind = kind;
	e->sub = sub;
	e->cpu = cpu;
	e->pid = pid;
	e->other = -1;
	return e;
}

/* Submit a record; the agent drains the ring on its own clock (intf.h). Any CPU. */
static __always_inline void ev_send(struct gmp_event *e)
{
	if (e)
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* Drop a reserved record unsent. Any CPU. */
static __always_inline void ev_drop(struct gmp_event *e)
{
	if (e)
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
}

/* Fill in a reserved record's one extra number, and submit it. Any CPU. */
static __always_inline void ev_send_simple(struct gmp_event *e, s32 other)
{
	if (e) {
		e->other = other;
		e->nmspinning = nmspinning;
		ev_send(e);
	}
}

/* A record with one extra number: kicks, runs, sleeps, spins. */
static __always_inline void ev_simple(u32 kind, u32 sub, s32 cpu, s32 pid, s32 other)
{
	ev_send_simple(ev_new(kind, sub, cpu, pid), other);
}

/* Trace @cpu's spinning state changing to spin_seq @seq (odd: started), by @by. */
static __always_inline void ev_spin(s32 cpu, u32 seq, s32 by)
{
	struct gmp_event *e = ev_new(GMP_EV_SPIN, seq & 1, cpu, -1);

	if (e) {
		e->other = by;
		e->n = seq;
		e->nmspinning = nmspinning;
		ev_send(e);
	}
}

static bool may_run(const struct task_struct *p, s32 cpu)
{
	return bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
}

/*
 * May @cpu take @p from a queue now: may_run(), and @p is not held to
 * another CPU by migrate_disable(). The kernel's own pull
 * (scx_bpf_dsq_move_to_local()) skips a task that fails this and takes the
 * next, so a rule that judges a queue's head judges the first task that
 * passes it. Any CPU.
 */
static bool may_take(const struct task_struct *p, s32 cpu)
{
	return may_run(p, cpu) && (!p->migration_disabled || scx_bpf_task_cpu(p) == cpu);
}

/* A task pinned to one CPU is Go's G locked to its M (LockOSThread). */
static bool is_pinned(const struct task_struct *p)
{
	return p->nr_cpus_allowed == 1;
}

/* The kernel's MAX_RT_PRIO (include/linux/sched/prio.h). */
#define GMP_MAX_RT_PRIO 100

/*
 * Does @t run in a class above sched_ext's: stop, deadline or real-time, or
 * boosted into one by a lock it holds? Any CPU.
 */
static bool above_ext(const struct task_struct *t)
{
	return t->prio < GMP_MAX_RT_PRIO;
}

/*
 * Does a higher class (RT, deadline) hold @cpu (entersyscall), or is it
 * offline (procresize)? Wakeups that may run elsewhere are not placed there
 * until it is back. The kernel calls gmp_cpu_release() only when such a
 * task preempts one of ours: one that starts on an idle CPU holds it
 * unannounced, so this CPU also looks at its own running task (a real-time
 * waker). Any CPU.
 */
static bool cpu_held(s32 cpu)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (c && c->held)
		return true;
	return cpu == bpf_get_smp_processor_id() && above_ext(bpf_get_current_task_btf());
}

/* Mark @c held (@held) or not, keeping nr_held in step. Any CPU. */
static void set_held(struct gmp_cpu *c, bool held)
{
	if (__sync_lock_test_and_set(&c->held, held) != held)
		__sync_fetch_and_add(&nr_held, held ? 1 : -1);
}

/*
 * An idle CPU @p may run on that no higher class holds, now claimed, or -1:
 * @prev_cpu first (unless < 0), checked before it is claimed. Any other is
 * claimed by the pick before it can be checked, so a held one is given up
 * with its idle bit cleared until it next idles; harmless, since a higher
 * class runs there. Any CPU.
 */
static s32 idle_unheld_cpu(const struct task_struct *p, s32 prev_cpu)
{
	s32 cpu;

	if (prev_cpu >= 0 && may_run(p, prev_cpu) && !cpu_held(prev_cpu) &&
	    scx_bpf_test_and_clear_cpu_idle(prev_cpu))
		return prev_cpu;
	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	return cpu >= 0 && !cpu_held(cpu) ? cpu : -1;
}

/*
 * @cpu, unless a higher class holds it and @p may run elsewhere: then a CPU
 * @p may run on that none holds, an idle one if there is one, else the
 * first from a random start (@cpu if every such CPU is held). Any CPU.
 */
static s32 unheld_cpu(const struct task_struct *p, s32 cpu)
{
	s32 idle;
	u32 start, k;

	if (!cpu_held(cpu) || is_pinned(p))
		return cpu;
	idle = idle_unheld_cpu(p, -1);
	if (idle >= 0)
		return idle;
	start = bpf_get_prandom_u32() % nr_cpus;
	bpf_for(k, 0, nr_cpus) {
		s32 other = (start + k) % nr_cpus;

		if (may_run(p, other) && !cpu_held(other))
			return other;
	}
	return cpu;
}

/* LRQ length as Go counts it: kicked runnext tasks are already at the tail. */
static u32 lrq_len(s32 cpu)
{
	s32 lrq = scx_bpf_dsq_nr_queued(lrq_dsq(cpu));
	s32 rn = scx_bpf_dsq_nr_queued(runnext_dsq(cpu));

	return (lrq > 0 ? lrq : 0) + (rn > 1 ? rn - 1 : 0);
}

/* Are @cpu's runnext and LRQ both empty? Any CPU. */
static bool queues_empty(s32 cpu)
{
	return scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) <= 0 &&
	       scx_bpf_dsq_nr_queued(lrq_dsq(cpu)) <= 0;
}

/* Wake @cpu if it idles: work was queued where only it looks first. */
static void kick_if_other(s32 cpu)
{
	s32 me = bpf_get_smp_processor_id();

	if (cpu != me) {
		ev_simple(GMP_EV_KICK, GMP_WHY_OWNER, cpu, -1, me);
		kick_cpu(cpu);
	}
}

static bool is_spinning(const struct gmp_cpu *c)
{
	return READ_ONCE(c->spin_seq) & 1;
}

/*
 * Flip @cpu's spinning state to @start: false if it already was. The trace
 * records the new spin_seq, so a start and a stop on two CPUs that reach
 * the ring buffer in the other order are put back in order by the checker.
 * Any CPU: only a start changes an even spin_seq and only a stop an odd one,
 * so a lost compare-and-swap means another CPU made this very change.
 */
static bool set_spinning(s32 cpu, struct gmp_cpu *c, bool start, s32 by, bool counted)
{
	u32 seq = READ_ONCE(c->spin_seq);

	if ((bool)(seq & 1) == start || !__sync_bool_compare_and_swap(&c->spin_seq, seq, seq + 1))
		return false;
	if (!start)
		__sync_fetch_and_sub(&nmspinning, 1);
	else if (!counted)
		__sync_fetch_and_add(&nmspinning, 1);
	ev_spin(cpu, seq + 1, by);
	return true;
}

/*
 * pidleget: proc.go pidleget - with --go-pidle, take the most recently idled
 * P, as Go's idle list is a stack: the kernel's idle mask says which CPUs
 * idle, pidleput() stamped when, and if another CPU claims that one first,
 * the kernel's first idle CPU instead. By default the kernel's first idle
 * CPU, which keeps the kicks on fewer CPUs: not Go's rule (README: "Where
 * Linux differs from Go"). Returns the CPU, claimed, or -1. Any CPU (its
 * caller, wakep(), holds the only spinning count: one runs at a time).
 */
static s32 pidleget(void)
{
	const struct cpumask *idle, *online;
	s32 best = -1;
	u64 best_seq = 0;
	u32 i;

	online = scx_bpf_get_online_cpumask();
	if (go_pidle) {
		idle = scx_bpf_get_idle_cpumask();
		bpf_for(i, 0, nr_cpus) {
			struct gmp_cpu *c = cpu_ctx(i);

			if (c && bpf_cpumask_test_cpu(i, idle) && bpf_cpumask_test_cpu(i, online) &&
			    (best < 0 || c->idle_seq > best_seq)) {
				best = i;
				best_seq = c->idle_seq;
			}
		}
		scx_bpf_put_idle_cpumask(idle);
	}
	if (best < 0 || !scx_bpf_test_and_clear_cpu_idle(best))
		best = scx_bpf_pick_idle_cpu(online, 0);
	scx_bpf_put_cpumask(online);
	return best;
}

/*
 * wakep: proc.go wakep - wake one idle P to spin, if no P is spinning yet.
 * Returns whether it woke one. Any CPU.
 */
static bool wakep(void)
{
	struct gmp_cpu *c;
	s32 cpu;

	/* A dying CPU cannot kick: the task waits on its queue (kick_cpu). */
	if (nmspinning || this_cpu_dying() || !__sync_bool_compare_and_swap(&nmspinning, 0, 1))
		return false;
	cpu = pidleget();
	c = cpu_ctx(cpu);
	/*
	 * The woken CPU spins on our count. If it already spins on its own
	 * (find_runnable set its flag first), it has its own count: drop ours.
	 */
	if (!c || !set_spinning(cpu, c, true, bpf_get_smp_processor_id(), true)) {
		__sync_fetch_and_sub(&nmspinning, 1);
		return false;
	}
	ev_simple(GMP_EV_KICK, GMP_WHY_WAKEP, cpu, -1, bpf_get_smp_processor_id());
	stat_add(GMP_STAT_KICK, 1);
	__sync_lock_test_and_set(&c->kicked_at, bpf_ktime_get_ns());
	kick_cpu(cpu);
	return true;
}

/*
 * A CPU that wakep() kicked dispatches: count how long the kick took to
 * answer. Go wakes a P in microseconds; a CPU whose vCPU waits for a host
 * core takes milliseconds, and then each kick costs more than it gains
 * (kick slow=; README, "Reading the stats"). Owner only.
 */
static void kick_answered(struct gmp_cpu *c)
{
	u64 at, now;
	s64 share;
	bool slow;

	/* Most dispatches follow no kick: take the stamp only if there is one. */
	if (!READ_ONCE(c->kicked_at))
		return;
	at = __sync_lock_test_and_set(&c->kicked_at, 0);
	now = bpf_ktime_get_ns();
	if (!at || now < at)
		return;
	stat_add(GMP_STAT_KICK_ANSWERED, 1);
	stat_add(GMP_STAT_KICK_WAIT_US, (now - at) / GMP_NSEC_PER_USEC);
	slow = now - at > (u64)GMP_KICK_SLOW_US * GMP_NSEC_PER_USEC;
	if (slow)
		stat_add(GMP_STAT_KICK_SLOW, 1);
	/* Two CPUs answering at once may lose one update of an estimate. */
	share = READ_ONCE(kick_slow_share);
	share += ((slow ? (s64)GMP_KICK_SHARE_ONE : 0) - share) >> GMP_KICK_SHARE_SHIFT;
	WRITE_ONCE(kick_slow_share, share);
}

/*
 * Are kicks slow: over @share (parts of GMP_KICK_SHARE_ONE; 0: never) of
 * the recent kicks took over GMP_KICK_SLOW_US to answer? Any CPU.
 */
static bool kicks_slow_over(u32 share)
{
	return share && READ_ONCE(kick_slow_share) > (s64)share;
}

/* kicks_slow_over() for --ready-idle-slow-pct. Any CPU. */
static bool kicks_slow(void)
{
	return kicks_slow_over(ready_idle_slow);
}

/*
 * The delayed wakep() fires: the task put in this CPU's runnext
 * wakep_delay_ns ago is still there (its waker ran on), so wake an idle CPU
 * to steal it, as Go's ready() would have at once. Any CPU (a timer pinned
 * to its owner, elsewhere once that CPU went offline).
 */
static int wakep_timer_fn(void *map, u32 *key, struct wakep_timer *t)
{
	s32 cpu = *key;
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (!c)
		return 0;
	__sync_lock_test_and_set(&c->wakep_armed, 0);
	if (scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) > 0 && wakep())
		stat_add(GMP_STAT_WAKEP_LATE, 1);
	return 0;
}

/*
 * ready()'s wakep(), delayed: a wakeup put in @cpu's own runnext, with
 * nothing else queued there, most often has a waker about to block, and
 * the task runs here next; a CPU woken at once (an IPI, costly on Linux)
 * only steals it from these caches or finds nothing. So wake one only if
 * the task still waits after wakep_delay_ns. With --wakep-delay-slow-pct,
 * only while kicks are slow (an overcommitted VM, where a kicked vCPU
 * competes with the waker's for a host core). Not Go's rule; 0 keeps it
 * (README: "Where Linux differs from Go"). Returns false when the caller
 * is to call wakep() now. Owner only.
 */
static bool wakep_later(s32 cpu)
{
	struct gmp_cpu *c = cpu_ctx(cpu);
	struct wakep_timer *t;
	u32 key = cpu;

	if (!wakep_delay_ns || !c || nmspinning || cpu != bpf_get_smp_processor_id() ||
	    (wakep_delay_slow && !kicks_slow_over(wakep_delay_slow)) || lrq_len(cpu))
		return false;
	if (__sync_lock_test_and_set(&c->wakep_armed, 1))
		return true; /* armed already: it fires sooner */
	t = bpf_map_lookup_elem(&wakep_timers, &key);
	if (t && !bpf_timer_start(&t->timer, wakep_delay_ns, BPF_F_TIMER_CPU_PIN))
		return true;
	__sync_lock_test_and_set(&c->wakep_armed, 0);
	return false;
}

/* Leave the spinning state (proc.go resetspinning / the M's spinning=false). */
static bool stop_spinning(s32 cpu, struct gmp_cpu *c)
{
	return set_spinning(cpu, c, false, cpu, false);
}

/*
 * Start spinning (proc.go findRunnable: mp.becomeSpinning). The flag and the
 * count change together: a CPU that wakep() marked already spins. Owner only.
 */
static bool start_spinning(s32 cpu, struct gmp_cpu *c)
{
	if (!set_spinning(cpu, c, true, cpu, false))
		return false;
	stat_add(GMP_STAT_SPIN, 1);
	return true;
}

/* Trace a put of @p to @cpu's queue @where; @n: that queue's length after. */
static __always_inline void ev_put(u32 where, u32 why, s32 cpu, struct task_struct *p, s32 n)
{
	struct gmp_event *e = ev_new(GMP_EV_PUT, where, cpu, p->pid);

	if (e) {
		e->why = why;
		e->n = n;
		e->allowed = p->nr_cpus_allowed;
		ev_send(e);
	}
}

/*
 * globrunqput: proc.go globrunqput - put @p on the GRQ tail. A task that may
 * run on some CPUs only wakes an idle one of those: wakep() may wake a CPU
 * that cannot take it.
 */
static void globrunqput(struct task_struct *p, u32 why, u64 enq_flags)
{
	ev_put(GMP_PUT_GRQ, why, -1, p, scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ) + 1);
	scx_bpf_dsq_insert(p, GMP_DSQ_GRQ, slice_ns, enq_flags);
	stat_add(GMP_STAT_GLOBAL_PUT, 1);
	if (p->nr_cpus_allowed < nr_cpus) {
		s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

		if (cpu >= 0) {
			ev_simple(GMP_EV_KICK, GMP_WHY_AFFINITY, cpu, p->pid,
				  bpf_get_smp_processor_id());
			kick_cpu(cpu);
		}
	}
}

/*
 * Task @p was put on the GRQ, and the wakep() that followed woke no CPU:
 * kick, with SCX_KICK_IDLE, every other CPU that may take @p and that
 * spins or is not marked idle. In Go, globrunqput and a P about to give
 * up look at the GRQ under sched.lock, and a spinning P that stops looks
 * again after the put's wakep() has read nmspinning, so a P either sees
 * the task or is woken for it. Here the kernel inserts @p after
 * gmp_enqueue() returns, after wakep() has read nmspinning and the idle
 * mask: a CPU that stopped spinning or looked at the GRQ in between would
 * idle beside @p until another CPU's next look there (its 61st tick, its
 * own queues running dry, or grq_starving()). The kernel acts on the
 * kicks after the insert, under each target's run-queue lock: a CPU in
 * its balance looks again, and a busy one is skipped. A CPU marked idle
 * that does not spin had idled before wakep() looked, as in Go it would
 * stay idle, and is not woken: under overcommit each such wake costs a
 * host core. Not Go's step, but Go's outcome (README: "Where Linux
 * differs from Go"). Any CPU.
 */
static void grq_put_kick(const struct task_struct *p)
{
	const struct cpumask *idle;
	s32 me = bpf_get_smp_processor_id();
	u32 i;

	if (this_cpu_dying())
		return;
	ev_simple(GMP_EV_KICK, GMP_WHY_GRQ, -1, p->pid, me);
	stat_add(GMP_STAT_GRQ_KICK, 1);
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(i, 0, nr_cpus) {
		struct gmp_cpu *c = cpu_ctx(i);

		if (c && i != me && bpf_cpumask_test_cpu(i, p->cpus_ptr) &&
		    (is_spinning(c) || !bpf_cpumask_test_cpu(i, idle)))
			scx_bpf_kick_cpu(i, SCX_KICK_IDLE);
	}
	scx_bpf_put_idle_cpumask(idle);
}

/*
 * runqputslow's half-move is due on @cpu: count one overflow, not one per put.
 * Its trace record is reserved before the flag is set, so that the ring holds
 * it ahead of the move that clears the flag (the ring keeps reservation
 * order). Any CPU.
 */
static void overflow_pending(s32 cpu, struct gmp_cpu *c)
{
	struct gmp_event *e;

	/* Already due: every put into the full LRQ asks, and reserves nothing. */
	if (c->ovf_pending)
		return;
	e = ev_new(GMP_EV_MOVE, GMP_MOVE_PENDING, cpu, -1);
	if (__sync_lock_test_and_set(&c->ovf_pending, 1)) {
		ev_drop(e);
		return;
	}
	stat_add(GMP_STAT_OVERFLOW, 1);
	ev_send_simple(e, bpf_get_smp_processor_id());
}

/*
 * runqputslow: proc.go runqputslow - @cpu's LRQ is full: @p and half of the
 * LRQ go to the GRQ. @p goes now; the half follows at runqputslow_flush().
 */
static void runqputslow(struct task_struct *p, s32 cpu, u32 why, u64 enq_flags)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	ev_put(GMP_PUT_OVERFLOW, why, cpu, p, lrq_len(cpu));
	scx_bpf_dsq_insert(p, GMP_DSQ_GRQ, slice_ns, enq_flags);
	stat_add(GMP_STAT_GLOBAL_PUT, 1);
	if (c)
		overflow_pending(cpu, c);
	kick_if_other(cpu);
}

/*
 * The runnext DSQ orders by vtime, smallest first: each runqput(next) takes
 * RUNNEXT_STEP less than the one before (runnext_seq), so the newest task,
 * runnext, is first and the tasks it displaced follow, newest to oldest.
 * Between one and the next, the step leaves room for the LRQ puts that
 * lrq_put_behind() holds there.
 */
#define RUNNEXT_STEP (1ULL << 16)

/*
 * lrq_put_behind: put @p at @cpu's LRQ tail when runnext tasks it displaced
 * still wait in the runnext DSQ to move there (runnext_flush()): Go's
 * runqput moved them at once, so @p goes behind them. It joins them in the
 * runnext DSQ, after the oldest ones and before runnext itself, and moves
 * to the LRQ with them, in order. Returns false if there are none to go
 * behind (or no room in the step): then @p goes straight to the LRQ.
 * Whoever fills @cpu's queues, under its run-queue lock.
 */
static bool lrq_put_behind(struct task_struct *p, s32 cpu, struct gmp_cpu *c, u64 enq_flags)
{
	if (scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) <= 1 || c->lrq_behind >= RUNNEXT_STEP - 1)
		return false;
	c->lrq_behind++;
	scx_bpf_dsq_insert_vtime(p, runnext_dsq(cpu), slice_ns,
				 c->runnext_vtime + RUNNEXT_STEP - c->lrq_behind, enq_flags);
	return true;
}

/* runqput: proc.go runqput - queue @p on @cpu's runnext (next) or LRQ tail. */
static void runqput(struct task_struct *p, s32 cpu, bool next, u32 why, u64 enq_flags)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (!c) {
		globrunqput(p, why, enq_flags);
		return;
	}
	if (next) {
		u64 seq = __sync_fetch_and_add(&runnext_seq, 1);
		s32 kicked = scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) > 0;

		/*
		 * The displaced runnext goes to the LRQ tail (counted there
		 * from now on); runnext_flush() moves it, or overflows.
		 */
		if (kicked)
			stat_add(GMP_STAT_RUNNEXT_KICK, 1);
		if (trace_on) {
			struct gmp_event *e = ev_new(GMP_EV_PUT, GMP_PUT_RUNNEXT, cpu, p->pid);
			struct task_struct *old;

			if (e) {
				bpf_for_each(scx_dsq, old, runnext_dsq(cpu), 0) {
					e->other = old->pid;
					break;
				}
				e->why = why;
				e->n = lrq_len(cpu) + kicked;
				e->allowed = p->nr_cpus_allowed;
				ev_send(e);
			}
		}
		c->runnext_at = scx_bpf_now();
		c->runnext_vtime = -(seq * RUNNEXT_STEP);
		c->lrq_behind = 0;
		scx_bpf_dsq_insert_vtime(p, runnext_dsq(cpu), slice_ns, c->runnext_vtime, enq_flags);
		stat_add(GMP_STAT_RUNNEXT_PUT, 1);
	} else if (lrq_len(cpu) >= lrq_cap) {
		runqputslow(p, cpu, why, enq_flags);
		return;
	} else {
		ev_put(GMP_PUT_LRQ, why, cpu, p, lrq_len(cpu) + 1);
		if (!lrq_put_behind(p, cpu, c, enq_flags))
			scx_bpf_dsq_insert(p, lrq_dsq(cpu), slice_ns, enq_flags);
		stat_add(GMP_STAT_LRQ_PUT, 1);
	}
	kick_if_other(cpu);
}

/*
 * The __hidden functions below walk DSQs. Not being static, each is a BPF
 * global function: the verifier checks it once, on its own, rather than once
 * per call site, which keeps the callers within its limits (so they take
 * scalars only). __hidden keeps them out of the object's exported symbols.
 */

/*
 * Trace a late move of @n tasks on @cpu's queues, computed from @len, with
 * @cpu's LRQ length once the move is done (read only when tracing).
 */
static __always_inline void ev_move(u32 what, s32 cpu, s32 n, s32 want, s32 len)
{
	struct gmp_event *e = ev_new(GMP_EV_MOVE, what, cpu, -1);

	if (e) {
		e->other = bpf_get_smp_processor_id();
		e->n = n;
		e->want = want;
		e->len = len;
		e->seen_lrq = scx_bpf_dsq_nr_queued(lrq_dsq(cpu));
		ev_send(e);
	}
}

/*
 * runqputslow_flush: the second half of runqputslow - move half of @cpu's LRQ,
 * from its head, to the GRQ. The owner and a thief may both try: the one that
 * clears ovf_pending moves, and one CPU at a time (ovf_busy); an overflow
 * that comes due while one moves waits for the next call. Thieves and the
 * owner may still take from the LRQ's head during the walk: it stops once
 * the LRQ is down by half, whoever took the tasks. Go's one CAS moves half
 * or, when another took them first, nothing, and its put retries.
 */
__hidden void runqputslow_flush(s32 cpu)
{
	struct gmp_cpu *c = cpu_ctx(cpu);
	s32 *moved = loop_counter();
	struct task_struct *p;
	s32 len, half;

	if (!c || !c->ovf_pending || !moved || __sync_lock_test_and_set(&c->ovf_busy, 1))
		return;
	if (!__sync_lock_test_and_set(&c->ovf_pending, 0)) {
		__sync_lock_test_and_set(&c->ovf_busy, 0);
		return;
	}
	len = scx_bpf_dsq_nr_queued(lrq_dsq(cpu));
	half = len / 2;
	*moved = 0;
	bpf_for_each(scx_dsq, p, lrq_dsq(cpu), 0) {
		if (*moved >= half || scx_bpf_dsq_nr_queued(lrq_dsq(cpu)) <= len - half)
			break;
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, GMP_DSQ_GRQ, 0))
			(*moved)++;
	}
	stat_add(GMP_STAT_OVERFLOW_TASKS, *moved);
	stat_add(GMP_STAT_GLOBAL_PUT, *moved);
	/* Traced before the next mover may start: the ring keeps the order. */
	ev_move(GMP_MOVE_OVERFLOW, cpu, *moved, half, len);
	__sync_lock_test_and_set(&c->ovf_busy, 0);
}

/*
 * At most this many displaced runnext tasks move per runnext_flush() call: a
 * burst of wakeups must not keep IRQs off for a thousand moves. The rest stay
 * behind the newest in the runnext DSQ, in order, already counted at the LRQ
 * tail, and move at the next call.
 */
#define RUNNEXT_FLUSH_MAX 64

/*
 * runnext_flush: the runqput kick, done late. Every task in @cpu's runnext
 * DSQ but the newest was displaced: move them, oldest first, to the LRQ tail.
 * Into a full LRQ, runqputslow first moves half of it to the GRQ, then the
 * task: Go's order. Owner, or a thief before it steals; each move re-checks
 * that more than the newest is left, so two at once never move the newest.
 */
__hidden void runnext_flush(s32 cpu)
{
	struct gmp_loop *l = loop_slot();
	struct task_struct *p;
	s32 i;

	if (!l)
		return;
	l->flushed = 0;
	bpf_for(i, 0, RUNNEXT_FLUSH_MAX) {
		if (scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) <= 1)
			break;
		if (scx_bpf_dsq_nr_queued(lrq_dsq(cpu)) >= lrq_cap) {
			struct gmp_cpu *c = cpu_ctx(cpu);

			if (c)
				overflow_pending(cpu, c);
			runqputslow_flush(cpu);
		}
		bpf_for_each(scx_dsq, p, runnext_dsq(cpu), SCX_DSQ_ITER_REV) {
			u64 dst = lrq_dsq(cpu);

			/* A full LRQ even after the half-move: the GRQ tail. */
			if (scx_bpf_dsq_nr_queued(dst) >= lrq_cap)
				dst = GMP_DSQ_GRQ;
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, dst, 0)) {
				l->flushed++;
				if (dst == GMP_DSQ_GRQ) {
					stat_add(GMP_STAT_OVERFLOW_TASKS, 1);
					stat_add(GMP_STAT_GLOBAL_PUT, 1);
				}
			}
			break;
		}
	}
	if (l->flushed)
		ev_move(GMP_MOVE_KICKED, cpu, l->flushed, l->flushed,
			scx_bpf_dsq_nr_queued(runnext_dsq(cpu)));
}

/*
 * The slice a runnext task inherits on @c: what is left of the shared slice;
 * once that is spent, what is left of one min_slice_ns grace for the whole
 * chain (Go's sysmon notices a spent slice within 20 us: a short task still
 * finishes, a ping-pong pair loses the CPU). 0: sysmon has retaken it.
 */
static u64 inherit_slice(struct gmp_cpu *c, u64 now)
{
	u64 used = now - c->tick_start;

	if (used < slice_ns)
		return slice_ns - used;
	if (!c->retake_at)
		c->retake_at = now + min_slice_ns;
	return c->retake_at > now ? c->retake_at - now : 0;
}

/* What @c saw when it decided, and its schedtick, into pick record @e. */
static __always_inline void ev_seen(struct gmp_event *e, struct gmp_cpu *c)
{
	e->seen_runnext = c->seen_runnext;
	e->seen_lrq = c->seen_lrq;
	e->seen_grq = c->seen_grq;
	e->tick_grq = c->seen_tick_grq;
	e->schedtick = c->schedtick;
}

/*
 * Trace a pick by @cpu from @from: @pid (-1: the kernel's move_to_local chose),
 * @n of @want tasks, computed from @len tasks on @other (a victim CPU).
 */
static __always_inline void ev_pick(u32 from, s32 cpu, s32 pid, s32 n, s32 want, s32 len,
				    s32 other)
{
	struct gmp_cpu *c = cpu_ctx(cpu);
	struct gmp_event *e;

	if (!c)
		return;
	e = ev_new(GMP_EV_PICK, from, cpu, pid);
	if (e) {
		e->n = n;
		e->want = want;
		e->len = len;
		e->other = other;
		ev_seen(e, c);
		ev_send(e);
	}
}

/* How many times runqget() looks at an LRQ that still holds tasks. */
#define LRQ_LOOKS 3

/*
 * A CPU on its way offline is first made inactive; the kernel then waits
 * for an RCU grace period, and only after that calls gmp_cpu_offline(). In
 * between the CPU still dispatches, but may not run a task from another
 * CPU: a move to its local DSQ puts the task on the kernel's global DSQ
 * instead (SCX_EV_DISPATCH_LOCAL_DSQ_OFFLINE), which every CPU serves
 * before its own queues, and a pull from its own DSQs skips such a task.
 * take_batch() used to queue the rest of a GRQ batch or a steal on its
 * LRQ, where no CPU took them while the others were busy; with RCU's
 * grace-period kthread or a task preempted in a read-side section among
 * them, the grace period never ended, the hotplug never reached
 * gmp_cpu_offline(), and RCU stalled (CI's lifecycle test, with CPU 1
 * going off and on under load: a task waited 21 s). So a CPU that finds
 * itself inactive takes nothing more in this dispatch, and gives its LRQ
 * to the GRQ (release_lrq()): procresize's move of a destroyed P's queue,
 * done early. Owner only.
 */
static void set_inactive(s32 cpu)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (c)
		c->inactive = 1;
	stat_add(GMP_STAT_RELEASED, 1);
	wakep();
}

/*
 * run_here: move @p, the task that iterator @it is on, to @cpu's local DSQ
 * to run next. False if it did not move (a thief took it first), or if the
 * kernel put it on its global DSQ instead because @cpu is inactive: then
 * set_inactive(), and is_inactive() tells the caller to take nothing more.
 * Every move to run a task from one of our DSQs goes through here. Owner
 * only. A later rule of the same dispatch may still move a task here: it
 * too goes to the kernel's global DSQ, which every CPU serves first, and is
 * counted in released. Refusing such moves instead (5d01dd3) left those
 * tasks on our queues, and in 6 runs of bench/hotplug.sh the longest wait
 * doubled (docs/reliability.md).
 */
static __always_inline bool run_here(struct bpf_iter_scx_dsq *it, struct task_struct *p,
				     s32 cpu)
{
	s32 local = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL);

	if (!scx_bpf_dsq_move(it, p, SCX_DSQ_LOCAL, 0))
		return false;
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) > local)
		return true;
	set_inactive(cpu);
	return false;
}

/* Has @cpu found itself inactive in this dispatch (set_inactive())? */
static bool is_inactive(s32 cpu)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	return c && c->inactive;
}

/*
 * Move up to @want tasks that may run on @cpu from DSQ @src: the first to run
 * now, the rest to @cpu's LRQ tail. Returns how many moved; 0 if the first
 * went to the kernel's global DSQ instead (@cpu is inactive: run_here()).
 */
__hidden s32 take_batch(s32 cpu, u64 src, s32 want)
{
	s32 *got = loop_counter();
	struct task_struct *p;

	if (!got)
		return 0;
	*got = 0;
	bpf_for_each(scx_dsq, p, src, 0) {
		if (*got >= want)
			break;
		if (!may_run(p, cpu))
			continue;
		scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, slice_ns);
		if (*got) {
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, lrq_dsq(cpu), 0))
				(*got)++;
			continue;
		}
		if (run_here(BPF_FOR_EACH_ITER, p, cpu))
			*got = 1;
		else if (is_inactive(cpu))
			return 0;
	}
	return *got;
}

/*
 * Move the tasks in DSQ @dsq to the GRQ, in order, each traced as put there
 * for @why: to its tail, or with @head to its head, ahead of what waited
 * there (proc.go globrunqputhead, from @dsq's tail back). With
 * @keep_pinned, those that may run on one CPU only stay. Returns how many
 * moved. For handoffp() (the tail), release_lrq() and procresize (the
 * head). Any CPU.
 */
__hidden s32 dsq_to_grq(u64 dsq, u32 why, bool keep_pinned, bool head)
{
	s32 *moved = loop_counter();
	struct task_struct *p;

	if (!moved)
		return 0;
	*moved = 0;
	bpf_for_each(scx_dsq, p, dsq, head ? SCX_DSQ_ITER_REV : 0) {
		if (keep_pinned && is_pinned(p))
			continue;
		ev_put(GMP_PUT_GRQ, why, -1, p, scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ) + 1);
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, GMP_DSQ_GRQ, head ? SCX_ENQ_HEAD : 0))
			(*moved)++;
	}
	stat_add(GMP_STAT_GLOBAL_PUT, *moved);
	return *moved;
}

/*
 * release_lrq: @cpu's LRQ holds tasks that @cpu could not take (inactive,
 * see set_inactive(); or a task whose migration is disabled on another
 * CPU): they go to the GRQ head, in order, as proc.go's (*p).destroy moves
 * a destroyed P's queue, where any CPU may take them, and wakep() finds
 * them a CPU. Owner only.
 */
static void release_lrq(s32 cpu)
{
	s32 moved = dsq_to_grq(lrq_dsq(cpu), GMP_WHY_PROCRESIZE, false, true);

	stat_add(GMP_STAT_RELEASED, moved);
	if (moved)
		wakep();
}

/*
 * runqget: proc.go runqget - runnext first (inherits the slice), then the LRQ
 * head. A runnext task whose inherited slice sysmon has already retaken goes
 * to the GRQ instead: a ping-pong pair cannot hold a CPU beyond one slice.
 */
static bool runqget(s32 cpu, struct gmp_cpu *c)
{
	struct task_struct *p;
	s32 queued = 0;
	u32 i;

	bpf_for_each(scx_dsq, p, runnext_dsq(cpu), 0) {
		struct task_ctx *tctx = task_ctx(p);
		u64 left;

		if (!tctx || !may_run(p, cpu))
			continue;
		/*
		 * A task that preempted another program's task starts a slice
		 * of its own (not inherited); the task it preempted goes on with
		 * its own (preempt_for_wakeup()).
		 */
		if (tctx->resume_tick) {
			c->tick_start = tctx->resume_tick;
			c->retake_at = 0;
		}
		left = tctx->preempts ? slice_ns : inherit_slice(c, scx_bpf_now());
		if (!left) {
			s32 pid = p->pid, len = scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ) + 1;

			scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, slice_ns);
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, GMP_DSQ_GRQ, 0)) {
				struct gmp_event *e = ev_new(GMP_EV_PUT, GMP_PUT_GRQ, -1, pid);

				if (e) {
					e->why = GMP_WHY_RETAKE;
					e->n = len;
					e->other = cpu;
					e->allowed = p->nr_cpus_allowed;
					ev_send(e);
				}
				stat_add(GMP_STAT_SLICE_EXPIRED, 1);
				stat_add(GMP_STAT_GLOBAL_PUT, 1);
			}
			break;
		}
		scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, left);
		tctx->inherit = !tctx->preempts;
		if (run_here(BPF_FOR_EACH_ITER, p, cpu)) {
			stat_add(GMP_STAT_RUNNEXT_HIT, 1);
			ev_pick(GMP_PICK_RUNNEXT, cpu, p->pid, 1, 1, 0, -1);
			return true;
		}
		tctx->inherit = false;
	}
	/*
	 * For the trace: what each step saw when it failed, not on entry. A
	 * thief may empty this CPU's runnext or LRQ in between, and the checker
	 * would take the next step for a wrong order.
	 */
	if (trace_on)
		c->seen_runnext = scx_bpf_dsq_nr_queued(runnext_dsq(cpu));
	/*
	 * Go's LRQ takes puts from its owner only; here other CPUs put into
	 * it too (a pinned task's wakeup, a thief's runnext_flush), and such
	 * a put may land just after a look that found the LRQ empty. So look
	 * again while it holds tasks: work put here runs here, rather than
	 * this CPU going on to the GRQ or to steal. What is still there after
	 * the last look may not run here (seen_lrq < 0).
	 */
	bpf_for(i, 0, LRQ_LOOKS) {
		if (scx_bpf_dsq_move_to_local(lrq_dsq(cpu), 0)) {
			stat_add(GMP_STAT_LRQ_GET, 1);
			ev_pick(GMP_PICK_LRQ, cpu, -1, 1, 1, 0, -1);
			return true;
		}
		queued = scx_bpf_dsq_nr_queued(lrq_dsq(cpu));
		if (queued <= 0)
			break;
	}
	if (trace_on)
		c->seen_lrq = queued > 0 ? -queued : 0;
	if (queued > 0)
		release_lrq(cpu);
	return false;
}

/* globrunqget: proc.go globrunqget - take one task from the GRQ head. */
static bool globrunqget(void)
{
	return scx_bpf_dsq_move_to_local(GMP_DSQ_GRQ, 0);
}

/*
 * globrunqgetbatch: proc.go globrunqgetbatch - take
 * n = min(len, len/nprocs + 1, cap/2) from the GRQ: run one, queue the rest.
 */
__hidden bool globrunqgetbatch(s32 cpu)
{
	s32 len = scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ);
	s32 n, got;

	if (len <= 0) {
		struct gmp_cpu *c = cpu_ctx(cpu);

		if (trace_on && c)
			c->seen_grq = 0;
		return false;
	}
	n = len / (s32)nr_cpus + 1;
	if (n > len)
		n = len;
	if (n > (s32)lrq_cap / 2)
		n = lrq_cap / 2;
	got = take_batch(cpu, GMP_DSQ_GRQ, n);
	if (trace_on) {
		struct gmp_cpu *c = cpu_ctx(cpu);

		/* What the batch decided on; negative: none of it may run here. */
		if (c)
			c->seen_grq = got ? len : -len;
	}
	if (!got)
		return false;
	ev_pick(GMP_PICK_BATCH, cpu, -1, got, n, len, -1);
	stat_add(GMP_STAT_GLOBAL_BATCH, 1);
	stat_add(GMP_STAT_GLOBAL_BATCH_TASKS, got);
	return true;
}

/*
 * runqsteal: proc.go runqsteal/runqgrab - take ceil(n/2) of @victim's LRQ,
 * run one and queue the rest on @cpu. With nothing from the LRQ and @stealnext, take
 * the victim's runnext if it has waited runnext_grace_ns.
 */
__hidden bool runqsteal(s32 cpu, s32 victim, bool stealnext, u32 round)
{
	struct gmp_cpu *vc = cpu_ctx(victim);
	struct task_struct *p;
	s32 n, got;
	s64 age;

	if (!vc)
		return false;
	runnext_flush(victim);
	runqputslow_flush(victim);
	stat_add(GMP_STAT_STEAL_TRY, 1);
	n = scx_bpf_dsq_nr_queued(lrq_dsq(victim));
	if (n > 0) {
		got = take_batch(cpu, lrq_dsq(victim), n - n / 2);
		if (got) {
			ev_pick(GMP_PICK_STEAL, cpu, -1, got, n - n / 2, n, victim);
			stat_add(GMP_STAT_STEAL_OK, 1);
			stat_add(GMP_STAT_STOLEN_TASKS, got);
			return true;
		}
		/* None of it may run here: Go (no affinity) would see runnext. */
	}
	if (!stealnext || scx_bpf_dsq_nr_queued(runnext_dsq(victim)) <= 0)
		return false;
	/* Signed: runnext_at is the waker's clock, which may be ahead of ours. */
	age = (s64)(scx_bpf_now() - vc->runnext_at);
	if (age < (s64)runnext_grace_ns) {
		struct gmp_cpu *c = cpu_ctx(cpu);

		if (c)
			c->young_runnext = 1;
		return false;
	}
	bpf_for_each(scx_dsq, p, runnext_dsq(victim), 0) {
		struct gmp_event *e;
		s32 pid = p->pid;

		if (!may_run(p, cpu))
			break;
		scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, slice_ns);
		if (!run_here(BPF_FOR_EACH_ITER, p, cpu))
			break;
		e = ev_new(GMP_EV_PICK, GMP_PICK_STEAL_RUNNEXT, cpu, pid);
		if (e) {
			struct gmp_cpu *c = cpu_ctx(cpu);

			e->n = e->want = 1;
			e->other = victim;
			e->round = round;
			e->age = age;
			if (c)
				ev_seen(e, c);
			ev_send(e);
		}
		stat_add(GMP_STAT_STEAL_OK, 1);
		stat_add(GMP_STAT_STOLEN_TASKS, 1);
		stat_add(GMP_STAT_STOLEN_RUNNEXT, 1);
		return true;
	}
	return false;
}

/*
 * steal_work: proc.go stealWork - steal_tries rounds over the other CPUs in a
 * random coprime-stride order; runnext only in the last round. Go skips idle
 * Ps, whose queues are empty by construction; a CPU here may idle with work
 * queued on it (its kick is on the way), so the test is its queues. A round
 * that finds them all empty ends the search early. Owner only.
 */
__hidden bool steal_work(s32 cpu)
{
	bool found = false;
	u32 round, k;

	bpf_for(round, 0, steal_tries) {
		bool last = round == steal_tries - 1, tried = false;
		u32 r = bpf_get_prandom_u32();
		u32 pos = r % nr_cpus;
		u32 idx = (r / nr_cpus) % nr_coprimes;
		u32 inc;

		if (idx >= GMP_MAX_CPUS)
			break;
		inc = coprimes[idx];
		bpf_for(k, 0, nr_cpus) {
			s32 victim = pos;

			pos = (pos + inc) % nr_cpus;
			if (victim == cpu || queues_empty(victim))
				continue;
			tried = true;
			if (runqsteal(cpu, victim, last, round)) {
				found = true;
				break;
			}
			if (is_inactive(cpu))
				return false;
		}
		/*
		 * Every other CPU's queues were empty: the rounds left would
		 * look at the same empty queues. Work that comes in meanwhile
		 * is what the caller's look after spinning (work_elsewhere())
		 * is for, as in Go.
		 */
		if (found || !tried)
			break;
	}
	return found;
}

/*
 * handoffp: proc.go handoffp - @victim's CPU is held by a real-time or
 * deadline task (entersyscall), so its queued work must not wait for it. Go
 * gives the P, queues and all, to another M; a CPU cannot be handed over, so
 * its queued tasks go instead: its runnext and LRQ, in order, to the GRQ
 * tail, which every CPU serves (and, once its head has waited too long,
 * first: grq_starving). Tasks that may run nowhere else stay. Called by
 * retake, on any other CPU.
 */
__hidden void handoffp(s32 victim)
{
	s32 moved;

	runnext_flush(victim);
	runqputslow_flush(victim);
	/* runnext, then the LRQ: the order Go's queues would be read in. */
	moved = dsq_to_grq(runnext_dsq(victim), GMP_WHY_HANDOFF, true, false);
	moved += dsq_to_grq(lrq_dsq(victim), GMP_WHY_HANDOFF, true, false);
	stat_add(GMP_STAT_RETAKE_TASKS, moved);
}

/*
 * retake: proc.go retake, its syscall half - sysmon hands off a P that has
 * sat in a syscall for a sysmon tick with work queued. Here a "syscall" is a
 * real-time or deadline task holding a CPU (entersyscall), whose queues
 * would otherwise drain only within sched_ext's deadline-server share (50 ms
 * a second): behind a real-time hog, a preempted task would wait there for
 * many seconds. Any CPU that schedules acts as sysmon: a CPU held for longer
 * than a slice (Go's sysmon hands off a P idle in a syscall after 10 ms)
 * with work queued is handed off to it, and so is what is queued there
 * later, until the CPU is back. Owner only.
 */
static void retake(s32 cpu)
{
	u64 now = scx_bpf_now();
	u32 i;

	if (!nr_held)
		return;
	bpf_for(i, 0, nr_cpus) {
		struct gmp_cpu *c = cpu_ctx(i);

		if (!c || i == cpu || !c->held || (s64)(now - c->held_at) < (s64)slice_ns ||
		    queues_empty(i))
			continue;
		stat_add(GMP_STAT_RETAKE, 1);
		handoffp(i);
	}
}

/*
 * may_spin: proc.go findRunnable's cap on spinning Ms - a CPU may start
 * looking for work only while 2*nmspinning < the busy CPUs. Any CPU.
 */
static bool may_spin(void)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	u32 npidle = bpf_cpumask_weight(idle);

	scx_bpf_put_idle_cpumask(idle);
	return 2 * nmspinning < nr_cpus - npidle;
}

/* How long the task of @tctx has waited since gmp_enqueue() took it, at @now (ns). */
static s64 queued_ns(const struct task_ctx *tctx, u64 now)
{
	return tctx->queued_at ? (s64)(now - tctx->queued_at) : 0;
}

/*
 * The first task in DSQ @dsq that @cpu may take (may_take()), the one the
 * kernel's own pull would move: its pid, with how long it has waited since
 * gmp_enqueue() took it (ns) in @wait; 0 if there is none. Any CPU.
 */
static s32 first_takeable(u64 dsq, s32 cpu, u64 now, s64 *wait)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, dsq, 0) {
		struct task_ctx *tctx = task_ctx(p);

		if (!may_take(p, cpu))
			continue;
		*wait = tctx ? queued_ns(tctx, now) : 0;
		return p->pid;
	}
	return 0;
}

/*
 * Run task @pid on @cpu if it is still the first task in DSQ @dsq that
 * @cpu may take: a rule that judged that task runs it, or nothing (a thief
 * may have taken it since). False too if the move put it on the kernel's
 * global DSQ instead (@cpu is inactive: run_here()). Owner only.
 */
__hidden bool take_first(u64 dsq, s32 cpu, s32 pid)
{
	struct task_struct *p;
	bool ran = false;

	bpf_for_each(scx_dsq, p, dsq, 0) {
		if (!may_take(p, cpu))
			continue;
		if (p->pid == pid)
			ran = run_here(BPF_FOR_EACH_ITER, p, cpu);
		break;
	}
	return ran;
}

/*
 * Has the GRQ head (the first task there that @cpu may take) waited longer
 * than global_max_wait_ns, and longer than the head of @cpu's LRQ? Then it
 * runs first: returns its pid, else 0. Not Go's: Go takes from the
 * GRQ on every 61st schedtick and when a P's own queues are empty, which
 * under a deep overload of CPU-bound tasks (each preempted to the GRQ tail)
 * leaves a task there for tens of seconds: on Linux, a task preempted in an
 * RCU read-side section then stalls RCU, and the watchdog ejects the
 * scheduler. Comparing with the LRQ head keeps the LRQ from starving in
 * turn. A head pinned to another CPU is that CPU's to judge. Owner only.
 */
static s32 grq_starving(s32 cpu)
{
	s64 grq = 0, lrq = 0;
	u64 now;
	s32 pid;

	if (!global_max_wait_ns || scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ) <= 0)
		return 0;
	now = scx_bpf_now();
	pid = first_takeable(GMP_DSQ_GRQ, cpu, now, &grq);
	if (!pid || grq <= (s64)global_max_wait_ns)
		return 0;
	first_takeable(lrq_dsq(cpu), cpu, now, &lrq);
	return grq >= lrq ? pid : 0;
}

/*
 * Run the GRQ task that grq_starving() judged starving on @cpu, if any.
 * Owner only.
 */
__hidden bool grq_aged_get(s32 cpu)
{
	s32 pid = grq_starving(cpu), len;

	if (!pid)
		return false;
	/* For the trace: the queue with the task in it. */
	len = scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ);
	if (!take_first(GMP_DSQ_GRQ, cpu, pid))
		return false;
	stat_add(GMP_STAT_GLOBAL_AGED, 1);
	ev_pick(GMP_PICK_AGED, cpu, -1, 1, 1, len, -1);
	return true;
}

/*
 * The pid of the task at the head of DSQ @dsq if it is a SCHED_IDLE task
 * that idle_behind() puts last and it has waited less than
 * GMP_IDLE_MAX_WAIT_US; 0 if it is another task, or one that has waited
 * that long; -1 if @dsq is empty. Reads the clock only for a SCHED_IDLE
 * head: every dispatch calls it. Any CPU.
 */
static s32 idle_head(u64 dsq)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, dsq, 0) {
		struct task_ctx *tctx = task_ctx(p);

		if (!idle_behind(p, idle_slice_ns) || !tctx ||
		    queued_ns(tctx, scx_bpf_now()) >
			    (s64)GMP_IDLE_MAX_WAIT_US * GMP_NSEC_PER_USEC)
			return 0;
		return p->pid;
	}
	return -1;
}

/*
 * lrq_starving: has the head of @cpu's LRQ (the first task @cpu may take,
 * may_take()), a task woken and not run since, waited longer than
 * lrq_max_wait_ns while a runnext task waits too? Then it runs first, and
 * the runnext task after it. Returns how long it waited (ns), with its pid
 * in @pid; 0: not starving. Not Go's rule: Go's runnext goes first and
 * inherits the slice, so two tasks that hand the CPU back and forth through
 * runnext (a server's dispatcher and the worker it just woke) keep it for a
 * whole 10 ms slice while the workers it woke before, each pushed out of
 * runnext by the next, wait on the LRQ (docs/benchmarks.md, "The light
 * request load's wakeup tail"). A head that was preempted there (a CPU hog)
 * keeps Go's order: run first, it would hold the CPU for its slice while
 * the woken runnext task waited. So does a SCHED_IDLE head
 * (idle_last()). So does a runnext task that preempts (preempt_for_wakeup()):
 * it starts a slice of its own, so it continues no chain, and it was woken
 * to run at once (cyclictest's timer thread, which took runnext from the
 * main thread beside a CPU hog). Owner only.
 */
static s64 lrq_starving(s32 cpu, s32 *pid)
{
	struct task_struct *p;
	s64 waited = 0;

	/* The cheap tests first: every dispatch with a runnext task asks. */
	if (!lrq_max_wait_ns || scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) <= 0 ||
	    scx_bpf_dsq_nr_queued(lrq_dsq(cpu)) <= 0)
		return 0;
	bpf_for_each(scx_dsq, p, lrq_dsq(cpu), 0) {
		struct task_ctx *tctx = task_ctx(p);

		if (!may_take(p, cpu))
			continue;
		if (!tctx || !tctx->woken || idle_behind(p, idle_slice_ns))
			return 0;
		waited = queued_ns(tctx, scx_bpf_now());
		*pid = p->pid;
		break;
	}
	if (waited <= (s64)lrq_max_wait_ns)
		return 0;
	bpf_for_each(scx_dsq, p, runnext_dsq(cpu), 0) {
		struct task_ctx *tctx = task_ctx(p);

		if (tctx && tctx->preempts)
			return 0;
		break;
	}
	return waited;
}

/*
 * Run task @pid, the first task of @cpu's LRQ that @cpu may take, before
 * @cpu's runnext task, for lrq_starving(): a pick that starts a slice of
 * its own. If another task is first by now (a thief took @pid), nothing
 * moves and the pick goes on in Go's order. @c is @cpu's context. Owner
 * only.
 */
static bool lrq_aged_get(s32 cpu, struct gmp_cpu *c, s64 waited, s32 pid)
{
	struct gmp_event *e;
	s32 len = scx_bpf_dsq_nr_queued(lrq_dsq(cpu));

	if (!take_first(lrq_dsq(cpu), cpu, pid))
		return false;
	stat_add(GMP_STAT_LRQ_AGED, 1);
	e = ev_new(GMP_EV_PICK, GMP_PICK_LRQ_AGED, cpu, -1);
	if (e) {
		e->n = e->want = 1;
		e->len = len;
		e->other = -1;
		e->age = waited;
		ev_seen(e, c);
		ev_send(e);
	}
	return true;
}

/*
 * idle_last: when the task @cpu's own queues would run next (runnext, else
 * the LRQ head) is a SCHED_IDLE task that idle_behind() puts last, @cpu
 * runs first the first task of its LRQ that is not one, else the GRQ head
 * if it is not one. Not Go's rule: Go has no priorities, and a task on the
 * GRQ waits for some P's 61st schedtick or for a P whose own queues are
 * empty. Beside SCHED_IDLE hogs, each preempted at every timer wakeup and
 * put back on its LRQ, no LRQ empties, and a woken task whose slice had run
 * out waited 34 to 86 ms on the GRQ at 4 vCPUs while every CPU ran batch
 * jobs; taking only the GRQ first then left a task queued behind a hog on
 * an LRQ for 84 ms (docs/benchmarks.md, "How long a batch job delays a
 * wakeup"). A SCHED_IDLE task that has waited GMP_IDLE_MAX_WAIT_US runs in
 * Go's order (idle_head()). With --idle-slice-us 0, Go's order. Owner only.
 */
static bool idle_last(s32 cpu)
{
	struct task_struct *p;
	s32 passed, len;

	if (!idle_slice_ns)
		return false;
	passed = idle_head(runnext_dsq(cpu));
	if (passed < 0)
		passed = idle_head(lrq_dsq(cpu));
	if (passed <= 0)
		return false;
	bpf_for_each(scx_dsq, p, lrq_dsq(cpu), 0) {
		s32 pid = p->pid;

		if (idle_behind(p, idle_slice_ns) || !may_take(p, cpu))
			continue;
		/* For the trace: the queue with @p in it, not before a put. */
		len = scx_bpf_dsq_nr_queued(lrq_dsq(cpu));
		if (!run_here(BPF_FOR_EACH_ITER, p, cpu))
			break;
		stat_add(GMP_STAT_BEFORE_IDLE, 1);
		ev_pick(GMP_PICK_LRQ_BEFORE_IDLE, cpu, pid, 1, 1, len, passed);
		return true;
	}
	bpf_for_each(scx_dsq, p, GMP_DSQ_GRQ, 0) {
		s32 pid = p->pid;

		len = scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ);
		if (idle_behind(p, idle_slice_ns) || !may_run(p, cpu) ||
		    !run_here(BPF_FOR_EACH_ITER, p, cpu))
			return false;
		stat_add(GMP_STAT_BEFORE_IDLE, 1);
		ev_pick(GMP_PICK_GRQ_BEFORE_IDLE, cpu, pid, 1, 1, len, passed);
		return true;
	}
	return false;
}

/*
 * Are @cpu's runnext and LRQ, and the GRQ, all empty? Then every step of
 * find_runnable() before the steal would find nothing, and it skips them:
 * the same decisions, without the dozen DSQ lookups those steps make (each
 * kfunc finds a DSQ by its id) on the path of every CPU that goes idle. A
 * put that lands after these reads fares as one that lands just after the
 * step that would have read its queue: a put into @cpu's LRQ from another
 * CPU kicks it (kick_if_other()). Stops at the first queue that holds a
 * task; with tracing on, it answers from what the trace records @c saw.
 * Owner only.
 */
static bool nothing_queued(s32 cpu, const struct gmp_cpu *c)
{
	if (trace_on)
		return c->seen_runnext <= 0 && c->seen_lrq <= 0 && c->seen_grq <= 0;
	return queues_empty(cpu) && scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ) <= 0;
}

/*
 * find_runnable: proc.go findRunnable - the 61st-tick global check, runnext,
 * LRQ, a global batch, then stealing by a spinning CPU; else idle. Three
 * checks that are not Go's come before runnext: grq_starving(),
 * lrq_starving() and idle_last().
 */
static bool find_runnable(s32 cpu, struct gmp_cpu *c, bool prev_queued)
{
	s32 pid = 0;
	s64 waited;

	if (trace_on) {
		c->seen_runnext = scx_bpf_dsq_nr_queued(runnext_dsq(cpu));
		c->seen_lrq = scx_bpf_dsq_nr_queued(lrq_dsq(cpu));
		c->seen_grq = scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ);
		c->seen_tick_grq = 0;
	}
	if (nothing_queued(cpu, c))
		goto steal;
	if (global_every && c->schedtick % global_every == 0) {
		s32 len = scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ);

		if (len > 0 && globrunqget()) {
			c->seen_tick_grq = len;
			stat_add(GMP_STAT_GLOBAL_TICK, 1);
			ev_pick(GMP_PICK_TICK, cpu, -1, 1, 1, len, -1);
			return true;
		}
		/* For the trace: < 0, the GRQ had nothing this CPU may run. */
		c->seen_tick_grq = len > 0 ? -len : 0;
	}
	if (grq_aged_get(cpu))
		return true;
	waited = lrq_starving(cpu, &pid);
	if (waited && lrq_aged_get(cpu, c, waited, pid))
		return true;
	if (idle_last(cpu) || runqget(cpu, c) || globrunqgetbatch(cpu))
		return true;
	if (c->inactive)
		return false;
steal:
	/*
	 * A running task whose slice ended is, in Go, on the GRQ tail, where
	 * the batch above would have found it: Go does not steal then. Here it
	 * is still the CPU's current task, and keeps the CPU (gmp_dispatch).
	 */
	if (prev_queued)
		return false;

	if (!is_spinning(c) && may_spin())
		start_spinning(cpu, c);
	if (is_spinning(c) && steal_work(cpu))
		return true;
	/*
	 * findRunnable's "return P and block": the GRQ once more before the
	 * CPU idles, for a task put there while this CPU spun (its wakep()
	 * woke no one).
	 */
	return globrunqgetbatch(cpu);
}

/*
 * Is there work on the GRQ, or on another CPU that @cpu could steal?
 * proc.go findRunnable's "check global and P runqueues again" after
 * dropping spinning. Any CPU.
 */
static bool work_elsewhere(s32 cpu)
{
	u32 i;

	if (scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ) > 0)
		return true;
	bpf_for(i, 0, nr_cpus) {
		if (i != cpu && !queues_empty(i))
			return true;
	}
	return false;
}

/* Trace @cpu going idle, with what it saw, and the work queued elsewhere. */
static void ev_idle(s32 cpu, struct gmp_cpu *c)
{
	struct gmp_event *e;
	u32 i;
	s32 elsewhere = 0;

	if (!trace_on)
		return;
	bpf_for(i, 0, nr_cpus) {
		if (i != cpu)
			elsewhere += lrq_len(i) + (scx_bpf_dsq_nr_queued(runnext_dsq(i)) > 0);
	}
	e = ev_new(GMP_EV_IDLE, 0, cpu, -1);
	if (e) {
		e->n = elsewhere;
		e->seen_runnext = c->seen_runnext;
		e->seen_lrq = c->seen_lrq;
		e->seen_grq = c->seen_grq;
		e->schedtick = c->schedtick;
		e->nmspinning = nmspinning;
		ev_send(e);
	}
}

static bool debug_stalled(const struct task_struct *p)
{
	int i;

	if (!stall_comm[0])
		return false;
	/* Unrolled: the verifier takes only constant offsets into p->comm. */
#pragma unroll
	for (i = 0; i < sizeof(stall_comm); i++) {
		if (p->comm[i] != stall_comm[i])
			return false;
		if (!stall_comm[i])
			break;
	}
	return true;
}

/*
 * ready(), when an idle CPU is known: a running task woke @p, not as a new
 * thread, and either into another process (unless --go-cross-process) or
 * not as it goes to sleep (not sync; --ready-idle, or while kicks are slow
 * with --ready-idle-slow-pct). Go would put @p in the
 * waker's runnext (a sync one straight in its local DSQ: handoff()) and
 * wakep() an idle P to steal it if the waker runs on; here @p goes straight
 * to an idle CPU it may run on (its previous one first), with one IPI and no
 * spin or steal. Returns that CPU, now claimed, or -1. Not Go's rule
 * (README: "Where Linux differs from Go"). Any CPU (the waker's).
 */
static s32 idle_cpu_for(struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	bool ready;

	if ((wake_flags & SCX_WAKE_FORK) || !cur->pid)
		return -1;
	/*
	 * --ready-idle-slow-pct: while kicks are slow, as --ready-idle, but not
	 * for an exiting waker (a thread's exit waking its joiner): it leaves
	 * its CPU as a sync waker does, and an idle CPU costs a slow kick.
	 */
	ready = ready_idle || (kicks_slow() && !(cur->flags & PF_EXITING));
	if (!(ready && !(wake_flags & SCX_WAKE_SYNC)) &&
	    !(cross_process_idle && other_process(p, cur)))
		return -1;
	return idle_unheld_cpu(p, prev_cpu);
}

s32 BPF_STRUCT_OPS(gmp_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = bpf_get_smp_processor_id();
	s32 idle;

	if (!tctx)
		return prev_cpu;
	idle = idle_cpu_for(p, prev_cpu, wake_flags);
	if (idle >= 0) {
		tctx->runnext_cpu = -1;
		ev_put(GMP_PUT_IDLE, GMP_WHY_WAKE, idle, p, 0);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
		stat_add(GMP_STAT_IDLE_PLACE, 1);
		return idle;
	}
	/*
	 * newproc/ready: the waker's (creator's) runnext, if @p may run there
	 * and no higher class holds the CPU (the waker is then an RT task or
	 * an interrupt: entersyscall).
	 */
	if (may_run(p, cpu) && !cpu_held(cpu)) {
		tctx->runnext_cpu = cpu;
		tctx->sync = wake_flags & SCX_WAKE_SYNC;
		return cpu;
	}
	tctx->runnext_cpu = GMP_NOT_NEXT;
	return unheld_cpu(p, prev_cpu);
}

/*
 * Run woken @p next on @cpu (@c), the CPU it was woken on, straight from the
 * local DSQ with @slice: a runnext put and its pick in one, for handoff() and
 * preempt_at_once(), which trace the pick. Counted as a runnext put and hit,
 * and as @stat. Not a findRunnable: it saw no queue, and made no 61st-tick
 * check. Owner only.
 */
static __always_inline void run_here_next(struct task_struct *p, s32 cpu, struct gmp_cpu *c,
					  u64 slice, u64 enq_flags, u32 why, enum gmp_stat stat)
{
	ev_put(GMP_PUT_RUNNEXT, why, cpu, p, lrq_len(cpu));
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice, enq_flags);
	stat_add(GMP_STAT_RUNNEXT_PUT, 1);
	stat_add(GMP_STAT_RUNNEXT_HIT, 1);
	stat_add(stat, 1);
	c->seen_runnext = 1;
	c->seen_lrq = c->seen_grq = c->seen_tick_grq = 0;
}

/*
 * A sync wakeup into the waker's runnext: the waker is about to sleep, and
 * the task runs next here. Go's runnext and wakep() would make this CPU
 * dispatch it from runnext, and wake an idle CPU to spin, which on Linux
 * only costs an IPI or steals the task away from the CPU whose caches hold
 * its data. So it goes straight to the CPU's local DSQ with what is left of
 * the slice (README: "Where Linux differs from Go"; --go-handoff keeps Go's
 * way). Not when runnext or the local DSQ holds a task, or sysmon has
 * retaken the slice: then runqput(). Owner only (the waker's CPU).
 */
static bool handoff(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	struct gmp_cpu *c = cpu_ctx(cpu);
	struct task_ctx *tctx = task_ctx(p);
	u64 left;

	/* Only into an empty local DSQ: nothing there can be stolen. */
	if (!c || !tctx || cpu != bpf_get_smp_processor_id() || c->held ||
	    scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) > 0 ||
	    scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) > 0)
		return false;
	left = inherit_slice(c, scx_bpf_now());
	if (!left)
		return false;
	tctx->inherit = true;
	run_here_next(p, cpu, c, left, enq_flags, GMP_WHY_WAKE, GMP_STAT_HANDOFF);
	ev_pick(GMP_PICK_HANDOFF, cpu, p->pid, 1, 1, 0, -1);
	return true;
}

/*
 * Was the wakeup just put in @cpu's runnext made by @cpu while it idles,
 * with nothing else queued there? Its waker is then an interrupt (a timer,
 * a device) on the idle CPU, which runs the task as soon as the interrupt
 * returns. Go's ready() would still call wakep(), to wake a second idle
 * CPU that can only steal the task away or find nothing; on Linux that
 * costs an IPI and a dispatch for each timer that fires on an idle system
 * (README: "Where Linux differs from Go"; --go-wakep keeps Go's way).
 * Owner only.
 */
static bool idle_waker(s32 cpu)
{
	struct task_struct *cur = bpf_get_current_task_btf();

	return cpu == bpf_get_smp_processor_id() && !cur->pid && !lrq_len(cpu);
}

/* preempt_after(): a woken task never preempts the running one. */
#define GMP_NEVER ((u64)-1)

/*
 * How long must @cur, running, have run since it last started before woken
 * @p preempts it? wakeup_preempt_ns for any task; cross_preempt_ns for a
 * task of another process, unless @p is a batch job (a SCHED_IDLE task
 * runs only when nothing else wants the CPU: idle_behind()); the shorter if
 * both apply. 0 for a SCHED_IDLE @cur (idle_yields()); GMP_NEVER: @p does
 * not preempt @cur (Go's rule). @rule: which of the three applies (enum
 * gmp_preempt, for the trace). Owner only.
 */
static u64 preempt_after(const struct task_struct *p, const struct task_struct *cur, u32 *rule)
{
	u64 need = wakeup_preempt_ns ? wakeup_preempt_ns : GMP_NEVER;

	*rule = GMP_PREEMPT_ANY;
	if (idle_yields(cur, p, idle_slice_ns)) {
		*rule = GMP_PREEMPT_IDLE;
		return 0;
	}
	if (cross_preempt_ns && cross_preempt_ns < need && !idle_behind(p, idle_slice_ns) &&
	    other_process(p, cur)) {
		*rule = GMP_PREEMPT_CROSS;
		need = cross_preempt_ns;
	}
	return need;
}

/*
 * How much longer the task running on @cpu (@c) must run before woken @p
 * preempts it: 0, at once; GMP_NEVER, not at all (preempt_after(), which
 * sets @rule), or not from here (an idle CPU's interrupt, an exiting waker,
 * another CPU, or a task that gmp_running() did not start here: @c's
 * run_start does not time its run). For preempt_for_wakeup() and
 * preempt_at_once(). Owner only.
 */
static u64 preempt_wait(const struct task_struct *p, s32 cpu, const struct gmp_cpu *c, u32 *rule)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	u64 need, ran;

	if (!cur->pid || cur->pid != c->run_pid || (cur->flags & PF_EXITING) ||
	    cpu != bpf_get_smp_processor_id())
		return GMP_NEVER;
	need = preempt_after(p, cur, rule);
	if (need == GMP_NEVER)
		return GMP_NEVER;
	ran = scx_bpf_now() - c->run_start;
	return ran >= need ? 0 : need - ran;
}

/*
 * A wakeup preemption falls due: preempt the task that preempt_later()
 * armed it for, if that run still goes on. On the CPU it was armed for
 * (pinned), or on another once that one went offline (then the run_start
 * it reads is not its own, and at worst one preemption is lost or spent).
 */
static int preempt_timer_fn(void *map, u32 *key, struct preempt_timer *t)
{
	s32 cpu = *key;
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (c && c->run_start == t->run_start)
		kick_cpu_flags(cpu, SCX_KICK_PREEMPT);
	return 0;
}

/*
 * Preempt the task running on @cpu in @ns, unless it stops first: a woken
 * task would preempt it but for its short run (preempt_for_wakeup()).
 * Returns false if that cannot be armed. A timer armed already for the
 * same run fires sooner or as soon. Owner only.
 */
static bool preempt_later(s32 cpu, struct gmp_cpu *c, u64 ns)
{
	struct preempt_timer *t;
	u32 key = cpu;

	t = bpf_map_lookup_elem(&preempt_timers, &key);
	if (!t)
		return false;
	if (t->run_start == c->run_start)
		return true;
	t->run_start = c->run_start;
	if (!bpf_timer_start(&t->timer, ns, BPF_F_TIMER_CPU_PIN))
		return true;
	t->run_start = 0;
	return false;
}

/*
 * A wakeup, @p, was just put in @cpu's runnext by @cpu itself (an interrupt,
 * or a task that runs on). If the task running there has run for
 * wakeup_preempt_ns or more since it last started (cross_preempt_ns, if it
 * belongs to another process than @p), preempt it, so that the woken task
 * runs now; the preempted task runs next (gmp_enqueue(), with
 * GMP_WHY_PREEMPT; after the LRQ, if tasks wait there), with the rest of its
 * own slice (resume_tick), while the woken task starts a slice of its own
 * (preempts). A task that ran less is preempted once it has run that long
 * (preempt_later(); a waker that is about to sleep, such as each side of a
 * ping-pong, sleeps first). A task that is exiting (a thread that wakes its
 * joiner) runs on. Not Go's rule: a woken goroutine waits in runnext for the
 * running one to block or to be preempted at 10 ms. It is EEVDF's wakeup
 * preemption: by default only for a task of another process
 * (cross_preempt_ns: Go orders the goroutines of one program; between
 * programs a timer thread would wait a whole slice behind another's CPU
 * hog), for any task with --wakeup-preempt-us (README: "Where Linux differs
 * from Go"). A SCHED_IDLE task is preempted for any other woken task,
 * however short its run (idle_yields()).
 * Owner only.
 */
static void preempt_for_wakeup(const struct task_struct *p, s32 cpu)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct gmp_cpu *c = cpu_ctx(cpu);
	struct task_ctx *tctx, *woken;
	u32 rule = GMP_PREEMPT_ANY;
	u64 wait;

	if (!c)
		return;
	wait = preempt_wait(p, cpu, c, &rule);
	tctx = task_ctx(cur);
	if (wait == GMP_NEVER || !tctx)
		return;
	if (!wait) {
		kick_cpu_flags(cpu, SCX_KICK_PREEMPT);
		stat_add(GMP_STAT_WAKEUP_PREEMPT, 1);
	} else if (cur->scx.slice > wait && preempt_later(cpu, c, wait)) {
		stat_add(GMP_STAT_PREEMPT_LATER, 1);
	} else {
		return;
	}
	tctx->preempted = true;
	tctx->resume_tick = c->tick_start;
	woken = task_ctx(p);
	if (woken)
		woken->preempts = true;
}

/*
 * preempt_at_once: a wakeup that preempt_for_wakeup() would preempt the
 * running task for at once, into a runnext and a local DSQ that are both
 * empty, goes straight to the local DSQ with SCX_ENQ_PREEMPT: the kernel
 * then reschedules in this very interrupt, and the CPU needs no dispatch to
 * find the task. Through runnext it ran after a kick, which the kernel
 * bounces through an irq_work, and a dispatch: a timer wakeup beside
 * SCHED_IDLE hogs waited 86 us for its CPU at the median against EEVDF's 29
 * (docs/benchmarks.md, "A wakeup's preemption at once"). The outcome is
 * preempt_for_wakeup()'s: the woken task runs next here on a slice of its
 * own, and the preempted task is queued as it says. Traced as a runnext put
 * and a pick.preempt that names the task preempted, how long it ran and
 * the rule that let it be preempted, which the checker holds to the
 * trace's header. Owner only.
 */
static bool preempt_at_once(struct task_struct *p, s32 cpu, u32 why, u64 enq_flags)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct gmp_cpu *c = cpu_ctx(cpu);
	struct task_ctx *tctx;
	struct gmp_event *e;
	u32 rule = GMP_PREEMPT_ANY;

	/* The cheap test first: most wakeups (one process) never preempt. */
	if (!c || c->held || preempt_wait(p, cpu, c, &rule) ||
	    scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) > 0 ||
	    scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) > 0)
		return false;
	tctx = task_ctx(cur);
	if (!tctx)
		return false;
	tctx->preempted = true;
	tctx->resume_tick = c->tick_start;
	run_here_next(p, cpu, c, slice_ns, enq_flags | SCX_ENQ_PREEMPT, why,
		      GMP_STAT_WAKEUP_PREEMPT);
	e = ev_new(GMP_EV_PICK, GMP_PICK_PREEMPT, cpu, p->pid);
	if (e) {
		e->n = e->want = 1;
		e->other = cur->pid;
		e->round = rule;
		e->age = scx_bpf_now() - c->run_start;
		ev_seen(e, c);
		ev_send(e);
	}
	return true;
}

void BPF_STRUCT_OPS(gmp_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	s32 waker = -1;
	bool yielded = false, sync = false, preempted = false, grq = false;

	if (debug_stalled(p))
		return;
	if (tctx) {
		if (!tctx->queued_at)
			tctx->queued_at = scx_bpf_now();
		waker = tctx->runnext_cpu;
		tctx->runnext_cpu = -1;
		sync = tctx->sync;
		tctx->sync = false;
		yielded = tctx->yielded;
		tctx->yielded = false;
		preempted = tctx->preempted;
		tctx->preempted = false;
		tctx->inherit = false;	/* a runnext pick that did not run */
	}

	/*
	 * Kernel threads are the runtime, not goroutines: like Go's sysmon, which
	 * runs on an M of its own without a P, a woken one runs on its CPU
	 * directly. Behind thousands of tasks in the Go queues, the kernel's own
	 * workers (sched_ext's watchdog among them) would wait for seconds. One
	 * whose slice ran out is queued by Go's rules like any task: put back in
	 * the local DSQ each time, a CPU-bound kernel worker would keep that CPU
	 * from ever reaching its own queues, and the tasks pinned to it. On a
	 * CPU that a real-time task holds (entersyscall) it would wait for
	 * sched_ext's deadline-server share: it goes to another CPU it may
	 * run on that none holds, an idle one if there is one.
	 */
	if ((p->flags & PF_KTHREAD) && (enq_flags & SCX_ENQ_WAKEUP)) {
		cpu = unheld_cpu(p, cpu);
		ev_put(GMP_PUT_KTHREAD, GMP_WHY_WAKE, cpu, p, 0);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
		stat_add(GMP_STAT_KTHREAD, 1);
		kick_if_other(cpu);
		return;
	}

	if (waker >= 0 || (enq_flags & SCX_ENQ_WAKEUP)) {
		u32 why = GMP_WHY_WAKE;
		bool next;

		if (tctx)
			tctx->woken = true;
		/*
		 * No select_cpu(): a pinned task, whose waker is the CPU that
		 * queues it; or one woken while it still left its CPU, which the
		 * kernel queues there from its wakeup IPI, without select_cpu():
		 * the waker, on another CPU, is unknown here, and the task goes
		 * to its own CPU's runnext (why=oncpu; README: "Where Linux
		 * differs from Go").
		 */
		if (waker == -1) {
			waker = bpf_get_smp_processor_id();
			if (!is_pinned(p) && !p->migration_disabled)
				why = GMP_WHY_ONCPU;
		}
		next = waker == cpu && may_run(p, cpu);
		if (next && sync && !go_handoff && handoff(p, cpu, enq_flags))
			return;
		if (next && !sync && (enq_flags & SCX_ENQ_WAKEUP) &&
		    preempt_at_once(p, cpu, why, enq_flags))
			return;
		runqput(p, cpu, next, why, enq_flags);
		if (next && !go_wakep && idle_waker(cpu)) {
			stat_add(GMP_STAT_IDLE_WAKE, 1);
			return;
		}
		if (next && !sync && (enq_flags & SCX_ENQ_WAKEUP))
			preempt_for_wakeup(p, cpu);
		if (next && (enq_flags & SCX_ENQ_WAKEUP) && wakep_later(cpu))
			return;
	} else if (preempted && !p->scx.slice && may_run(p, cpu)) {
		/*
		 * preempt_for_wakeup() ended its slice for a woken task, which
		 * now runs: it runs next, unless a newer wakeup holds runnext,
		 * tasks wait in the LRQ (a wakeup that a newer one pushed out
		 * of runnext there would wait behind it for the rest of its
		 * slice), or it is a batch job (idle_behind()).
		 */
		bool next = !scx_bpf_dsq_nr_queued(runnext_dsq(cpu)) && !lrq_len(cpu) &&
			    !idle_behind(p, idle_slice_ns);

		runqput(p, cpu, next, GMP_WHY_PREEMPT, enq_flags);
	} else if (!p->scx.slice) {
		/* retake -> gopreempt_m, or Gosched: the GRQ tail. */
		u32 why = yielded ? GMP_WHY_YIELD : GMP_WHY_EXPIRE;

		stat_add(yielded ? GMP_STAT_YIELD : GMP_STAT_SLICE_EXPIRED, 1);
		grq = !is_pinned(p);
		if (grq)
			globrunqput(p, why, enq_flags);
		else
			runqput(p, cpu, false, why, enq_flags);
	} else if (may_run(p, cpu) && (!(enq_flags & SCX_ENQ_REENQ) || is_pinned(p))) {
		runqput(p, cpu, false, GMP_WHY_REQUEUE, enq_flags);
	} else {
		/* Or handed off: retake, or procresize (its CPU went offline). */
		globrunqput(p, GMP_WHY_REQUEUE, enq_flags);
		grq = true;
	}
	if (!wakep() && grq && grq_kick)
		grq_put_kick(p);
}

/*
 * pidleput: proc.go pidleput - @cpu found nothing to run and idles: with
 * --go-pidle it goes on top of the idle stack (pidleget()). Its runnext
 * chain ends here: the next task that inherits its slice after it wakes
 * gets a new min_slice_ns grace (inherit_slice()), as Go's sysmon, which
 * looks only at running Ps, lets it run before it retakes it. Owner only.
 */
static void pidleput(s32 cpu, struct gmp_cpu *c)
{
	if (go_pidle)
		c->idle_seq = __sync_fetch_and_add(&pidle_seq, 1) + 1;
	c->retake_at = 0;
	stat_add(GMP_STAT_IDLE, 1);
	ev_idle(cpu, c);
}

void BPF_STRUCT_OPS(gmp_dispatch, s32 cpu, struct task_struct *prev)
{
	struct gmp_cpu *c = cpu_ctx(cpu);
	bool found;

	if (!c)
		return;
	kick_answered(c);
	runnext_flush(cpu);
	runqputslow_flush(cpu);
	retake(cpu);
	c->young_runnext = 0;
	c->inactive = 0;
	found = find_runnable(cpu, c, prev && (prev->scx.flags & SCX_TASK_QUEUED));
	if (stop_spinning(cpu, c)) {
		if (found) {
			wakep(); /* resetspinning: the next P takes over the search */
		} else if (work_elsewhere(cpu) && start_spinning(cpu, c)) {
			/* findRunnable: work came in while we spun; look once more. */
			found = globrunqgetbatch(cpu) || steal_work(cpu);
			stop_spinning(cpu, c);
			if (found)
				wakep();
		}
	}
	if (found)
		return;
	/* Nothing queued: a runnable prev keeps the CPU for a fresh slice. */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		struct task_ctx *tctx = task_ctx(prev);

		if (tctx)
			tctx->yielded = false; /* a yield with no one to yield to */
		prev->scx.slice = idle_slice(prev, slice_ns, idle_slice_ns);
		c->tick_start = scx_bpf_now();
		c->retake_at = 0;
		ev_pick(GMP_PICK_KEEP, cpu, prev->pid, 1, 1, 0, -1);
		return;
	}
	pidleput(cpu, c);
	/*
	 * runqgrab's usleep(3): a victim's runnext was too young to steal. Go
	 * sleeps and looks again; we ask to be dispatched again once idle.
	 */
	if (c->young_runnext) {
		ev_simple(GMP_EV_KICK, GMP_WHY_RECHECK, cpu, -1, cpu);
		kick_cpu(cpu);
	}
}

/*
 * entersyscall: proc.go entersyscall - a real-time or deadline task took
 * @cpu, as a blocking syscall takes a P's M: the task it preempted, and any
 * in its local DSQ, go back to the Go queues; its runnext and LRQ wait until
 * retake hands them off; and until the CPU is back, wakeups and kernel
 * threads that may run elsewhere are not placed here (cpu_held). A
 * stop-class task (a migration) gives the CPU back at once: not a syscall.
 * Owner only.
 */
void BPF_STRUCT_OPS(gmp_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (!c || args->reason == SCX_CPU_PREEMPT_STOP)
		return;
	c->held_at = scx_bpf_now();
	set_held(c, true);
	stat_add(GMP_STAT_SYSCALL, 1);
	/*
	 * The tasks in its local DSQ, the one it preempted at their head,
	 * would run only within the deadline server's share: they come back
	 * through gmp_enqueue() (SCX_ENQ_REENQ), to the GRQ, or to their own
	 * LRQ if they may run nowhere else.
	 */
	scx_bpf_reenqueue_local();
}

/* exitsyscall: proc.go exitsyscall - the CPU is back, and its P takes work. Owner only. */
void BPF_STRUCT_OPS(gmp_cpu_acquire, s32 cpu, struct scx_cpu_acquire_args *args)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (c)
		set_held(c, false);
}

/*
 * procresize: proc.go procresize, for a P it destroys - @cpu went offline:
 * the P stops spinning, its runnext and then its LRQ go to the GRQ head, in
 * order ((*p).destroy), those that may run on @cpu only come back through
 * gmp_enqueue() (SCX_ENQ_REENQ), the kernel moves the tasks in its local
 * DSQ, and wakep() finds them a CPU. Handled here, the kernel does not ask
 * the agent to restart, which would put every task under the kernel's own
 * scheduler in between: there, under the soak, a preempted task waited 21 s
 * and stalled RCU (README, "When things go wrong"). Any CPU.
 */
void BPF_STRUCT_OPS(gmp_cpu_offline, s32 cpu)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (c) {
		set_held(c, true);
		stop_spinning(cpu, c);
	}
	dsq_to_grq(lrq_dsq(cpu), GMP_WHY_PROCRESIZE, true, true);
	dsq_to_grq(runnext_dsq(cpu), GMP_WHY_PROCRESIZE, true, true);
	scx_bpf_dsq_reenq(runnext_dsq(cpu), 0);
	scx_bpf_dsq_reenq(lrq_dsq(cpu), 0);
	stat_add(GMP_STAT_PROCRESIZE, 1);
	wakep();
}

/* procresize: a CPU came online; its P starts idle and empty. Any CPU. */
void BPF_STRUCT_OPS(gmp_cpu_online, s32 cpu)
{
	struct gmp_cpu *c = cpu_ctx(cpu);

	if (c)
		set_held(c, false);
	stat_add(GMP_STAT_PROCRESIZE, 1);
}

void BPF_STRUCT_OPS(gmp_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct gmp_cpu *c = cpu_ctx(cpu);
	struct task_ctx *tctx = task_ctx(p);

	p->scx.slice = idle_slice(p, p->scx.slice, idle_slice_ns);
	if (!c)
		return;
	/*
	 * Called from another CPU, running() restores the task that already
	 * runs on @cpu, after a change made to it from there (its affinity, its
	 * nice value): its run, schedtick and slice go on. Taken as a new run
	 * of the calling CPU, it gave that CPU's task this one's run start, and
	 * a wakeup there preempted it for a run it had not had (the checker's
	 * preempt-running rule found it, under stress-ng's affinity changes).
	 */
	if (cpu != bpf_get_smp_processor_id()) {
		ev_simple(GMP_EV_RUN, 1, cpu, p->pid, -1);
		return;
	}
	c->run_start = scx_bpf_now();
	c->run_pid = p->pid;
	stop_spinning(cpu, c);
	if (tctx && tctx->queued_at) {
		s64 waited = queued_ns(tctx, scx_bpf_now());

		if (waited > (s64)c->max_wait_ns)
			c->max_wait_ns = waited;
		tctx->queued_at = 0;
	}
	if (tctx) {
		tctx->yielded = false;
		tctx->preempts = false;
		tctx->resume_tick = 0;
		tctx->woken = false;
	}
	if (tctx && tctx->inherit) {
		tctx->inherit = false; /* runnext: schedtick and slice go on */
		ev_simple(GMP_EV_RUN, 1, cpu, p->pid, -1);
		return;
	}
	c->schedtick++;
	c->tick_start = scx_bpf_now();
	c->retake_at = 0;
	ev_simple(GMP_EV_RUN, 0, cpu, p->pid, -1);
}

/* Trace only: @p stopped being runnable, so it left the queues. */
void BPF_STRUCT_OPS(gmp_quiescent, struct task_struct *p, u64 deq_flags)
{
	ev_simple(GMP_EV_SLEEP, 0, scx_bpf_task_cpu(p), p->pid, -1);
}

bool BPF_STRUCT_OPS(gmp_yield, struct task_struct *from, struct task_struct *to)
{
	struct task_ctx *tctx = task_ctx(from);

	if (to)
		return false;
	/* Gosched: end the slice; gmp_enqueue() sends the task to the GRQ. */
	if (tctx)
		tctx->yielded = true;
	from->scx.slice = 0;
	return false;
}

s32 BPF_STRUCT_OPS(gmp_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->runnext_cpu = -1;
	return 0;
}

void BPF_STRUCT_OPS(gmp_enable, struct task_struct *p)
{
	__sync_fetch_and_add(&nr_tasks, 1);
}

void BPF_STRUCT_OPS(gmp_disable, struct task_struct *p)
{
	__sync_fetch_and_sub(&nr_tasks, 1);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(gmp_init)
{
	s32 err;
	u32 i;

	bpf_for(i, 0, nr_cpus) {
		err = scx_bpf_create_dsq(lrq_dsq(i), -1);
		if (!err)
			err = scx_bpf_create_dsq(runnext_dsq(i), -1);
		if (err) {
			scx_bpf_error("failed to create the run queues of CPU %u: %d", i, err);
			return err;
		}
	}
	err = scx_bpf_create_dsq(GMP_DSQ_GRQ, -1);
	if (err) {
		scx_bpf_error("failed to create the global run queue: %d", err);
		return err;
	}
	err = init_cpu_timers(&preempt_timers, preempt_timer_fn,
			      cross_preempt_ns || wakeup_preempt_ns ? nr_cpus : 0);
	if (!err && wakep_delay_ns)
		err = init_cpu_timers(&wakep_timers, wakep_timer_fn, nr_cpus);
	return err;
}

void BPF_STRUCT_OPS(gmp_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

/*
 * Our part of sched_ext's dump when the scheduler exits on an error (the
 * agent prints it): the GRQ, and each P's queues and state, so that a stall
 * shows where the task that waited was left.
 */
void BPF_STRUCT_OPS(gmp_dump, struct scx_dump_ctx *dctx)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	u32 i;

	scx_bpf_dump("gmp: grq=%d nmspinning=%llu nr_held=%u\n",
		     scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ), nmspinning, nr_held);
	bpf_for(i, 0, nr_cpus) {
		struct gmp_cpu *c = cpu_ctx(i);

		if (!c)
			break;
		scx_bpf_dump("gmp: cpu%u runnext=%d lrq=%d held=%u spinning=%d idle=%d released=%llu\n",
			     i, scx_bpf_dsq_nr_queued(runnext_dsq(i)),
			     scx_bpf_dsq_nr_queued(lrq_dsq(i)), c->held, is_spinning(c),
			     bpf_cpumask_test_cpu(i, idle), c->stats[GMP_STAT_RELEASED]);
	}
	scx_bpf_put_idle_cpumask(idle);
}

/* snapshot: run by the agent (BPF_PROG_RUN) to read the queue lengths. */
SEC("syscall")
int snapshot(void *ctx)
{
	const struct cpumask *idle;
	u32 i;

	bpf_for(i, 0, nr_cpus) {
		struct gmp_cpu *c = cpu_ctx(i);

		if (!c)
			break;
		c->snap_lrq = scx_bpf_dsq_nr_queued(lrq_dsq(i));
		c->snap_runnext = scx_bpf_dsq_nr_queued(runnext_dsq(i));
	}
	snap_grq = scx_bpf_dsq_nr_queued(GMP_DSQ_GRQ);
	idle = scx_bpf_get_idle_cpumask();
	snap_idle = bpf_cpumask_weight(idle);
	scx_bpf_put_idle_cpumask(idle);
	return 0;
}

SCX_OPS_DEFINE(gmp_ops,
	       .select_cpu = (void *)gmp_select_cpu,
	       .enqueue = (void *)gmp_enqueue,
	       .dispatch = (void *)gmp_dispatch,
	       .running = (void *)gmp_running,
	       .quiescent = (void *)gmp_quiescent,
	       .yield = (void *)gmp_yield,
	       .cpu_online = (void *)gmp_cpu_online,
	       .cpu_offline = (void *)gmp_cpu_offline,
	       .cpu_release = (void *)gmp_cpu_release,
	       .cpu_acquire = (void *)gmp_cpu_acquire,
	       .init_task = (void *)gmp_init_task,
	       .enable = (void *)gmp_enable,
	       .disable = (void *)gmp_disable,
	       .init = (void *)gmp_init,
	       .exit = (void *)gmp_exit,
	       .dump = (void *)gmp_dump,
	       .timeout_ms = GMP_TIMEOUT_MS,
	       .name = "gmp");
