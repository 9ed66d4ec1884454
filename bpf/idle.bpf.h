/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SCHED_IDLE tasks, for both BPF programs (bpf/main.bpf.c and
 * user/bpf/main.bpf.c).
 */
#ifndef __GMP_IDLE_BPF_H
#define __GMP_IDLE_BPF_H

/* The kernel's value (include/uapi/linux/sched.h). */
#define GMP_SCHED_IDLE 5

/*
 * idle_slice: the slice @p may run, given @slice: at most @idle_max for a
 * SCHED_IDLE task, which its user marked "run only when nothing else wants
 * the CPU"; with @idle_max 0, @slice, as for every task. Not Go's rule: Go
 * has no priorities (README, "Where Linux differs from Go"). Any CPU.
 */
static u64 idle_slice(const struct task_struct *p, u64 slice, u64 idle_max)
{
	if (idle_max && p->policy == GMP_SCHED_IDLE && slice > idle_max)
		return idle_max;
	return slice;
}

/*
 * idle_yields: whether @cur, running, gives its CPU up at once to @p, just
 * queued to run there: @cur is a SCHED_IDLE task, @p is not, and SCHED_IDLE
 * tasks get the short slice (@idle_max set). Else the woken task waits for
 * the rest of the batch job's slice, which the kernel's tick rounds up (4 ms
 * at 250 Hz). Not Go's rule, as idle_slice() (README, "Where Linux differs
 * from Go"). Any CPU.
 */
static bool idle_yields(const struct task_struct *cur, const struct task_struct *p,
			u64 idle_max)
{
	return idle_max && cur->pid && cur->policy == GMP_SCHED_IDLE &&
	       p->policy != GMP_SCHED_IDLE;
}

/*
 * idle_behind: whether @p, preempted by idle_yields() for a woken task,
 * goes behind the tasks queued on its CPU rather than running next: a
 * SCHED_IDLE task, with the short slice on (@idle_max set). Running next,
 * it took runnext back each time a 1 ms timer preempted it (the woken task
 * had left runnext by then), and a task that the timer's wakeup displaced
 * to the LRQ waited behind it for the whole 10 ms slice that runnext tasks
 * share: cyclictest's main thread waited 10 to 13 ms beside SCHED_IDLE
 * hogs, over issue 12's bound of one slice (docs/benchmarks.md, "How long
 * a batch job delays a wakeup"). Any CPU.
 */
static bool idle_behind(const struct task_struct *p, u64 idle_max)
{
	return idle_max && p->policy == GMP_SCHED_IDLE;
}

#endif /* __GMP_IDLE_BPF_H */
