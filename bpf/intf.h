/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Interface shared by the BPF scheduler (main.bpf.c) and all Rust code
 * (bindgen turns this header into gmp_intf.rs, see src/bpf_intf.rs).
 */
#pragma once

enum gmp_consts {
	GMP_MAX_CPUS = 512,		/* managed CPU ids: 0 .. GMP_MAX_CPUS-1 */
	GMP_NSEC_PER_USEC = 1000,	/* every knob in us is used in ns */
	/*
	 * The sched_ext watchdog: a task left runnable this long ejects the
	 * scheduler. Go's FIFO queues may hold a task for seconds under overload
	 * (1000 tasks of 20 ms on 4 CPUs: 5 s), so both modes use the kernel's
	 * own maximum and default, 30 s.
	 */
	GMP_TIMEOUT_MS = 30000,
	/*
	 * The decision trace's ring buffer (--trace), which the agent drains
	 * every GMP_TRACE_POLL_MS; no record wakes it. Woken by records, or
	 * waiting in poll(), which returns at once while the ring holds any,
	 * the agent never slept: its own runs made records, and it held a CPU
	 * that Go's rules then never let steal.
	 */
	GMP_TRACE_RB_BYTES = 16 << 20,
	GMP_TRACE_POLL_MS = 50,
	/*
	 * A kicked CPU that takes longer than this to dispatch is counted as
	 * slow (kick slow=): at 2 vCPUs on 2 host cores 0.6% to 2.2% of the
	 * kicks were; at 4 vCPUs 6% to 22%, the woken vCPU waiting for a host
	 * core (docs/benchmarks.md).
	 */
	GMP_KICK_SLOW_US = 1000,
	/*
	 * The share of slow kicks, as --ready-idle-slow-pct reads it: a moving
	 * average over about the last 2^GMP_KICK_SHARE_SHIFT answers, in
	 * parts of GMP_KICK_SHARE_ONE.
	 */
	GMP_KICK_SHARE_ONE = 1 << 16,
	GMP_KICK_SHARE_SHIFT = 6,
	/*
	 * A SCHED_IDLE task queued this long runs in Go's order, no longer
	 * passed over for other work (idle_last()): passed over for ever, it
	 * would stall, and the kernel's watchdog eject the scheduler.
	 */
	GMP_IDLE_MAX_WAIT_US = 100000,
};

/*
 * Go's constants: the default of each knob, defined here once and used by the
 * BPF side, the command line and the model (docs/go-policy.md).
 */
enum gmp_defaults {
	GMP_SLICE_US_DFL = 10000,	/* forcePreemptNS: 10 ms */
	GMP_MIN_SLICE_US_DFL = 20,	/* sysmon's fastest poll: 20 us */
	GMP_RUNNEXT_GRACE_US_DFL = 3,	/* runqgrab's usleep(3) */
	GMP_LRQ_CAP_DFL = 256,		/* len(p.runq) */
	GMP_GLOBAL_EVERY_DFL = 61,	/* schedtick%61 in findRunnable */
	GMP_STEAL_TRIES_DFL = 4,	/* stealTries */
	/* Not Go's: the longest a task waits at the GRQ head (README). */
	GMP_GLOBAL_MAX_WAIT_MS_DFL = 100,
	/* Not Go's: wakeup preemption, off (README). */
	GMP_WAKEUP_PREEMPT_US_DFL = 0,
	/* Not Go's: a wakeup into another process preempts (README). */
	GMP_CROSS_PREEMPT_US_DFL = 250,
	/* Not Go's: wakep() at once, as Go's ready() does (README). */
	GMP_WAKEP_DELAY_US_DFL = 0,
	/* Not Go's: wakeups on idle CPUs once kicks are slow; off (README). */
	GMP_READY_IDLE_SLOW_PCT_DFL = 0,
	/* Not Go's: the wakep() delay only once kicks are slow; 0: always (README). */
	GMP_WAKEP_DELAY_SLOW_PCT_DFL = 0,
	/* Not Go's: the longest slice of a SCHED_IDLE task (README). */
	GMP_IDLE_SLICE_US_DFL = 1000,
	/* Not Go's: the longest an LRQ head waits behind runnext (README). */
	GMP_LRQ_MAX_WAIT_US_DFL = 1000,
};

