/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Processes, for both BPF programs (bpf/main.bpf.c and user/bpf/main.bpf.c).
 */
#ifndef __GMP_PROCESS_BPF_H
#define __GMP_PROCESS_BPF_H

/*
 * Are @p and @cur user tasks of two processes? Go's policy orders the
 * goroutines of one program, and its runnext hands a goroutine to another
 * of the same address space; on Linux a hand-off between two processes on
 * one CPU switches the address space. A kernel thread (no mm) belongs to
 * none. Any CPU.
 */
static bool other_process(const struct task_struct *p, const struct task_struct *cur)
{
	return cur->mm && p->mm && cur->mm != p->mm;
}

#endif /* __GMP_PROCESS_BPF_H */
