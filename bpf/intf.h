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
	/* When runnext was last filled (ns). Written by whichever CPU fills it
	 * (the waker), read by thieves: a hint, read without a lock. */
	unsigned long long runnext_at;
	/* When sysmon retakes a spent slice (ns); 0: not spent. Owner only. */
	unsigned long long retake_at;
	/* This CPU is looking for work. Any CPU, atomically (it pairs with
	 * the global nmspinning). */
	unsigned int spinning;
	/* runqputslow's half-LRQ move is due. Any CPU, atomically. */
	unsigned int ovf_pending;
	/* LRQ and runnext DSQ lengths, written by the snapshot program only. */
	int snap_lrq;
	int snap_runnext;
} __attribute__((aligned(64)));