/*
 * DSQ ids. Each CPU (a Go P) owns its local run queue (LRQ) and its 1-slot
 * runnext; one global DSQ is Go's global run queue (GRQ).
 */
enum gmp_dsq_base {
	GMP_DSQ_LRQ = 0,		  /* + cpu */
	GMP_DSQ_RUNNEXT = GMP_MAX_CPUS,	  /* + cpu */
	GMP_DSQ_GRQ = 2 * GMP_MAX_CPUS,
};

/*
 * Per-CPU counters, one for each Go rule. Userspace sums them over CPUs; the
 * table in src/stats.rs names each one (a new counter: one line here, one
 * there).
 */
enum gmp_stat {
	GMP_STAT_RUNNEXT_PUT,	/* runqput(next=true): woken/forked task into runnext */
	GMP_STAT_RUNNEXT_KICK,	/* an older runnext task was kicked to the LRQ tail */
	GMP_STAT_RUNNEXT_HIT,	/* runqget took runnext (slice inherited) */
	GMP_STAT_LRQ_PUT,	/* runqput to the LRQ tail */
	GMP_STAT_LRQ_GET,	/* runqget took the LRQ head */
	GMP_STAT_OVERFLOW,	/* runqputslow: a put found the LRQ full */
	GMP_STAT_OVERFLOW_TASKS, /* tasks runqputslow moved to the GRQ */
	GMP_STAT_GLOBAL_PUT,	/* globrunqput: slice expiry, yield, overflow */
	GMP_STAT_GLOBAL_TICK,	/* the every-global_every-th schedtick GRQ take */
	GMP_STAT_GLOBAL_BATCH,	/* globrunqgetbatch calls that got work */
	GMP_STAT_GLOBAL_BATCH_TASKS, /* tasks those batches took */
	GMP_STAT_STEAL_TRY,	/* runqsteal calls (victims probed) */
	GMP_STAT_STEAL_OK,	/* runqsteal calls that got work */
	GMP_STAT_STOLEN_TASKS,	/* tasks stolen, runnext included */
	GMP_STAT_STOLEN_RUNNEXT, /* of those, taken from a victim's runnext */
	GMP_STAT_SLICE_EXPIRED,	/* a task's 10 ms slice ran out */
	GMP_STAT_YIELD,		/* sched_yield(), Go's Gosched */
	GMP_STAT_IDLE,		/* find_runnable found nothing: the CPU idles */
	GMP_STAT_KICK,		/* wakep woke an idle CPU */
	GMP_STAT_SPIN,		/* a CPU started spinning (looking for work) */
	GMP_STAT_KTHREAD,	/* woken kernel threads run on their CPU directly */
	GMP_STAT_TRACE_DROPPED,	/* trace events lost: the ring buffer was full */
	GMP_STAT_HANDOFF,	/* sync wakeups run next on the waker's CPU directly */
	GMP_STAT_SYSCALL,	/* entersyscall: a real-time or deadline task took a CPU */
	GMP_STAT_RETAKE,	/* retake: a held CPU's queues were handed off */
	GMP_STAT_RETAKE_TASKS,	/* tasks those handoffs moved */
	GMP_STAT_GLOBAL_AGED,	/* GRQ heads taken first for having waited too long */
	GMP_STAT_IDLE_WAKE,	/* wakeups an idle CPU ran itself, with no wakep() */
	GMP_STAT_PROCRESIZE,	/* procresize: a CPU went offline or came online */
	GMP_STAT_RELEASED,	/* tasks a CPU on its way offline could not run, given up */
	GMP_STAT_IDLE_PLACE,	/* wakeups run at once on an idle CPU (user mode; --ready-idle) */
	GMP_STAT_WAKEUP_PREEMPT, /* wakeups that preempted the running task */
	GMP_STAT_WAKEP_LATE,	/* delayed wakep()s whose task still waited */
	GMP_STAT_LOCK_HANDOFF,	/* user mode: kernel-lock wakeups run next on the waker's CPU */
	GMP_STAT_LOCK_REFUSED,	/* user mode: kernel-lock wakeups sent to the agent after a streak */
	GMP_STAT_KICK_ANSWERED,	/* wakep kicks whose CPU has dispatched since */
	GMP_STAT_KICK_WAIT_US,	/* their time from kick to dispatch, in us */
	GMP_STAT_KICK_SLOW,	/* of those, answered after GMP_KICK_SLOW_US */
	GMP_STAT_BEFORE_IDLE,	/* LRQ tasks and GRQ heads run before a SCHED_IDLE task */
	GMP_STAT_PREEMPT_LATER,	/* wakeups that set a timer to preempt the running task */
	GMP_STAT_LRQ_AGED,	/* LRQ heads run before runnext for having waited too long */
	GMP_STAT_GRQ_KICK,	/* GRQ puts whose wakep() woke none: the other CPUs kicked */
	GMP_NR_STATS,
};

