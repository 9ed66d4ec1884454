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

#endif /* __GMP_IDLE_BPF_H */
