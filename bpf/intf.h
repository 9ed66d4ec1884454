/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Interface shared by the BPF scheduler (main.bpf.c) and the Rust agent
 * (bindgen turns this header into bpf_intf.rs).
 */
#pragma once

enum gmp_consts {
	GMP_MAX_CPUS = 512, /* managed CPU ids: 0 .. GMP_MAX_CPUS-1 */
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

/* Per-CPU counters, one for each Go rule. Userspace sums them over CPUs. */
enum gmp_stat {
	GMP_STAT_RUNNEXT_PUT,	/* runqput(next=true): woken/forked task into runnext */
	GMP_STAT_RUNNEXT_KICK,	/* an older runnext task was kicked to the LRQ tail */
	GMP_STAT_RUNNEXT_HIT,	/* runqget took runnext (slice inherited) */
	GMP_STAT_LRQ_PUT,	/* runqput to the LRQ tail */
	GMP_STAT_LRQ_GET,	/* runqget took the LRQ head */
	GMP_STAT_OVERFLOW,	/* runqputslow: a put found the LRQ full */
	GMP_STAT_OVERFLOW_TASKS, /* tasks runqputslow moved to the GRQ */
	GMP_STAT_GLOBAL_PUT,	/* globrunqput: slice expiry, yield, overflow */
	GMP_STAT_GLOBAL_61,	/* the every-61st-schedtick take from the GRQ */
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
	GMP_STAT_LOCKED,	/* kernel threads run on their CPU directly */
	GMP_NR_STATS,
};

/* Per-CPU state, on its own cache line. */
struct gmp_cpu {
	unsigned long long stats[GMP_NR_STATS];
	unsigned long long schedtick;	/* tasks started that did not inherit */
	unsigned long long tick_start;	/* when the current slice began (ns) */
	unsigned long long runnext_at;	/* when runnext was last filled (ns) */
	unsigned long long retake_at;	/* when sysmon retakes a spent slice (ns) */
	unsigned int spinning;		/* this CPU is looking for work */
	unsigned int ovf_pending;	/* runqputslow's half-LRQ move is due */
	int snap_lrq;			/* LRQ length, filled by snapshot() */
	int snap_runnext;		/* runnext DSQ length, filled by snapshot() */
} __attribute__((aligned(64)));