/*
 * Per-CPU state, on its own cache line. Who may touch each field, in Go's
 * words: "owner" is the CPU it describes, in its own ops callbacks.
 */
struct gmp_cpu {
	/* Counters: each CPU adds to its own; the agent reads them. */
	unsigned long long stats[GMP_NR_STATS];
	/* Tasks started that did not inherit a slice. Owner only. */
	unsigned long long schedtick;
	/* When the current (maybe shared) slice began, owner's clock (ns). Owner only. */
	unsigned long long tick_start;
	/* When the running task last started running here (ns). Owner only. */
	unsigned long long run_start;
	/* That task: a wakeup preempts no other (preempt_wait()). Owner only. */
	int run_pid;
	/* When runnext was last filled (ns). Written by whichever CPU fills it
	 * (the waker), read by thieves: a hint, read without a lock. */
	unsigned long long runnext_at;
	/* The vtime of the task last put in runnext, and how many LRQ puts
	 * have been queued behind the tasks it displaced since (runqput()).
	 * Written by whichever CPU fills runnext or the LRQ, under this CPU's
	 * run-queue lock. */
	unsigned long long runnext_vtime;
	unsigned int lrq_behind;
	/* A CPU is making runqputslow's half-LRQ move (runqputslow_flush()):
	 * one at a time. Any CPU, atomically. It fills the hole before the
	 * next u64, so that no field after it moves: shifting them all by 4
	 * bytes cost 40 ms/s of scheduler CPU under the 2-vCPU ping-pong
	 * (docs/benchmarks.md, "The overflow's half-move made one at a time"). */
	unsigned int ovf_busy;
	/* When sysmon retakes a spent slice (ns); 0: not spent. Owner only. */
	unsigned long long retake_at;
	/* This CPU is looking for work while odd: each start and each stop
	 * adds one, so the trace can order them (is_spinning()). Any CPU,
	 * atomically (it pairs with the global nmspinning). */
	unsigned int spin_seq;
	/* runqputslow's half-LRQ move is due. Any CPU, atomically. */
	unsigned int ovf_pending;
	/* A delayed wakep() is armed on this CPU (--wakep-delay-us). Set by
	 * the owner, cleared by its timer, atomically. */
	unsigned int wakep_armed;
	/* LRQ and runnext DSQ lengths, written by the snapshot program only. */
	int snap_lrq;
	int snap_runnext;
	/* What find_runnable saw, for the trace only: the GRQ on entry, runnext
	 * and the LRQ after runqget's failed looks. Owner only. */
	int seen_runnext;
	int seen_lrq;
	int seen_grq;
	int seen_tick_grq;	/* the GRQ length the 61st-tick check saw */
	/* A victim's runnext was left alone for being younger than the grace:
	 * look again before idling for long. Owner only. */
	unsigned int young_runnext;
	/* This dispatch found the CPU inactive, on its way offline: it may
	 * not run a task from another CPU (take_batch()). Owner only. */
	unsigned int inactive;
	/* A higher class (RT, deadline) holds this CPU, Go's P in a syscall,
	 * from cpu_release to cpu_acquire, or it is offline. Changed only by
	 * set_held (atomically, with nr_held); read by any CPU, a hint. */
	unsigned int held;
	/* When the CPU was last taken by a higher class (ns). Owner only. */
	unsigned long long held_at;
	/* The longest a task waited here from being queued to running (ns). Owner only. */
	unsigned long long max_wait_ns;
	/* When this CPU last idled, in pidleput() order: pidleget() takes the
	 * largest. Written by the owner, read by any CPU (a hint). */
	unsigned long long idle_seq;
	/* When wakep() last kicked this CPU (bpf_ktime_get_ns()); 0 once its
	 * dispatch has answered. Set by the kicker, taken by the owner,
	 * atomically. */
	unsigned long long kicked_at;
} __attribute__((aligned(64)));

