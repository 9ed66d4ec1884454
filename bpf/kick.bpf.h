/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kicks, for both BPF programs (bpf/main.bpf.c and user/bpf/main.bpf.c).
 */
#ifndef __GMP_KICK_BPF_H
#define __GMP_KICK_BPF_H

/*
 * Is this CPU on its way offline (out of the online mask)? A kick is an
 * irq_work queued on the kicking CPU, and one queued after a dying CPU ran
 * its last irq_works stays pending for good: that CPU's later kicks never
 * run, and unloading the scheduler spins forever in the kernel's
 * irq_work_sync() (README, "Hotplug"). So a dying CPU kicks no one: the
 * kernel's wakeup reschedules the CPU a task was placed on, and other CPUs
 * kick the rest. Any CPU.
 */
static bool this_cpu_dying(void)
{
	const struct cpumask *online = scx_bpf_get_online_cpumask();
	bool dying = !bpf_cpumask_test_cpu(bpf_get_smp_processor_id(), online);

	scx_bpf_put_cpumask(online);
	return dying;
}

/* Kick @cpu with @flags (SCX_KICK_*), unless this CPU is dying. Any CPU. */
static void kick_cpu_flags(s32 cpu, u64 flags)
{
	if (!this_cpu_dying())
		scx_bpf_kick_cpu(cpu, flags);
}

/* Wake @cpu if it idles, unless this CPU is dying. Any CPU. */
static void kick_cpu(s32 cpu)
{
	kick_cpu_flags(cpu, SCX_KICK_IDLE);
}

#endif /* __GMP_KICK_BPF_H */