/*
 * The decision trace (scx_gmp --trace FILE): one record per policy decision,
 * in a BPF ring buffer; the agent writes each as a line of text (src/trace.rs)
 * and `scx_gmp check FILE` replays them against Go's rules (src/check.rs).
 */
enum gmp_ev {
	GMP_EV_PUT,	/* a task was queued: sub is a gmp_put */
	GMP_EV_PICK,	/* a CPU found a task: sub is a gmp_pick */
	GMP_EV_RUN,	/* a task started running (ops.running) */
	GMP_EV_SLEEP,	/* a task stopped being runnable (ops.quiescent) */
	GMP_EV_IDLE,	/* find_runnable found nothing */
	GMP_EV_SPIN,	/* sub 1: a CPU started spinning, 0: it stopped */
	GMP_EV_KICK,	/* a CPU was kicked: sub is a gmp_why */
	GMP_EV_MOVE,	/* a late move between queues: sub is a gmp_move */
	GMP_NR_EV,
};

/* Where a put went. */
enum gmp_put {
	GMP_PUT_RUNNEXT,	/* runqput(next): other = the task it displaced */
	GMP_PUT_LRQ,		/* runqput: the LRQ tail */
	GMP_PUT_GRQ,		/* globrunqput */
	GMP_PUT_OVERFLOW,	/* runqputslow: the LRQ was full; to the GRQ */
	GMP_PUT_KTHREAD,	/* a woken kernel thread, on its CPU directly */
	GMP_PUT_IDLE,		/* --ready-idle: a wakeup, on an idle CPU directly */
	GMP_NR_PUT,
};

/* Why a task was put, or a CPU kicked. */
enum gmp_why {
	GMP_WHY_WAKE,		/* woken or new: ready() */
	GMP_WHY_EXPIRE,		/* its slice ran out: retake */
	GMP_WHY_YIELD,		/* sched_yield: Gosched */
	GMP_WHY_REQUEUE,	/* the kernel queued it again, slice left */
	GMP_WHY_RETAKE,		/* a runnext whose inherited slice was spent */
	GMP_WHY_WAKEP,		/* kick: wakep woke an idle CPU to spin */
	GMP_WHY_OWNER,		/* kick: work was queued on that CPU */
	GMP_WHY_AFFINITY,	/* kick: an idle CPU that may run the task */
	GMP_WHY_RECHECK,	/* kick: itself, to look at a young runnext again */
	GMP_WHY_HANDOFF,	/* handoffp: from a CPU a real-time task holds, to the GRQ */
	GMP_WHY_PREEMPT,	/* preempted by a wakeup (--wakeup-preempt-us): runs next */
	GMP_WHY_PROCRESIZE,	/* procresize: from a CPU on its way offline, to the GRQ */
	GMP_WHY_ONCPU,		/* woken while still leaving its CPU: queued there, waker unknown */
	GMP_WHY_GRQ,		/* kick: the other CPUs, for a GRQ put no wakep() announced */
	GMP_NR_WHY,
};

/* Where a pick came from, in findRunnable's order. */
enum gmp_pick {
	GMP_PICK_TICK,		/* the every-61st-schedtick GRQ take */
	GMP_PICK_RUNNEXT,	/* runqget: runnext */
	GMP_PICK_LRQ,		/* runqget: the LRQ head */
	GMP_PICK_BATCH,		/* globrunqgetbatch: n of want */
	GMP_PICK_STEAL,		/* runqsteal: n of want from other's LRQ */
	GMP_PICK_STEAL_RUNNEXT,	/* runqsteal: other's runnext, in round `round` */
	GMP_PICK_KEEP,		/* nothing queued: the running task goes on */
	GMP_PICK_HANDOFF,	/* a sync wakeup run next on the waker's CPU directly */
	GMP_PICK_AGED,		/* the GRQ head, waiting longer than global_max_wait_ns */
	GMP_PICK_LRQ_BEFORE_IDLE, /* an LRQ task, before the SCHED_IDLE task `other` ahead of it */
	GMP_PICK_GRQ_BEFORE_IDLE, /* the GRQ head, before the SCHED_IDLE task `other` queued here */
	GMP_PICK_LRQ_AGED,	/* the LRQ head before runnext, waiting `age` > lrq_max_wait_ns */
	GMP_PICK_PREEMPT,	/* a wakeup run at once on the waker's CPU, preempting the
				 * task `other` after it ran `age` ns, by rule `round` */
	GMP_NR_PICK,
};

/* Which rule let a wakeup preempt the running task (preempt_after()). */
enum gmp_preempt {
	GMP_PREEMPT_IDLE,	/* the running task is a SCHED_IDLE one: idle_slice_ns */
	GMP_PREEMPT_CROSS,	/* it is of another process: cross_preempt_ns */
	GMP_PREEMPT_ANY,	/* any task: wakeup_preempt_ns */
	GMP_NR_PREEMPT,
};

/* Late moves (main.bpf.c explains why they are late). */
enum gmp_move {
	GMP_MOVE_KICKED,	/* runnext_flush: a displaced runnext to the LRQ tail */
	GMP_MOVE_OVERFLOW,	/* runqputslow_flush: n of len LRQ tasks to the GRQ */
	GMP_MOVE_PENDING,	/* a put overflowed: the half-move is due */
	GMP_NR_MOVE,
};

struct gmp_event {
	unsigned long long ts;	/* bpf_ktime_get_ns(): one clock for all CPUs */
	unsigned char kind;	/* enum gmp_ev */
	unsigned char sub;	/* enum gmp_put / gmp_pick / gmp_move / gmp_why */
	unsigned char why;	/* puts: enum gmp_why */
	unsigned char round;	/* steals: the stealWork round; preempts: enum gmp_preempt */
	int cpu;		/* the CPU (P) the decision is about */
	int pid;		/* the task, or -1 */
	int other;		/* displaced task, victim CPU, kicker CPU, or -1 */
	int n;			/* tasks moved, a queue length after a put, or
				 * a spin's spin_seq after it */
	int want;		/* tasks the rule asked for */
	int len;		/* the length the rule was computed from */
	int seen_runnext;	/* picks and idles: what the CPU saw on entry */
	int seen_lrq;		/* (after its last look; < 0: none may run here) */
	int seen_grq;		/* (the GRQ as the batch saw it; < 0: none may run here) */
	int tick_grq;		/* the GRQ as the 61st-tick check saw it; < 0: none may run here */
	unsigned int schedtick;	/* picks and runs: the CPU's schedtick */
	unsigned int nmspinning; /* spins and idles: nmspinning after */
	long long age;		/* runnext steals: how long it waited; preempts: how long
				 * `other` ran (ns) */
	int allowed;		/* puts: the CPUs the task may run on (1: pinned) */
};
