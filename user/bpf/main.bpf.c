/* Copyright (c) Andrea Righi <andrea.righi@linux.dev> */
/*
 * scx_gmp-user's copy of scx_rustland_core 2.4.15's BPF layer
 * (assets/bpf/main.bpf.c), changed in four ways, marked "scx_gmp:". It
 * takes CPU hotplug in place (cpu_online/cpu_offline), where the original
 * makes the kernel unload it and ask for a restart: under load a restart
 * left every task under the kernel's own scheduler, and then a fresh agent,
 * for minutes, and RCU stalled (README, "When things go wrong"). It runs
 * every kernel thread in place, not only the per-CPU ones. A CPU runs the
 * tasks in its DSQ before the user-space scheduler. And it does not leave
 * tasks on a CPU that a real-time task holds (cpu_release/cpu_acquire).
 *
 * scx_rustland_core: BPF backend for schedulers running in user-space.
 *
 * This BPF backend implements the low level sched-ext functionalities for a
 * user-space counterpart, that implements the actual scheduling policy.
 *
 * The BPF part collects total cputime and weight from the tasks that need to
 * run, then it sends all details to the user-space scheduler that decides the
 * best order of execution of the tasks (based on the collected metrics).
 *
 * The user-space scheduler then returns to the BPF component the list of tasks
 * to be dispatched in the proper order.
 *
 * Messages between the BPF component and the user-space scheduler are passed
 * using BPF_MAP_TYPE_RINGBUF / BPF_MAP_TYPE_USER_RINGBUF maps: @queued for
 * the messages sent by the BPF dispatcher to the user-space scheduler and
 * @dispatched for the messages sent by the user-space scheduler to the BPF
 * dispatcher.
 *
 * The BPF dispatcher is completely agnostic of the particular scheduling
 * policy implemented in user-space. For this reason developers that are
 * willing to use this scheduler to experiment scheduling policies should be
 * able to simply modify the Rust component, without having to deal with any
 * internal kernel / BPF details.
 *
 * This software may be used and distributed according to the terms of the
 * GNU General Public License version 2.
 */
#ifdef LSP
#define __bpf__
#include "../../../../scheds/include/scx/common.bpf.h"
#else
#include <scx/common.bpf.h>
#endif

#include <scx/percpu.bpf.h>
#include "intf.h"
/* scx_gmp: Go's constants (GMP_GLOBAL_EVERY_DFL), defined once there. */
#include "../../bpf/intf.h"
/* scx_gmp: kick_cpu(), which never kicks from a CPU going offline. */
#include "../../bpf/kick.bpf.h"
#include "../../bpf/idle.bpf.h"
#include "../../bpf/process.bpf.h"
#include "../../bpf/timer.bpf.h"

/* The kernel's values (include/linux/sched.h, sched/prio.h, sched/ext.c). */
#define TASK_RUNNING	0
#define MAX_RT_PRIO	100
#define OPSS_STATE_MASK	((1 << SCX_OPSS_QSEQ_SHIFT) - 1)

/* The kernel's task iterator (kernel/bpf/task_iter.c). */
extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task,
			     unsigned int flags) __weak __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it)
	__weak __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __weak __ksym;

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/*
 * Introduce a custom DSQ shared across all the CPUs, where we can dispatch
 * tasks that will be executed on the first CPU available.
 *
 * Per-CPU DSQs are also provided, to allow the scheduler to run a task on a
 * specific CPU (see dsq_init()).
 */
#define SHARED_DSQ MAX_CPUS

/*
 * The user-space scheduler itself is dispatched using a separate DSQ, that
 * is consumed after all other DSQs.
 *
 * This ensures to work in bursts: tasks are queued, then the user-space
 * scheduler runs and dispatches them. Once all these tasks exhaust their
 * time slices, the scheduler is invoked again, repeating the cycle.
 */
#define SCHED_DSQ (MAX_CPUS + 1)

/*
 * Scheduler attributes and statistics.
 */
const volatile u32 usersched_pid; /* User-space scheduler PID */
const volatile u32 khugepaged_pid; /* khugepaged PID */
u64 usersched_last_run_at; /* Timestamp of the last user-space scheduler execution */
static u64 nr_cpu_ids; /* Maximum possible CPU number */

/*
 * Default task time slice.
 */
const volatile u64 slice_ns;

/*
 * scx_gmp: a SCHED_IDLE task's longest slice (--idle-slice-us, idle_slice());
 * 0: slice_ns.
 */
const volatile u64 idle_slice_ns;

/*
 * Number of tasks that are queued for scheduling.
 *
 * This number is incremented by the BPF component when a task is queued to the
 * user-space scheduler and it must be decremented by the user-space scheduler
 * when a task is consumed.
 */
volatile u64 nr_queued;

/*
 * Number of tasks that are waiting for scheduling.
 *
 * This number must be updated by the user-space scheduler to keep track if
 * there is still some scheduling work to do.
 */
volatile u64 nr_scheduled;

/*
 * Amount of currently running tasks.
 */
volatile u64 nr_running, nr_online_cpus;

/*
 * scx_gmp: CPU hotplug. @cpu_offline[cpu] is 1 while @cpu is offline (set
 * at init from the kernel's online mask, then by cpu_online/cpu_offline),
 * and @cpu_offline_at_load[cpu] is its value at init, never changed.
 * @nr_hotplug counts the changes since init, and @cpu_hotplugs[cpu] each
 * CPU's: the agent starts from the state at load and zero counts, whenever
 * it starts, and follows each change (an odd count since its last look is
 * a change of state, an even one a CPU that went and came back).
 * @cpu_left[cpu] is 1 while a CPU that went offline after the load is
 * still offline (its DSQ may hold tasks), and @nr_left counts those.
 */
u8 cpu_offline[MAX_CPUS], cpu_offline_at_load[MAX_CPUS], cpu_left[MAX_CPUS];
volatile u32 cpu_hotplugs[MAX_CPUS];
volatile u64 nr_hotplug, nr_left;

/*
 * scx_gmp: entersyscall. @cpu_held[cpu] is 1 from the moment a real-time or
 * deadline task takes @cpu (cpu_release) until the CPU is back
 * (cpu_acquire), and @held_at[cpu] says since when (ns); @nr_held counts
 * the held CPUs. A held CPU runs sched_ext tasks only within the kernel's
 * deadline server (50 ms a second), and only if a task of its own is
 * queued there, so nothing that may run elsewhere is queued on it, and once
 * it has been held for a slice (retake), @cpu_retaken[cpu] is 1 and the
 * other CPUs take what its DSQ holds. @nr_syscall, @nr_retake_cpus and
 * @nr_retake count the takes, the retakes, and the tasks kept off held
 * CPUs (moved from a retaken CPU's DSQ, or queued to the shared DSQ in
 * its stead).
 */
u8 cpu_held[MAX_CPUS], cpu_retaken[MAX_CPUS];
u64 held_at[MAX_CPUS];
volatile u64 nr_held, nr_syscall, nr_retake_cpus, nr_retake;

/*
 * scx_gmp: stuck CPUs. @dsq_takes[cpu] counts the times @cpu took a task
 * from its own DSQ, or gave some up (release_own_dsq()): count_take(), owner
 * only. @dsq_takes_seen[cpu] is that count at the timer's last look. A CPU
 * whose DSQ held tasks at two looks a second apart, and which took none of
 * them between, is stuck: @cpu_stuck[cpu] is 1 and the other CPUs take what
 * its DSQ holds, until it takes one again or its DSQ is empty. @nr_stuck
 * counts the stuck CPUs, @nr_stuck_events each time one got stuck.
 */
u64 dsq_takes[MAX_CPUS], dsq_takes_seen[MAX_CPUS];
/* @cpu_hotplugs[cpu] at the timer's last look: a CPU that went off or on
 * in between could not take all along, and is not called stuck. */
u32 hotplugs_seen[MAX_CPUS];
/* Whether @cpu's DSQ held tasks at the timer's last look: a task queued
 * just before this look, to a CPU that had nothing to take for the second
 * before, is on its way to that CPU, not stuck (one CI run counted CPU 1
 * stuck at start-up, idle beside the 1 task it had just been sent). */
u8 queued_seen[MAX_CPUS];
u8 cpu_stuck[MAX_CPUS];
volatile u64 nr_stuck, nr_stuck_events;
/*
 * scx_gmp: the last CPU find_stuck() found stuck, for the agent's last line:
 * its DSQ's length, the task it ran (@cur_pid; the agent's runs are not
 * recorded there) and for how long (scx_bpf_now()), whether a higher class
 * held it, and when (bpf_ktime_get_ns(), CLOCK_MONOTONIC). Timer only.
 */
volatile s32 stuck_cpu;
volatile u32 stuck_queued, stuck_pid, stuck_held;
volatile u64 stuck_ran_ns, stuck_at;

/*
 * @cpu served its own DSQ: it took a task, or gave some up. Executed only
 * by @cpu's dispatch; touches only @dsq_takes[cpu].
 */
static void count_take(s32 cpu)
{
	if (cpu >= 0 && cpu < MAX_CPUS)
		dsq_takes[cpu]++;
}

/*
 * scx_gmp: tasks a CPU moved out of its own DSQ after the kernel gave it
 * none of them (release_own_dsq()): to the kernel's global DSQ when the
 * CPU is inactive, or to its own local DSQ when a pull merely lost a race.
 */
volatile u64 nr_released;

/*
 * scx_gmp: tasks a CPU about to idle took from the DSQ of a CPU busy with
 * another task (steal_committed()).
 */
const volatile bool steal_committed_on;
volatile u64 nr_committed_steals;

/*
 * scx_gmp: tries to drain the agent's decisions that found another CPU
 * draining them (bpf_user_ringbuf_drain() returned -EBUSY), and so read
 * none of them (drain_dispatched()). @drain_missed is 1 from then until a
 * CPU that drained takes it and drains once more; DRAIN_TRIES bounds the
 * tries of one dispatch().
 */
volatile u64 nr_drain_busy;
static u32 drain_missed;
#define DRAIN_TRIES 3

/*
 * scx_gmp: drains made again because a CPU refused meanwhile had set
 * @drain_missed, and self-kicks of a CPU about to idle whose tries ran out
 * with a drain still owed (redrain()).
 */
volatile u64 nr_drain_again;
volatile u64 nr_redrain;

/* scx_gmp: puts for any CPU that found no CPU idle (kick_idle_for()). */
volatile u64 nr_kick_idle_none;

/*
 * scx_gmp: times a CPU ran the agent ahead of its own DSQ, for tasks woken
 * since the agent last ran (rustland_dispatch()).
 */
volatile u64 nr_agent_first;

/*
 * scx_gmp: @agent_in_pass is 1 while the agent is in a pass: the agent sets
 * it when it starts one and clears it just before it yields
 * (notify_complete()). Meanwhile its work is pending whatever
 * @nr_scheduled and the ring say, for it may hold tasks it has read and
 * not yet dispatched (usersched_has_pending_tasks()). @nr_agent_cut counts
 * the times it was put back in the middle of a pass: its slice ran out, a
 * CPU was kicked from under it, or a higher class took its CPU.
 */
volatile u32 agent_in_pass;
volatile u64 nr_agent_cut;

/*
 * scx_gmp: the runs on each CPU, for the agent to tell whether a task it
 * dispatched has started, and has stopped since, without a system call on
 * every pass (user/src: run_state()). @cur_pid[cpu] and @cur_start[cpu]:
 * the task that runs there now (pid 0: none) and when it started.
 * @run_ring[cpu]: the last RUN_RING runs that ended there (pid, start);
 * @run_ends[cpu] counts them. Each written only by its CPU (owner only),
 * the record before the count, which is an ordered atomic.
 */
#define RUN_RING 16
struct run_rec {
	u32 pid;
	u64 start;
};
u32 cur_pid[MAX_CPUS];
u64 cur_start[MAX_CPUS];
struct run_rec run_ring[MAX_CPUS][RUN_RING];
volatile u64 run_ends[MAX_CPUS];

/* Dispatch statistics */
volatile u64 nr_user_dispatches, nr_kernel_dispatches,
	     nr_cancel_dispatches, nr_bounce_dispatches;

/* Failure statistics */
volatile u64 nr_failed_dispatches, nr_sched_congested;

/* Report additional debugging information */
const volatile bool debug;

/* Rely on the in-kernel idle CPU selection policy */
const volatile bool builtin_idle;

/*
 * scx_gmp: a sync wakeup runs next on the waker's CPU without the agent
 * (handoff(); off with --go-handoff), and @nr_handoffs counts those; so
 * does a wakeup from a kernel lock (lock_handoff()), which
 * @nr_lock_handoffs counts.
 */
const volatile bool sync_handoff;
volatile u64 nr_handoffs;
volatile u64 nr_lock_handoffs;

/*
 * scx_gmp: per CPU, the lock hand-offs it took since it last called
 * dispatch(), which resets the count (lock_streak_ok()); past
 * @lock_streak_max of them (Go's 61; a test sets fewer) a lock wakeup goes
 * through the agent, and @nr_lock_refusals counts those.
 */
const volatile u32 lock_streak_max = GMP_GLOBAL_EVERY_DFL;
u32 lock_streak[MAX_CPUS];
volatile u64 nr_lock_refusals;

/*
 * scx_gmp: wakeups that found an idle CPU and went straight to it
 * (builtin_idle; off with --go-ready).
 */
volatile u64 nr_idle_places;

/*
 * scx_gmp: a wakeup for the agent preempts its CPU's task so that the agent
 * decides at once (kick_agent(); off with --lazy-agent). Per CPU, the task
 * it preempted and the slice it had left, which it gets back next on that
 * CPU; and the counts of those kicks and of those returns.
 */
const volatile bool agent_kick;
struct kicked {
	s32 pid;
	u64 left;
	/* Not 0: the vtime it goes back with, behind a woken task (cross_preempts()). */
	u64 behind;
	/* The task restore_kicked() put back, until it runs again (run_started()). */
	s32 resumed;
	/*
	 * That task, if a woken one goes ahead of it before it runs again,
	 * and the vtime it goes behind with then (behind_on_return()).
	 */
	s32 due_pid;
	u64 due_behind;
	/* Preempted for the agent's pass for a wakeup of another process. */
	bool across;
};
struct kicked kicked[MAX_CPUS];
volatile u64 nr_agent_kicks, nr_kick_restores, nr_behind_on_return;

/*
 * scx_gmp: a task woken into a CPU's runnext goes ahead of a task of
 * another process that has run this long there (cross_preempts();
 * --cross-process-preempt-us, 0: off); how many did.
 */
const volatile u64 cross_preempt_ns;
volatile u64 nr_cross_preempts;
/*
 * scx_gmp: the vtime of the agent's last decision, as it left its last
 * pass (user/src/main.rs, dispatch_vtime(): a runnext task's vtime).
 */
volatile u64 agent_seq;
/*
 * SCHED_IDLE tasks preempted for a task queued to their CPU (kick_for(),
 * run_beside_idle()), and of those, the wakeups that ran there without the
 * agent (run_beside_idle()).
 */
volatile u64 nr_idle_yields, nr_beside_idle;

/*
 * scx_gmp: wakeups run on an idle CPU ahead of the SCHED_IDLE tasks the
 * agent had committed to it (only_idle_queued()).
 */
volatile u64 nr_ahead_of_idle;
/* The CPU the agent runs on, or -1. */
volatile s32 agent_cpu = -1;
/*
 * scx_gmp: @agent_missed: a wakeup came for the agent while it was in a
 * pass, so no CPU was preempted for it (kick_agent()). @agent_again_on[cpu]:
 * the agent's last pass on that CPU was one such a wakeup gave it
 * (agent_again()); @nr_agent_again counts those.
 */
volatile u32 agent_missed;
u8 agent_again_on[MAX_CPUS];
volatile u64 nr_agent_again;

/* Enable NUMA-local idle CPU selection */
const volatile bool numa_local;

/* Allow to use bpf_printk() only when @debug is set */
#define dbg_msg(_fmt, ...) do {						\
	if (debug)							\
		bpf_printk(_fmt, ##__VA_ARGS__);			\
} while(0)

/*
 * CPUs in the system have SMT is enabled.
 */
const volatile bool smt_enabled = true;

/*
 * Maximum amount of tasks queued between kernel and user-space at a certain
 * time.
 *
 * The @queued and @dispatched lists are used in a producer/consumer fashion
 * between the BPF part and the user-space part.
 */
#define MAX_ENQUEUED_TASKS 4096

/*
 * Maximum amount of slots reserved to the tasks dispatched via shared queue.
 */
#define MAX_DISPATCH_SLOT (MAX_ENQUEUED_TASKS / 8)

/*
 * The map containing tasks that are queued to user space from the kernel.
 *
 * This map is drained by the user-space scheduler.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, MAX_ENQUEUED_TASKS *
				sizeof(struct queued_task_ctx));
} queued SEC(".maps");

/*
 * The user ring buffer containing pids that are dispatched from user space to
 * the kernel.
 *
 * Drained by the kernel in .dispatch().
 */
struct {
	__uint(type, BPF_MAP_TYPE_USER_RINGBUF);
	__uint(max_entries, MAX_ENQUEUED_TASKS *
				sizeof(struct dispatched_task_ctx));
} dispatched SEC(".maps");

/*
 * Per-task local storage.
 *
 * This contain all the per-task information used internally by the BPF code.
 */
struct task_ctx {
	/*
	 * Timestamp since last time the task ran on a CPU.
	 */
	u64 start_ts;

	/*
	 * Timestamp since last time the task released a CPU.
	 */
	u64 stop_ts;

	/*
	 * Execution time (in nanoseconds) since the last sleep event.
	 */
	u64 exec_runtime;

	/*
	 * Task generation counter to detect duplicate enqueues.
	 */
	u64 enq_cnt;

	/*
	 * scx_gmp: woken by a sync wakeup on the CPU select_cpu() chose (the
	 * waker's), for enqueue() to hand off.
	 */
	bool sync;

	/*
	 * scx_gmp: went to the agent woken (not by a sync wakeup), so its
	 * decision may go ahead of another process's task (preempt_across()).
	 */
	bool woken;
};

/* Map that contains task-local storage. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctx_stor SEC(".maps");

/*
 * Return a local task context from a generic task or NULL if the context
 * doesn't exist.
 */
struct task_ctx *try_lookup_task_ctx(const struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctx_stor,
						(struct task_struct *)p, 0, 0);
	if (!tctx)
		dbg_msg("warning: failed to get task context for pid=%d (%s)",
			p->pid, p->comm);
	return tctx;
}

/*
 * Heartbeat timer used to periodically trigger the check to run the user-space
 * scheduler.
 *
 * Without this timer we may starve the scheduler if the system is completely
 * idle and hit the watchdog that would auto-kill this scheduler.
 */
struct usersched_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct usersched_timer);
} usersched_timer SEC(".maps");

/*
 * scx_gmp: per CPU, a preemption across processes due later
 * (preempt_later()): the run it preempts (@pid and @run_start, as
 * @cur_pid and @cur_start have it) and the vtime that task goes back with
 * (@behind). @nr_preempt_later counts the ones armed.
 */
struct preempt_timer {
	struct bpf_timer timer;
	u32 pid;
	u64 run_start;
	u64 behind;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, u32);
	__type(value, struct preempt_timer);
} preempt_timers SEC(".maps");
volatile u64 nr_preempt_later;

/*
 * Time period of the scheduler heartbeat, used to periodically kick the
 * user-space scheduler and check if there is any pending activity.
 */
#define USERSCHED_TIMER_NS	NSEC_PER_SEC

/*
 * Return true if the target task @p is the user-space scheduler.
 */
static inline bool is_usersched_task(const struct task_struct *p)
{
	return p->pid == usersched_pid;
}

/*
 * Return true if the target task @p is a kernel thread.
 */
static inline bool is_kthread(const struct task_struct *p)
{
	return p->flags & PF_KTHREAD;
}

/*
 * Return true if the target task @p is kswapd.
 */
static inline bool is_kswapd(const struct task_struct *p)
{
	return p->flags & (PF_KSWAPD | PF_KCOMPACTD);
}

/*
 * Return true if the target task @p is khugepaged, false otherwise.
 */
static inline bool is_khugepaged(const struct task_struct *p)
{
	return khugepaged_pid && p->pid == khugepaged_pid;
}

/*
 * Return true if @p still wants to run, false otherwise.
 */
static bool is_queued(const struct task_struct *p)
{
	return p->scx.flags & SCX_TASK_QUEUED;
}

/*
 * Flag used to wake-up the user-space scheduler.
 */
static volatile u32 usersched_needed;

/*
 * Set user-space scheduler wake-up flag (equivalent to an atomic release
 * operation).
 */
static void set_usersched_needed(void)
{
	__sync_fetch_and_or(&usersched_needed, 1);
}

/*
 * Check and clear user-space scheduler wake-up flag (equivalent to an atomic
 * acquire operation).
 */
static bool test_and_clear_usersched_needed(void)
{
	return __sync_fetch_and_and(&usersched_needed, 0) == 1;
}

/*
 * Return true if there's any pending activity to do for the scheduler, false
 * otherwise.
 *
 * NOTE: a task is sent to the user-space scheduler using the "queued"
 * ringbuffer, then the scheduler drains the queued tasks and adds them to
 * its internal data structures / state; at this point tasks become
 * "scheduled" and the user-space scheduler will take care of updating
 * nr_scheduled accordingly; lastly tasks will be dispatched and the
 * user-space scheduler will update nr_scheduled again.
 *
 * Checking nr_scheduled and the available data in the ringbuffer allows to
 * determine if there is still some pending work to do for the scheduler:
 * new tasks have been queued since last check, or there are still tasks
 * "queued" or "scheduled" since the previous user-space scheduler run.
 *
 * If there's no pending action, it is pointless to wake-up the scheduler
 * (even if a CPU becomes idle), because there is nothing to do.
 *
 * Also keep in mind that we don't need any protection here since this code
 * doesn't run concurrently with the user-space scheduler (that is single
 * threaded), therefore this check is also safe from a concurrency perspective.
 */
static bool usersched_has_pending_tasks(void)
{
	if (test_and_clear_usersched_needed())
		return true;

	/* scx_gmp: see @agent_in_pass. */
	if (agent_in_pass)
		return true;

	if (nr_scheduled)
		return true;

	return bpf_ringbuf_query(&queued, BPF_RB_AVAIL_DATA) > 0;
}

/*
 * scx_gmp: whether @cpu is offline.
 */
static bool is_offline(s32 cpu)
{
	u32 i = cpu; /* unsigned: one bound the verifier follows */

	return i < MAX_CPUS && cpu_offline[i];
}

/*
 * scx_gmp: whether a real-time or deadline task holds @cpu.
 */
static bool is_held(s32 cpu)
{
	u32 i = cpu;

	return i < MAX_CPUS && cpu_held[i];
}

/*
 * scx_gmp: exitsyscall - @cpu is back. Owner only.
 */
static void exitsyscall(s32 cpu)
{
	u32 i = cpu;

	if (i >= MAX_CPUS || !cpu_held[i])
		return;
	cpu_held[i] = 0;
	cpu_retaken[i] = 0;
	__sync_fetch_and_sub(&nr_held, 1);
}

/*
 * scx_gmp: whether wakeups may skip the agent (handoff(), and an idle CPU
 * found by select_cpu()): not while a real-time task holds any CPU. With
 * them, under `stress-ng --mutex` (tests/guest/rthold.sh) RCU stalled and
 * the kernel ejected user mode in 1 run of 4, and stress-ng reported a
 * failure in another; without them while CPUs are held, 4 of 4 passed.
 */
static bool fast_paths(void)
{
	return !nr_held;
}

/*
 * scx_gmp: whether @p must not wait in @cpu's DSQ: @cpu went offline, or a
 * real-time task holds it and @p may run elsewhere.
 */
static bool is_stranded(const struct task_struct *p, s32 cpu)
{
	return is_offline(cpu) || (is_held(cpu) && p->nr_cpus_allowed > 1);
}

/*
 * scx_gmp: whether this CPU is picking for sched_ext within the kernel's
 * deadline server, that is, while a real-time or deadline task holds it:
 * that task is current and still runnable, or the current task is one the
 * server picked (the agent yielding, a task whose slice ran out). A pick
 * outside the server means that no such task wants the CPU. If a server
 * pick finds no task, the kernel stops the server, and starts it again only
 * when this CPU's count of sched_ext tasks goes from 0 to 1: with a task
 * still counted here (one waiting for the agent, the agent, a per-CPU
 * kernel thread queued later), sched_ext would not run here again while
 * the real-time task holds the CPU. Owner only.
 */
static bool served(void)
{
	struct task_struct *cur = bpf_get_current_task_btf();

	return (cur->prio < MAX_RT_PRIO && cur->__state == TASK_RUNNING) ||
	       cur->dl_server;
}

/*
 * scx_gmp: @p was just put where any CPU it may use takes it (the shared
 * DSQ, or the kernel's global DSQ): wake an idle CPU that @p may use, if
 * there is one. If none is idle, kick every other CPU @p may use with
 * SCX_KICK_IDLE. A CPU that looked at the shared DSQ before @p reached it
 * and has not yet set its idle bit is missing from the idle mask, so the
 * pick cannot find it, and it would idle beside @p; @p would then wait
 * for the next CPU to schedule, which on a system whose other CPUs
 * real-time tasks hold is when they let go. The kernel acts on such a
 * kick later, after @p is in its DSQ, under the target's run-queue lock:
 * it wakes a CPU that idles or is in its balance (which then looks
 * again), and skips one that runs a task, so a busy CPU costs only that
 * look. @nr_kick_idle_none counts the puts that found no idle CPU. Not
 * from a dying CPU, whose kicks are dropped (kick_cpu()): its pick would
 * clear an idle CPU's bit for nothing. Any CPU.
 */
static void kick_idle_for(const struct task_struct *p)
{
	s32 me = bpf_get_smp_processor_id(), cpu;

	if (this_cpu_dying())
		return;
	cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	if (cpu >= 0) {
		kick_cpu(cpu);
		return;
	}
	__sync_fetch_and_add(&nr_kick_idle_none, 1);
	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu != me && bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
}

/*
 * Return the DSQ ID associated to a CPU, or SHARED_DSQ if the CPU is not
 * valid.
 */
static u64 cpu_to_dsq(s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS) {
		scx_bpf_error("Invalid cpu: %d", cpu);
		return SHARED_DSQ;
	}
	return (u64)cpu;
}

/*
 * Return true if @this_cpu and @that_cpu are in the same LLC, false
 * otherwise.
 */
static inline bool cpus_share_cache(s32 this_cpu, s32 that_cpu)
{
	if (this_cpu == that_cpu)
		return true;

	return cpu_llc_id(this_cpu) == cpu_llc_id(that_cpu);
}

/*
 * Return the preferred NUMA node of task @p, or NUMA_NO_NODE if not set.
 */
static inline s32 get_task_numa_node(const struct task_struct *p)
{
	if (bpf_core_field_exists(p->numa_preferred_nid))
		return p->numa_preferred_nid;

	return NUMA_NO_NODE;
}

/*
 * Return true if @this_cpu is faster than @that_cpu, false otherwise.
 */
static inline bool is_cpu_faster(s32 this_cpu, s32 that_cpu)
{
	if (this_cpu == that_cpu)
		return false;

	return cpu_priority(this_cpu) > cpu_priority(that_cpu);
}

/*
 * Return true if @cpu is a fully-idle SMT core, false otherwise.
 */
static inline bool is_smt_idle(s32 cpu)
{
	const struct cpumask *idle_smtmask;
	bool is_idle;

	if (!smt_enabled)
		return true;

	idle_smtmask = scx_bpf_get_idle_smtmask();
	is_idle = bpf_cpumask_test_cpu(cpu, idle_smtmask);
	scx_bpf_put_cpumask(idle_smtmask);

	return is_idle;
}

/*
 * Return true on a wake-up event, false otherwise.
 */
static inline bool is_wakeup(u64 wake_flags)
{
	return wake_flags & SCX_WAKE_TTWU;
}

/*
 * Find an idle CPU in the system for the task.
 *
 * NOTE: the idle CPU selection doesn't need to be formally perfect, it is
 * totally fine to accept racy conditions and potentially make mistakes, by
 * picking CPUs that are not idle or even offline, the logic has been designed
 * to handle these mistakes in favor of a more efficient response and a reduced
 * scheduling overhead.
 */
static s32 pick_idle_cpu(struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	s32 cpu, this_cpu = bpf_get_smp_processor_id();
	bool is_this_cpu_allowed = bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr);

	/*
	 * For tasks that can run only on a single CPU, we can simply verify if
	 * their only allowed CPU is still idle.
	 */
	if (p->nr_cpus_allowed == 1) {
		if (scx_bpf_test_and_clear_cpu_idle(prev_cpu))
			return prev_cpu;

		return -EBUSY;
	}

	/*
	 * On wakeup if the waker's CPU is faster than the wakee's CPU, try
	 * to move the wakee closer to the waker.
	 *
	 * In presence of hybrid cores this helps to naturally migrate
	 * tasks over to the faster cores.
	 */
	if (is_wakeup(wake_flags) &&
	    is_cpu_faster(this_cpu, prev_cpu) && is_this_cpu_allowed) {
		/*
		 * If both the waker's CPU and the wakee's CPU are in the
		 * same LLC and the wakee's CPU is a fully idle SMT core,
		 * don't migrate.
		 */
		if (cpus_share_cache(this_cpu, prev_cpu) &&
		    is_smt_idle(prev_cpu) &&
		    scx_bpf_test_and_clear_cpu_idle(prev_cpu))
			return prev_cpu;

		prev_cpu = this_cpu;
	}

	/*
	 * Prefer a NUMA-local idle CPU if the task has a preferred node and
	 * NUMA-local selection is enabled.
	 */
	if (numa_local && bpf_ksym_exists(scx_bpf_pick_idle_cpu_node)) {
		s32 numa_node = get_task_numa_node(p);
		if (numa_node != NUMA_NO_NODE)
			return scx_bpf_pick_idle_cpu_node(p->cpus_ptr, numa_node,
							  SCX_PICK_IDLE_IN_NODE);
	}

	/*
	 * Fallback to the old API if the kernel doesn't support
	 * scx_bpf_select_cpu_and().
	 *
	 * This is required to support kernels <= 6.16.
	 */
	if (!__COMPAT_HAS_scx_bpf_select_cpu_and) {
		bool is_idle = false;

		if (!wake_flags)
			return -EBUSY;

		cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);

		return is_idle ? cpu : -EBUSY;
	}

	/*
	 * Pick any idle CPU usable by the task.
	 */
	return scx_bpf_select_cpu_and(p, prev_cpu, wake_flags, p->cpus_ptr, 0);
}

/* scx_gmp: preempt @cpu's SCHED_IDLE task (idle_yields()). Any CPU. */
static void preempt_idle(s32 cpu)
{
	kick_cpu_flags(cpu, SCX_KICK_PREEMPT);
	__sync_fetch_and_add(&nr_idle_yields, 1);
}

/*
 * scx_gmp: whether the task running on @cpu is a SCHED_IDLE one that yields
 * to @p (idle_yields()). @cpu must be a valid CPU. Any CPU.
 */
static bool cpu_yields_to(const struct task_struct *p, s32 cpu)
{
	struct task_struct *cur;
	bool yields;

	bpf_rcu_read_lock();
	cur = scx_bpf_cpu_curr(cpu);
	yields = cur && idle_yields(cur, p, idle_slice_ns);
	bpf_rcu_read_unlock();
	return yields;
}

/*
 * scx_gmp: preempt the task that runs on @cpu if it is a SCHED_IDLE one that
 * yields to @p (idle_yields()): it goes back to the agent. Whether it was.
 * @cpu must be a valid CPU. Any CPU.
 */
static bool preempt_if_yields(const struct task_struct *p, s32 cpu)
{
	if (!cpu_yields_to(p, cpu))
		return false;
	preempt_idle(cpu);
	return true;
}

/*
 * scx_gmp: kick_for - @p was queued to run on @cpu: preempt a SCHED_IDLE
 * task that runs there (preempt_if_yields()), else wake @cpu if it idles.
 * @cpu must be a valid CPU. Any CPU.
 */
static void kick_for(const struct task_struct *p, s32 cpu)
{
	if (!preempt_if_yields(p, cpu))
		kick_cpu(cpu);
}

/*
 * scx_gmp: kick_dispatched - wake @cpu for a task that this CPU's dispatch()
 * has just inserted into a DSQ @cpu serves (the agent's decision, drained
 * from its ring). The kernel moves an insert made in dispatch() into its DSQ
 * only when dispatch() returns, but it drops an idle kick (SCX_KICK_IDLE)
 * at once if @cpu runs a task at that moment. When that task then stops,
 * @cpu's own dispatch() can find its DSQ still empty and go idle, and the
 * task waits there until something else wakes the CPU: in a 2-vCPU trace
 * of the light request load the dispatcher thread waited 210 ms so, with
 * both CPUs idle (docs/benchmarks.md, "User mode: a decision for a CPU
 * about to idle"). So another CPU gets a plain kick, which the kernel
 * carries out after the insert has landed: an idle CPU wakes, and a busy
 * one reschedules (its task runs on if it has slice left) and finds the
 * task when it next dispatches. This CPU needs none: the kernel calls
 * dispatch() again after one that inserted. Any CPU, in dispatch().
 */
static void kick_dispatched(s32 cpu)
{
	if (cpu != bpf_get_smp_processor_id())
		kick_cpu_flags(cpu, 0);
}

/*
 * Wake-up a target @cpu for the dispatched task @p. If @cpu can't be used
 * wakeup another valid CPU.
 */
static void kick_task_cpu(const struct task_struct *p, s32 cpu)
{
	if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
		/*
		 * Kick the target CPU anyway, since it may be locked and
		 * needs to go back to idle to reset its state.
		 */
		kick_cpu(cpu);

		/*
		 * Pick any other idle CPU that the task can use.
		 */
		kick_idle_for(p);
		return;
	}
	kick_dispatched(cpu);
}

/*
 * If the task was dequeued while still in the user-space scheduler, or
 * enqueued again since (scx_gmp: on any path; a held CPU may also have run
 * it ahead of the agent, rescue_custody()), the dispatch just made is
 * cancelled: another enqueue event for the same task will be received later.
 * Whether it was.
 */
static bool cancel_stale(struct task_struct *p,
			 const struct dispatched_task_ctx *task)
{
	struct task_ctx *tctx = try_lookup_task_ctx(p);

	if (tctx && tctx->enq_cnt <= task->enq_cnt)
		return false;
	scx_bpf_dispatch_cancel();
	__sync_fetch_and_add(&nr_cancel_dispatches, 1);
	return true;
}

/*
 * scx_gmp: the agent's decisions a SCHED_IDLE task yields to in a DSQ: those
 * made up to this many decisions after its own (idle_vtime()).
 */
#define IDLE_VTIME_LAG 64

/*
 * scx_gmp: the agent's decisions that a task preempted for a woken task of
 * another process lets go first (restore_kicked()): those made up to this
 * many decisions after the agent's last pass, among them the woken task's.
 */
#define CROSS_VTIME_LAG 64

/*
 * scx_gmp: cross_vtime - the vtime of a task preempted for a woken task of
 * another process: behind every decision the agent makes for its CPU in the
 * next CROSS_VTIME_LAG after the one with @vtime (0: after its last pass),
 * LRQ tasks' too (LRQ_VTIME_LAG). The model may not send the woken task as
 * a runnext one: when the slice it would inherit from the preempted task is
 * spent, Go's retake puts it on the global queue, and a CPU takes it from
 * there as an LRQ task; a second wakeup into the same runnext displaces the
 * first to the LRQ. Ordered before the LRQ tasks, the preempted task then
 * ran first, for the rest of its slice: in two 2-vCPU traces of cyclictest
 * beside CPU hogs, 466 timer wakeups waited over 10 ms before this order in
 * kick_agent() and 265 after it, and behind the decision that preempted it
 * (preempt_across()) a hog still went ahead of the LRQ task decided next.
 * As in BPF mode, where such a task goes back to runnext only if its P's
 * LRQ is empty. Any CPU.
 */
static u64 cross_vtime(u64 vtime)
{
	u64 seq = vtime >= LRQ_VTIME_LAG ? vtime - LRQ_VTIME_LAG : vtime;

	return (seq > agent_seq ? seq : agent_seq) + LRQ_VTIME_LAG + CROSS_VTIME_LAG;
}

/*
 * scx_gmp: idle_vtime - the vtime that orders @p, just decided, in its DSQ.
 * The agent's vtime counts its decisions (user/src/main.rs, dispatch_vtime()),
 * and a SCHED_IDLE task that yields (idle_yields(), so not with
 * --idle-slice-us 0) orders IDLE_VTIME_LAG decisions later: a task that is
 * not SCHED_IDLE, decided soon after it for the same CPU, runs first, as a
 * CPU that runs a batch job is as good as idle to a woken task
 * (run_beside_idle()). Without it, a woken task that the model queued
 * behind a committed batch job waited that job's slice, which the tick
 * rounds up to 4 ms (20 of 45 waits over 3 ms in a 2-vCPU trace of the
 * ping-pong beside SCHED_IDLE hogs). The lag is bounded, so a batch job
 * waits for at most that many decisions, never for good (the kernel's
 * watchdog). Any CPU.
 */
static u64 idle_vtime(const struct task_struct *p, u64 vtime)
{
	if (idle_slice_ns && p->policy == GMP_SCHED_IDLE)
		return vtime + IDLE_VTIME_LAG;
	return vtime;
}

/* scx_gmp: cross_preempt_in() of a task that @p never goes ahead of. */
#define CROSS_NEVER ((u64)-1)

/*
 * scx_gmp: cross_preempt_in - in how many ns @p, woken into @cpu's runnext,
 * goes ahead of @cur, the task that runs there (--cross-process-preempt-us):
 * 0 if now, CROSS_NEVER if not at all. Once @cur has run cross_preempt_ns
 * there since it last started (run_started()), if it belongs to another
 * process, is not exiting, and @p is not a batch job (idle_behind()). Not
 * Go's rule: a woken goroutine waits in runnext until the running one
 * blocks or its slice ends. But Go orders the goroutines of one program;
 * between two programs (a timer thread beside a compile job) that left the
 * woken task up to a whole slice behind the other's (README, "Where Linux
 * differs from Go"). As bpf/main.bpf.c's preempt_after(). Any CPU (@cur
 * under RCU).
 */
static u64 cross_preempt_in(const struct task_struct *p, const struct task_struct *cur,
			    s32 cpu)
{
	u32 i = cpu;
	u64 ran;

	if (!cross_preempt_ns || i >= MAX_CPUS || idle_behind(p, idle_slice_ns) ||
	    (cur->flags & PF_EXITING) || !other_process(p, cur) || cur_pid[i] != cur->pid)
		return CROSS_NEVER;
	ran = time_delta(scx_bpf_now(), cur_start[i]);
	return ran >= cross_preempt_ns ? 0 : cross_preempt_ns - ran;
}

/* scx_gmp: cross_preempts - does @p go ahead of @cur now? Any CPU. */
static bool cross_preempts(const struct task_struct *p, const struct task_struct *cur,
			   s32 cpu)
{
	return !cross_preempt_in(p, cur, cpu);
}

/*
 * scx_gmp: @cpu's entry in @kicked, or NULL. Any CPU.
 */
static __always_inline struct kicked *kick_entry(s32 cpu)
{
	u32 i = cpu;

	if (i >= MAX_CPUS)
		return NULL;
	/* Keep clang from dropping the mask the verifier needs (power of two). */
	barrier_var(i);
	return &kicked[i & (MAX_CPUS - 1)];
}

/*
 * scx_gmp: may @cur, running on @k's CPU, be preempted to get its slice back
 * (restore_kicked())? A task other than the agent, with slice left, not
 * preempted that way already. Any CPU (@cur under RCU).
 */
static bool may_kick(const struct task_struct *cur, const struct kicked *k)
{
	return cur && cur->pid && !is_usersched_task(cur) && cur->scx.slice &&
	       (cur->scx.flags & SCX_TASK_QUEUED) && k->pid != cur->pid;
}

/*
 * scx_gmp: preempt @cur on @cpu (@k its entry): it gets the rest of its
 * slice back there, ahead of the agent's decisions, or with the vtime
 * @behind if not 0 (restore_kicked()). Any CPU (@cur under RCU).
 */
static void kick_back(const struct task_struct *cur, struct kicked *k, s32 cpu, u64 behind)
{
	k->left = cur->scx.slice;
	k->pid = cur->pid;
	k->behind = behind;
	kick_cpu_flags(cpu, SCX_KICK_PREEMPT);
}

/*
 * scx_gmp: go_behind - a woken task goes ahead of @cur, which runs on @cpu
 * (@k its entry): preempt @cur to come back with the vtime @behind
 * (kick_back()), or, if kick_agent() preempted it already and it is not
 * back yet, let it come back no earlier than @behind. Whether it did
 * either. Any CPU (@cur under RCU).
 */
static bool go_behind(const struct task_struct *cur, struct kicked *k, s32 cpu, u64 behind)
{
	if (may_kick(cur, k)) {
		kick_back(cur, k, cpu, behind);
		return true;
	}
	if (k->pid != cur->pid)
		return false;
	if (k->behind < behind)
		k->behind = behind;
	return true;
}

/*
 * scx_gmp: a preemption that preempt_later() armed falls due: the task it
 * was armed for goes behind the woken task (go_behind()) if that run still
 * goes on. Timer only.
 */
static int preempt_timer_fn(void *map, int *key, struct preempt_timer *t)
{
	struct kicked *k = kick_entry(*key);
	u32 i = *key;
	struct task_struct *cur;

	if (!k || i >= MAX_CPUS)
		return 0;
	bpf_rcu_read_lock();
	cur = scx_bpf_cpu_curr(i);
	if (cur && t->pid && cur->pid == t->pid && cur_pid[i] == t->pid &&
	    cur_start[i] == t->run_start)
		go_behind(cur, k, i, t->behind);
	bpf_rcu_read_unlock();
	t->pid = 0;
	return 0;
}

/*
 * scx_gmp: preempt_later - preempt @cur, which runs on @cpu, in @ns, unless
 * its run ends first; it goes back with the vtime @behind. For a decision
 * that reaches a task of another process before it has run
 * cross_preempt_ns (cross_preempt_in()): without it the woken task waited
 * for the rest of that task's slice, as in BPF mode before its own
 * preempt_later(). One timer per CPU: armed already for the same run, it
 * keeps its time and takes the later @behind. Any CPU (@cur under RCU); a
 * race between two arms loses at most one of them.
 */
static void preempt_later(const struct task_struct *cur, s32 cpu, u64 ns, u64 behind)
{
	struct preempt_timer *t;
	u32 i = cpu;

	if (i >= MAX_CPUS)
		return;
	t = bpf_map_lookup_elem(&preempt_timers, &i);
	if (!t)
		return;
	if (t->pid == cur->pid && t->run_start == cur_start[i]) {
		if (t->behind < behind)
			t->behind = behind;
		return;
	}
	t->pid = cur->pid;
	t->run_start = cur_start[i];
	t->behind = behind;
	if (bpf_timer_start(&t->timer, ns, 0))
		t->pid = 0;
	else
		__sync_fetch_and_add(&nr_preempt_later, 1);
}

/*
 * scx_gmp: behind_resumed - a decision for @p, woken, reaches @cpu (@k its
 * entry) while the task that restore_kicked() put back in the CPU's local
 * DSQ waits there for the agent's pass (or another task) to end: the agent
 * runs on @cpu, or has just stopped. A kick now would preempt the agent, not
 * that task, which then ran ahead of @p for the rest of its slice: in a
 * 2-vCPU trace of cyclictest beside CPU hogs, the largest group left of the
 * timer waits over 10 ms (docs/benchmarks.md). So if @p goes ahead of it
 * (cross_preempts()), it goes behind @p, with the vtime @behind, as soon as
 * it runs again (behind_on_return()); if it will in a while, a timer
 * preempts it then (preempt_later()). A race with its return loses this
 * once. Any CPU.
 */
static void behind_resumed(const struct task_struct *p, struct kicked *k, s32 cpu, u64 behind)
{
	struct task_struct *r = bpf_task_from_pid(k->resumed);
	u64 in;

	if (!r)
		return;
	in = cross_preempt_in(p, r, cpu);
	if (!in) {
		if (k->due_pid != r->pid || k->due_behind < behind)
			k->due_behind = behind;
		k->due_pid = r->pid;
	} else if (in != CROSS_NEVER) {
		preempt_later(r, cpu, in, behind);
	}
	bpf_task_release(r);
}

/*
 * scx_gmp: behind_on_return - @p, back from restore_kicked(), starts on @cpu:
 * if a woken task went ahead of it meanwhile (behind_resumed()), preempt it
 * at once, to come back behind that task (kick_back()). Owner only, in
 * running().
 */
static void behind_on_return(const struct task_struct *p, s32 cpu)
{
	struct kicked *k = kick_entry(cpu);
	u64 behind;

	if (!k || !k->due_pid)
		return;
	behind = k->due_behind;
	if (k->due_pid == p->pid && k->resumed == p->pid && p->scx.slice) {
		kick_back(p, k, cpu, behind);
		__sync_fetch_and_add(&nr_behind_on_return, 1);
	}
	k->due_pid = 0;
}

/*
 * scx_gmp: preempt_across - the agent just put @p, woken, in @cpu's own DSQ
 * with @vtime (dispatch_task()). If @p goes ahead of the task that runs
 * there (cross_preempts()), preempt that task: it comes back behind @p and
 * the LRQ tasks decided for that CPU (cross_vtime()), with the rest of its
 * slice (restore_kicked()). For a wakeup that kick_agent() could not act on
 * at once: the agent was running already, or the task it preempted ran on
 * before the decision came. If that task is preempted by kick_agent()
 * already and has not gone back yet (a kick for @p, or for another wakeup,
 * that did not put it behind @p), it goes back behind @p all the same: back
 * in the CPU's local DSQ, it ran the rest of its slice ahead of @p (49 of
 * 249 waits over 10 ms in the trace of run_started()). A race with
 * restore_kicked() leaves it where the kick put it. Whether it preempted.
 * Any CPU.
 */
static bool preempt_across(const struct task_struct *p, s32 cpu, u64 vtime)
{
	struct task_ctx *tctx = try_lookup_task_ctx(p);
	struct kicked *k = kick_entry(cpu);
	struct task_struct *cur;
	bool done = false;
	u64 in;

	if (!tctx || !tctx->woken || !k)
		return false;
	tctx->woken = false;
	bpf_rcu_read_lock();
	cur = scx_bpf_cpu_curr(cpu);
	if (cur && k->resumed && cur->pid != k->resumed) {
		bpf_rcu_read_unlock();
		behind_resumed(p, k, cpu, cross_vtime(vtime));
		return false;
	}
	in = cur ? cross_preempt_in(p, cur, cpu) : CROSS_NEVER;
	if (!in)
		done = go_behind(cur, k, cpu, cross_vtime(vtime));
	else if (in != CROSS_NEVER)
		preempt_later(cur, cpu, in, cross_vtime(vtime));
	bpf_rcu_read_unlock();
	return done;
}

/*
 * Dispatch a task to a target per-CPU DSQ, waking up the corresponding CPU, if
 * needed.
 */
static void dispatch_task(const struct dispatched_task_ctx *task)
{
	struct task_struct *p;
	s32 prev_cpu, cpu = task->cpu;
	u64 vtime;

	/* Ignore entry if the task doesn't exist anymore */
	p = bpf_task_from_pid(task->pid);
	if (!p)
		return;
	prev_cpu = scx_bpf_task_cpu(p);
	vtime = idle_vtime(p, task->vtime);

	/*
	 * Dispatch task to the shared DSQ if the user-space scheduler
	 * didn't select any specific target CPU.
	 */
	if (task->cpu == RL_CPU_ANY) {
		scx_bpf_dsq_insert_vtime(p, SHARED_DSQ,
					 task->slice_ns, vtime, task->flags);
		if (!cancel_stale(p, task))
			kick_task_cpu(p, prev_cpu);
		goto out_release;
	}

	/*
	 * scx_gmp: the target CPU went offline after the agent chose it, or a
	 * real-time task holds it: the first CPU that looks for work takes the
	 * task.
	 */
	if (is_stranded(p, task->cpu)) {
		scx_bpf_dsq_insert_vtime(p, SHARED_DSQ,
					 task->slice_ns, vtime, task->flags);
		if (!cancel_stale(p, task))
			kick_idle_for(p);
		goto out_release;
	}

	/*
	 * Dispatch the task to the target CPU selected by the
	 * user-space scheduler.
	 *
	 * However, if the target CPU is not valid (due to affinity
	 * constraints), keep the task on the previously used CPU,
	 * overriding the user-space scheduler decision.
	 */
	if (!bpf_cpumask_test_cpu(task->cpu, p->cpus_ptr)) {
		cpu = prev_cpu;
		__sync_fetch_and_add(&nr_bounce_dispatches, 1);
	} else {
		__sync_fetch_and_add(&nr_user_dispatches, 1);
	}
	scx_bpf_dsq_insert_vtime(p, cpu_to_dsq(cpu),
				 task->slice_ns, vtime, task->flags);

	/*
	 * If the task was dequeued while still in the user-space
	 * scheduler, this dispatch can be ignored.
	 *
	 * Another enqueue event for the same task will be received later.
	 */
	if (cancel_stale(p, task))
		goto out_release;

	/*
	 * CPU selected by the user-space scheduler is valid, kick it.
	 *
	 * scx_gmp: as kick_for(), but with the kick an insert made in
	 * dispatch() needs (kick_dispatched()).
	 */
	if (!preempt_if_yields(p, cpu) && !preempt_across(p, cpu, vtime))
		kick_dispatched(cpu);

out_release:
	bpf_task_release(p);
}

/*
 * scx_gmp: whether every task waiting in @cpu's own DSQ is a SCHED_IDLE one
 * that yields to @p (idle_yields()). To @p that DSQ is as good as empty, as
 * a CPU that runs such a task is as good as idle (run_beside_idle()): the
 * agent commits a CPU's next task ahead of time, and a wakeup on an idle
 * CPU with two batch jobs committed to it went to the agent and waited
 * for both (11.7 ms in a 2-vCPU trace of cyclictest beside SCHED_IDLE
 * hogs). An empty DSQ is too. Any CPU.
 */
static bool only_idle_queued(const struct task_struct *p, s32 cpu)
{
	struct task_struct *q;

	if (!scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu)))
		return true;
	bpf_for_each(scx_dsq, q, cpu_to_dsq(cpu), 0) {
		if (!idle_yields(q, p, idle_slice_ns))
			return false;
	}
	return true;
}

/*
 * Return true it's safe to dispatch directly on @cpu, false otherwise.
 *
 * scx_gmp: for @p, ahead of the SCHED_IDLE tasks queued there
 * (only_idle_queued()): the CPU's local DSQ runs before its own.
 */
static bool can_direct_dispatch(const struct task_struct *p, s32 cpu)
{
	if (scx_bpf_dsq_nr_queued(SHARED_DSQ))
		return false;
	if (!scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu)))
		return true;
	if (!only_idle_queued(p, cpu))
		return false;
	__sync_fetch_and_add(&nr_ahead_of_idle, 1);
	return true;
}

/*
 * scx_gmp: whether a wakeup of @p may be placed on the waker's (this) CPU,
 * as Go's ready() places it in the waker's runnext: not a kernel thread,
 * no real-time task holding any CPU (fast_paths()), this CPU online and
 * allowed to @p. Any CPU (the waker's).
 */
static bool ready_here(const struct task_struct *p)
{
	s32 this_cpu = bpf_get_smp_processor_id();

	return !is_kthread(p) && fast_paths() && !is_offline(this_cpu) &&
	       bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr);
}

/*
 * scx_gmp: ready (proc.go ready(), its placement): the CPU a woken task is
 * queued on when it does not run at once on an idle CPU. Go puts it in the
 * waker's runnext, and the agent's model readies a task on the CPU it is
 * queued on, so that is the waker's (this) CPU, if @p may run there. On its
 * own last CPU, busy with another task, it waited up to a slice behind that
 * task (docs/benchmarks.md, "Beside a SCHED_IDLE batch job"). Kernel threads
 * stay on theirs (enqueue() runs them there), and so does every task while a
 * real-time task holds any CPU (fast_paths()). Any CPU (the waker's).
 */
static s32 ready_cpu(const struct task_struct *p, s32 prev_cpu)
{
	return ready_here(p) ? bpf_get_smp_processor_id() : prev_cpu;
}

/*
 * scx_gmp: run_beside_idle - @p wakes to @cpu, whose running task is a
 * SCHED_IDLE one that yields to it (idle_yields()). To @p that CPU is as
 * good as idle, and the kernel's own wakeups count it so (sched_idle_cpu()
 * in kernel/sched/fair.c). So @p goes to @dsq, @cpu's local DSQ, and runs
 * next there, preempting the batch job, as on an idle CPU (builtin_idle),
 * instead of first waiting for the agent's pass: that wait made user
 * mode's median wakeup beside SCHED_IDLE hogs twice BPF mode's. The batch
 * job goes back to the agent. As Go's runnext, @p goes ahead of what the
 * agent queued on @cpu. Not with --idle-slice-us 0 (Go's rule) or
 * --go-ready (every wakeup through the agent: builtin_idle off). From
 * select_cpu() (@dsq SCX_DSQ_LOCAL) and enqueue() (SCX_DSQ_LOCAL_ON | @cpu,
 * a wakeup that skipped select_cpu(): a task that may run on one CPU
 * only), on the waker's CPU.
 */
static bool run_beside_idle(struct task_struct *p, s32 cpu, u64 dsq,
			    u64 enq_flags)
{
	if (!idle_slice_ns || is_kthread(p) || cpu < 0 ||
	    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr) ||
	    scx_bpf_dsq_nr_queued(SHARED_DSQ) || !cpu_yields_to(p, cpu))
		return false;
	/* SCX_ENQ_PREEMPT ends the running task's slice. */
	scx_bpf_dsq_insert(p, dsq, slice_ns, enq_flags | SCX_ENQ_PREEMPT);
	__sync_fetch_and_add(&nr_idle_yields, 1);
	__sync_fetch_and_add(&nr_beside_idle, 1);
	return true;
}

s32 BPF_STRUCT_OPS(rustland_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	s32 cpu, this_cpu = bpf_get_smp_processor_id();
	bool is_this_cpu_allowed = bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr);

	/*
	 * Make sure @prev_cpu is usable, otherwise try to move close to
	 * the waker's CPU. If the waker's CPU is also not usable, then
	 * pick the first usable CPU.
	 */
	if (!bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr))
		prev_cpu = is_this_cpu_allowed ? this_cpu : bpf_cpumask_first(p->cpus_ptr);

	/*
	 * Scheduler is dispatched directly in .dispatch() when needed, so
	 * we can skip it here.
	 */
	if (is_usersched_task(p))
		return prev_cpu;

	/*
	 * scx_gmp: proc.go ready() puts the woken task in the waker's
	 * runnext. For a sync wakeup (the waker is about to sleep) that is
	 * this CPU, and enqueue() hands the task off there (handoff()).
	 */
	if (sync_handoff && (wake_flags & SCX_WAKE_SYNC) && !is_kthread(p) &&
	    is_this_cpu_allowed && fast_paths() && !is_offline(this_cpu)) {
		struct task_ctx *tctx = try_lookup_task_ctx(p);

		if (tctx) {
			tctx->sync = true;
			return this_cpu;
		}
	}

	/*
	 * If built-in idle CPU policy is not enabled, completely delegate
	 * the idle selection policy to user-space and keep reusing the
	 * same CPU here.
	 *
	 * scx_gmp: nor while a real-time task holds any CPU (fast_paths()).
	 */
	if (!builtin_idle || !fast_paths())
		return ready_cpu(p, prev_cpu);

	/*
	 * Pick the idle CPU closest to @prev_cpu usable by the task.
	 */
	cpu = pick_idle_cpu(p, prev_cpu, wake_flags);
	if (cpu >= 0) {
		/*
		 * scx_gmp: into the local DSQ of the CPU the task wakes on,
		 * not @cpu's DSQ. The kernel may not use @cpu: one going
		 * offline can still look idle here, and the kernel then wakes
		 * the task elsewhere. In @cpu's DSQ it was left there, with no
		 * CPU kicked to take it, and RCU's kthread stalled (1 hotplug
		 * in 7 under tests/guest/lifecycle.sh).
		 */
		if (can_direct_dispatch(p, cpu)) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
			__sync_fetch_and_add(&nr_idle_places, 1);
		}
		return cpu;
	}

	cpu = ready_cpu(p, prev_cpu);
	run_beside_idle(p, cpu, SCX_DSQ_LOCAL, 0);
	return cpu;
}

/*
 * Select and wake-up an idle CPU for a specific task from the user-space
 * scheduler.
 */
SEC("syscall")
int rs_select_cpu(struct task_cpu_arg *input)
{
	struct task_struct *p;
	int cpu = input->cpu;

	p = bpf_task_from_pid(input->pid);
	if (!p)
		return -EINVAL;

	bpf_rcu_read_lock();
	/*
	 * Kernels that don't provide scx_bpf_select_cpu_and() only allow
	 * to use the built-in idle CPU selection policy only from
	 * ops.select_cpu() and opt.enqueue(), return any idle CPU usable
	 * by the task in this case.
	 */
	if (!__COMPAT_HAS_scx_bpf_select_cpu_and) {
		if (!scx_bpf_test_and_clear_cpu_idle(cpu))
			cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
	} else {
		/*
		 * Set SCX_WAKE_TTWU, pretending to be a wakeup, to prioritize
		 * faster CPU selection (we probably want to add an option to allow
		 * the user-space scheduler to use this logic or not).
		 */
		cpu = pick_idle_cpu(p, cpu, SCX_WAKE_TTWU);
	}
	bpf_rcu_read_unlock();

	bpf_task_release(p);

	return cpu;
}

/*
 * Fill @task with all the information that need to be sent to the user-space
 * scheduler.
 */
static void get_task_info(struct queued_task_ctx *task,
			  const struct task_struct *p,
			  struct task_ctx *tctx, u64 enq_flags, s32 prev_cpu)
{
	task->pid = p->pid;
	task->cpu = prev_cpu;
	task->nr_cpus_allowed = p->nr_cpus_allowed;
	task->flags = enq_flags;
	task->start_ts = tctx->start_ts;
	task->stop_ts = tctx->stop_ts;
	task->exec_runtime = tctx->exec_runtime;
	task->weight = p->scx.weight;
	task->vtime = p->scx.dsq_vtime;
	task->enq_cnt = ++tctx->enq_cnt;

	bpf_core_read_str(&task->comm, sizeof(task->comm), &p->comm);
}

/*
 * User-space scheduler is congested: log that and increment congested counter.
 */
static void sched_congested(struct task_struct *p)
{
	dbg_msg("congested: pid=%d (%s)", p->pid, p->comm);
	__sync_fetch_and_add(&nr_sched_congested, 1);
}

/*
 * Return true if a task has been enqueued as a remote wakeup, false
 * otherwise.
 */
static bool is_queued_wakeup(const struct task_struct *p, u64 enq_flags)
{
	return !__COMPAT_is_enq_cpu_selected(enq_flags) && !scx_bpf_task_running(p);
}

/*
 * Queue a task to the user-space scheduler.
 */
static void queue_task_to_userspace(struct task_struct *p, s32 prev_cpu, u64 enq_flags)
{
	struct queued_task_ctx *task;
	struct task_ctx *tctx;

	tctx = try_lookup_task_ctx(p);
	if (!tctx)
		return;

	/*
	 * Allocate a new entry in the ring buffer.
	 *
	 * If ring buffer is full, the user-space scheduler is congested,
	 * so dispatch the task directly using the shared DSQ (the task
	 * will be consumed by the first CPU available).
	 */
	task = bpf_ringbuf_reserve(&queued, sizeof(*task), 0);
	if (!task) {
		sched_congested(p);
		scx_bpf_dsq_insert_vtime(p, SHARED_DSQ,
					 slice_ns, p->scx.dsq_vtime, enq_flags);
		__sync_fetch_and_add(&nr_kernel_dispatches, 1);
		return;
	}

	/*
	 * Collect task information and store them in the ring buffer that
	 * will be consumed by the user-space scheduler.
	 */
	dbg_msg("enqueue: pid=%d (%s)", p->pid, p->comm);
	get_task_info(task, p, tctx, enq_flags, prev_cpu);
	bpf_ringbuf_submit(task, 0);
	__sync_fetch_and_add(&nr_queued, 1);
}

/*
 * scx_gmp: kick_agent - a wakeup waits for the agent, and @cpu, the CPU it
 * was queued on, runs a task. In Go the waker's ready() decides where the
 * woken goroutine goes at once; here the agent decides, and it runs only
 * when some CPU's task stops or ends its slice: beside CPU-bound tasks, a
 * wakeup waited up to a whole slice for the decision and then up to another
 * for its CPU. So preempt @cpu's task for the agent's pass: that task gets
 * the rest of its slice back, next on that CPU (restore_kicked()), ahead of
 * what the agent queues there, as a Go P's running goroutine runs
 * on while a woken one waits in runnext. Not when the agent runs already,
 * or with --lazy-agent (then an idle @cpu is woken, as before). A SCHED_IDLE
 * task that runs there does not get its slice back ahead of @p, the woken
 * task (idle_yields()): it goes back to the agent. With @may_cross (a
 * wakeup, not a sync one), a task of another process that @p goes ahead of
 * (cross_preempts()) gets its slice back behind @p. Any CPU.
 */
static void kick_agent(const struct task_struct *p, s32 cpu, bool may_cross)
{
	struct kicked *k = kick_entry(cpu);
	struct task_struct *cur;
	u64 behind;

	if (!agent_kick || !k || agent_cpu >= 0 || !fast_paths()) {
		if (agent_kick && agent_cpu >= 0)
			agent_missed = 1;
		kick_for(p, cpu);
		return;
	}
	bpf_rcu_read_lock();
	cur = scx_bpf_cpu_curr(cpu);
	if (cur && idle_yields(cur, p, idle_slice_ns)) {
		preempt_idle(cpu);
	} else if (may_kick(cur, k)) {
		behind = may_cross && cross_preempts(p, cur, cpu) ? cross_vtime(0) : 0;
		k->across = may_cross && other_process(p, cur);
		kick_back(cur, k, cpu, behind);
		__sync_fetch_and_add(&nr_agent_kicks, 1);
	} else {
		kick_cpu(cpu);
	}
	bpf_rcu_read_unlock();
}

/*
 * scx_gmp: kick_across - @p woke to @cpu, which select_cpu() chose, and
 * waits for the agent. Rustland kicks no CPU for such a wakeup: the agent
 * decides when some CPU's task stops or ends its slice. If @p goes ahead of
 * the task that runs on @cpu (cross_preempts()), kick_agent() now. Any CPU.
 */
static void kick_across(const struct task_struct *p, s32 cpu)
{
	struct task_struct *cur;
	bool cross;

	if (!cross_preempt_ns)
		return;
	bpf_rcu_read_lock();
	cur = scx_bpf_cpu_curr(cpu);
	cross = cur && cross_preempts(p, cur, cpu);
	bpf_rcu_read_unlock();
	if (cross)
		kick_agent(p, cpu, true);
}

/* scx_gmp: whether kick_agent() preempted @p on @cpu. Any CPU. */
static bool was_kicked(const struct task_struct *p, s32 cpu)
{
	u32 i = cpu;

	return i < MAX_CPUS && kicked[i].pid == p->pid;
}

/*
 * scx_gmp: the task kick_agent() preempted on @cpu is no longer waiting to
 * go back: it went back, or runs on (its slice refilled in dispatch()), or
 * another task starts there. Its next stop is its own. Owner only.
 */
static void forget_kick(s32 cpu)
{
	u32 i = cpu;

	if (i < MAX_CPUS)
		kicked[i].pid = 0;
}

/*
 * scx_gmp: drain_first - does a task preempted for the agent's pass go back
 * where dispatch(), which drains the agent's decisions first, takes it
 * (restore_kicked())? For a wakeup of another process (@across), never as
 * the CPU's last task (@enq_flags has SCX_ENQ_LAST). Owner only.
 */
static bool drain_first(bool across, u64 enq_flags)
{
	return across && !(enq_flags & SCX_ENQ_LAST);
}

/*
 * scx_gmp: restore_kicked - @p was preempted by kick_agent() on @cpu: back
 * on that CPU next, with the slice it had left, without the agent (whose
 * model has it running still). Whether it was. Owner only.
 */
static bool restore_kicked(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	u32 i = cpu;
	u64 left, behind;
	bool across;

	if (i >= MAX_CPUS || !was_kicked(p, cpu) || p->scx.slice ||
	    (enq_flags & SCX_ENQ_WAKEUP))
		return false;
	left = kicked[i].left;
	behind = kicked[i].behind;
	across = kicked[i].across;
	forget_kick(cpu);
	if (is_stranded(p, cpu) || !left)
		return false;
	kicked[i].resumed = p->pid;
	if (behind) {
		/*
		 * cross_preempts(): the woken task runs first. In the CPU's own
		 * DSQ, @p orders after what the agent commits there up to
		 * CROSS_VTIME_LAG decisions after the woken task's
		 * (preempt_across()) or after its last pass (kick_agent()), LRQ
		 * tasks too (cross_vtime()).
		 */
		scx_bpf_dsq_insert_vtime(p, cpu_to_dsq(cpu), left, behind, enq_flags);
		__sync_fetch_and_add(&nr_cross_preempts, 1);
		return true;
	}
	/*
	 * Its CPU's local DSQ: the agent, picked by dispatch() before this
	 * put, runs first, then @p, then what the agent queued in the CPU's
	 * own DSQ. The kernel never leaves a task in the local DSQ of a CPU
	 * that goes offline (a task in the CPU's own DSQ could wait there:
	 * README, "Hotplug"). But a CPU with a task in its local DSQ does not
	 * call dispatch() when the agent's pass ends, so the pass's decisions
	 * wait in the ring until some CPU does, and @p runs ahead of them: a
	 * woken task of another process that goes ahead of @p
	 * (behind_resumed()) then waited for its slice (13 ms in a 2-vCPU
	 * trace of cyclictest beside CPU hogs). So when the wakeup that
	 * preempted @p was of another process (@across), @p goes to the head
	 * of its CPU's own DSQ instead, where dispatch() takes it after the
	 * pass's decisions are in: drain_first(). Not when nothing else would
	 * run here (SCX_ENQ_LAST): the CPU would idle.
	 */
	if (drain_first(across, enq_flags))
		scx_bpf_dsq_insert_vtime(p, cpu_to_dsq(cpu), left, 0, enq_flags);
	else
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, left, enq_flags);
	__sync_fetch_and_add(&nr_kick_restores, 1);
	return true;
}

/*
 * scx_gmp: handoff - a sync wakeup: the waker, running here, is about to
 * sleep, and Go's ready() puts @p in this CPU's runnext, which runs next
 * when the waker parks. So @p goes straight to this CPU's local DSQ, and
 * inherits what is left of the waker's slice, as a runnext task does
 * (proc.go inheritTime). The agent does not see it: a round trip through
 * it on every hand-off of a pipe ping-pong made each one 3x to 5x slower
 * than EEVDF's. Not when anything is queued here already (a task the agent
 * committed to this CPU runs first, as the LRQ's head would after a
 * runnext it already holds), unless all of it is SCHED_IDLE tasks that
 * yield to @p (only_idle_queued()): beside SCHED_IDLE hogs the agent keeps
 * one committed behind the waker. Not either when the waker is not a
 * sched_ext task or its slice is spent, while a real-time task holds any
 * CPU (fast_paths()), or with --go-handoff. Unlike a runnext task, @p
 * cannot be stolen meanwhile (README, "Where Linux differs from Go").
 * Whether it was handed off. Owner only (the waker's CPU).
 */
static bool handoff(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	u64 left = cur->scx.slice;

	if (cpu != bpf_get_smp_processor_id() || !left || !fast_paths() ||
	    !(cur->scx.flags & SCX_TASK_QUEUED) || is_usersched_task(cur) ||
	    is_offline(cpu) || scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) ||
	    !only_idle_queued(p, cpu))
		return false;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, left, enq_flags);
	__sync_fetch_and_add(&nr_handoffs, 1);
	return true;
}

/*
 * scx_gmp: whether @p wakes from an uninterruptible sleep: a kernel lock
 * (a mutex, a rw_semaphore such as a process's memory-map lock) or I/O.
 * try_to_wake_up() sets sched_contributes_to_load for such a sleep (not for
 * TASK_NOLOAD or a frozen task) before it enqueues the task. Any CPU.
 */
static bool woke_from_lock(const struct task_struct *p, u64 enq_flags)
{
	return (enq_flags & SCX_ENQ_WAKEUP) &&
	       BPF_CORE_READ_BITFIELD_PROBED(p, sched_contributes_to_load);
}

/*
 * scx_gmp: lock_streak_ok - whether @cpu may take one more lock hand-off,
 * and if so, counts it. A lock hand-off goes to the local DSQ, which the
 * kernel runs before it calls dispatch() again, and only dispatch() takes
 * what waits in this CPU's own DSQ (the agent's decisions, its per-CPU
 * kernel threads) and runs the agent. So a steady stream of lock wakeups
 * on a CPU would starve those, the way Go's local queue would starve the
 * global one without the schedtick%61 check (proc.go findRunnable): past
 * @lock_streak_max hand-offs (Go's 61: with 10 ms slices, about 610 ms,
 * far inside the 30 s watchdog, GMP_TIMEOUT_MS) the next lock wakeup goes
 * through the agent until dispatch() runs here. Owner only (@cpu's own
 * enqueue and dispatch(), which reset_lock_streak()s).
 */
static bool lock_streak_ok(s32 cpu)
{
	u32 i = cpu;

	if (i >= MAX_CPUS)
		return false;
	if (lock_streak[i] >= lock_streak_max) {
		__sync_fetch_and_add(&nr_lock_refusals, 1);
		return false;
	}
	lock_streak[i]++;
	return true;
}

/*
 * scx_gmp: reset_lock_streak - @cpu calls dispatch(): what waits in its own
 * DSQ and the agent get their turn now (lock_streak_ok()). Owner only.
 */
static void reset_lock_streak(s32 cpu)
{
	u32 i = cpu;

	if (i < MAX_CPUS)
		lock_streak[i] = 0;
}

/*
 * scx_gmp: lock_handoff - @p wakes from a kernel lock (woke_from_lock()) on
 * @cpu, the waker's CPU (ready_cpu()), and runs next there, ahead of what
 * the agent committed to it, without a round trip through the agent: Go's
 * direct hand-off of a semaphore (sema.go semrelease1 with handoff: the
 * waiter goes in the releaser's runnext). A kernel rw_semaphore gives the
 * lock to the readers it wakes before they run, so every hop through the
 * agent kept the lock held by a task that waited in the queues, and the
 * lock's other waiters, its writer first, behind it: beside the soak's
 * load a 10,000-thread fan-out's memory-map lock convoy took 392 s (39
 * threads blocked over 30 s) with the hop and 117 s (none) without, in one
 * 4-vCPU boot. Go's hand-off also yields the releaser's P (goyield); here
 * the waker runs on to the end of its slice or its sleep. Not with
 * --go-handoff, where ready_cpu() would not place @p here (ready_here()),
 * or past a streak of them with no dispatch() here (lock_streak_ok()).
 * Whether it was handed off. Owner only (the waker's CPU).
 */
static bool lock_handoff(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	if (!sync_handoff || cpu != bpf_get_smp_processor_id() ||
	    !ready_here(p) || !woke_from_lock(p, enq_flags) ||
	    !lock_streak_ok(cpu))
		return false;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
	__sync_fetch_and_add(&nr_lock_handoffs, 1);
	return true;
}

/*
 * Task @p becomes ready to run. We can dispatch the task directly here if the
 * user-space scheduler is not required, or enqueue it to be processed by the
 * scheduler.
 */
void BPF_STRUCT_OPS(rustland_enqueue, struct task_struct *p, u64 enq_flags)
{
	s32 prev_cpu = scx_bpf_task_cpu(p), cpu;
	bool is_wakeup = is_queued_wakeup(p, enq_flags);
	struct task_ctx *tctx = try_lookup_task_ctx(p);
	bool sync = false, to_agent = false, woken;

	/* scx_gmp: a sync wakeup that select_cpu() put here (handoff()). */
	if (tctx) {
		sync = tctx->sync;
		tctx->sync = false;
	}

	/*
	 * Insert the user-space scheduler to its dedicated DSQ, it will be
	 * consumed from ops.dispatch() only when there's any pending
	 * scheduling action to do.
	 */
	if (is_usersched_task(p)) {
		scx_bpf_dsq_insert(p, SCHED_DSQ, slice_ns, enq_flags);
		/*
		 * scx_gmp: the agent put back in a pass (@agent_in_pass), or
		 * because a real-time task took its CPU (cpu_release():
		 * SCX_ENQ_REENQ) as it was about to start one, has work
		 * pending. Before @agent_in_pass nothing might say so (the ring
		 * drained, @nr_scheduled not yet updated, the flag taken by the
		 * dispatch that picked it), and no CPU took it from SCHED_DSQ
		 * until the timer's look, up to a second later: in one CI run a
		 * woken task that it had read waited 1.2 s beside an idle CPU
		 * (docs/reliability.md). So an idle CPU runs it now.
		 */
		if ((enq_flags & SCX_ENQ_REENQ) || agent_in_pass) {
			set_usersched_needed();
			kick_idle_for(p);
		}
		goto out_kick;
	}

	/* scx_gmp: a task kick_agent() preempted runs on (restore_kicked()). */
	if (restore_kicked(p, prev_cpu, enq_flags))
		return;

	/*
	 * Always dispatch per-CPU kthreads directly on their target CPU.
	 *
	 * This allows to prioritize critical kernel threads that may
	 * potentially stall the entire system if they are blocked for too long
	 * (i.e., ksoftirqd/N, rcuop/N, etc.).
	 *
	 * scx_gmp: every kernel thread, not only the per-CPU ones. They are the
	 * runtime, not goroutines (Go's sysmon runs without a P): queued behind
	 * a backlog of thousands in the agent's model, RCU's grace-period
	 * kthread waited there 10 s, and RCU stalled.
	 */
	if (is_kthread(p) || is_kswapd(p) || is_khugepaged(p)) {
		/*
		 * scx_gmp: not on a CPU that a real-time task holds, if it may
		 * run elsewhere: there it would wait for the deadline server.
		 */
		if (is_stranded(p, prev_cpu)) {
			scx_bpf_dsq_insert_vtime(p, SHARED_DSQ, slice_ns,
						 p->scx.dsq_vtime, enq_flags);
			__sync_fetch_and_add(&nr_kernel_dispatches, 1);
			kick_idle_for(p);
			return;
		}
		scx_bpf_dsq_insert_vtime(p, cpu_to_dsq(prev_cpu),
					 slice_ns, p->scx.dsq_vtime, enq_flags);
		__sync_fetch_and_add(&nr_kernel_dispatches, 1);
		goto out_kick;
	}

	/*
	 * scx_gmp: a real-time task holds the CPU the task is queued on:
	 * while it does, sched_ext runs there only within the kernel's
	 * deadline server, and a task waiting for the agent stays counted on
	 * that CPU but in no DSQ it can run: under real-time hogs the servers
	 * stopped picking (README, "When things go wrong"). So the task goes
	 * to the shared DSQ itself, ahead of the agent's decisions (vtime 0),
	 * for the first CPU that runs sched_ext.
	 */
	if (is_stranded(p, prev_cpu)) {
		scx_bpf_dsq_insert_vtime(p, SHARED_DSQ, slice_ns, 0, enq_flags);
		__sync_fetch_and_add(&nr_retake, 1);
		kick_idle_for(p);
		return;
	}

	if (sync && handoff(p, prev_cpu, enq_flags))
		return;

	/* scx_gmp: a wakeup from a kernel lock runs next here too. */
	if (lock_handoff(p, prev_cpu, enq_flags))
		return;

	/*
	 * If @builtin_idle is enabled, give the task a chance to be
	 * directly dispatched only on a wakeup and only if
	 * ops.select_cpu() was skipped, otherwise the task is always
	 * queued to the user-space scheduler.
	 */
	if (!(builtin_idle && is_wakeup) || !fast_paths()) {
		queue_task_to_userspace(p, prev_cpu, enq_flags);
		to_agent = true;
		goto out_kick;
	}

	/*
	 * Try to find an idle CPU in the system, if all CPUs are busy
	 * queue the task to the user-space scheduler.
	 */
	cpu = pick_idle_cpu(p, prev_cpu, 0);
	if (cpu < 0) {
		if (run_beside_idle(p, prev_cpu, SCX_DSQ_LOCAL_ON | prev_cpu,
				    enq_flags))
			return;
		queue_task_to_userspace(p, prev_cpu, enq_flags);
		to_agent = true;
		goto out_kick;
	}

	/*
	 * Always force a CPU wakeup, so that the allocated CPU can be
	 * released and go back idle even if the task isn't directly
	 * dispatched.
	 */
	prev_cpu = cpu;
	is_wakeup = true;

	/*
	 * Bounce the task to the user-space scheduler if we can't directly
	 * dispatch to the selected CPU.
	 */
	if (!can_direct_dispatch(p, cpu)) {
		queue_task_to_userspace(p, prev_cpu, enq_flags);
		to_agent = true;
		goto out_kick;
	}

	/*
	 * We can race with a dequeue here and the selected idle CPU might
	 * be not valid anymore, if the task affinity has changed.
	 *
	 * In this case just wakeup the picked CPU and ignore the enqueue,
	 * another enqueue event for the same task will be received later.
	 */
	if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		goto out_kick;

	/*
	 * Directly dispatch the task to selected idle CPU (queued wakeup).
	 *
	 * scx_gmp: into its local DSQ, which the kernel does not let a
	 * task sit in while the CPU goes offline (it puts the task on its
	 * global DSQ instead), as select_cpu() above.
	 */
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
	__sync_fetch_and_add(&nr_idle_places, 1);

out_kick:
	/*
	 * Wakeup the task's CPU if needed.
	 */
	woken = (enq_flags & SCX_ENQ_WAKEUP) && !sync;
	if (to_agent && tctx)
		tctx->woken = woken;
	if (is_wakeup && to_agent)
		kick_agent(p, prev_cpu, woken);
	else if (is_wakeup)
		kick_cpu(prev_cpu);
	else if (to_agent && woken)
		kick_across(p, prev_cpu);
}

/*
 * Handle a task dispatched from user-space, performing the actual low-level
 * BPF dispatch.
 *
 * scx_gmp: 0 goes on to the next decision while dispatch slots are left, 1
 * stops (bpf_user_ringbuf_drain() stops on 1). scx_rustland_core returns 1
 * while slots are left, so each dispatch() took one decision from the ring:
 * a pass that decided two tasks left the second there until some CPU called
 * dispatch() again. Beside CPU hogs that is the next tick: in a 2-vCPU trace
 * of the ping-pong beside SCHED_IDLE hogs, a woken task the agent had sent
 * ahead of a hog waited in the ring while the hog ran (19 of 37 waits over
 * 3 ms; docs/benchmarks.md, "The agent's decisions left in the ring, and
 * two more waits beside SCHED_IDLE hogs").
 */
static long handle_dispatched_task(struct bpf_dynptr *dynptr, void *context)
{
	const struct dispatched_task_ctx *task;

	task = bpf_dynptr_data(dynptr, 0, sizeof(*task));
	if (!task)
		return 0;

	dispatch_task(task);

	return !scx_bpf_dispatch_nr_slots();
}

/*
 * Dispatch tasks that are ready to run.
 *
 * This function is called when a CPU's local DSQ is empty and ready to accept
 * new dispatched tasks.
 *
 * We may dispatch tasks also on other CPUs from here, if the scheduler decided
 * so (usually if other CPUs are idle we may want to send more tasks to their
 * local DSQ to optimize the scheduling pipeline).
 */
/*
 * scx_gmp: retake (proc.go retake, its syscall half): mark each CPU that a
 * real-time task has held for a slice or more as retaken, so that the CPUs
 * that look for work take what its DSQ holds (consume_stranded). Any CPU.
 */
static void retake(void)
{
	u64 now = scx_bpf_now();
	u32 cpu;

	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu < MAX_CPUS && cpu_held[cpu] && !cpu_retaken[cpu] &&
		    now - held_at[cpu] >= slice_ns) {
			cpu_retaken[cpu] = 1;
			__sync_fetch_and_add(&nr_retake_cpus, 1);
		}
	}
}

/*
 * scx_gmp: move a task to this CPU's local DSQ from the DSQ of a CPU that
 * went offline, or that has been retaken from a real-time task (a task
 * only that CPU may run stays), or with @any from any CPU's DSQ (only for
 * a held CPU's deadline-server pick, served()); whether one moved. Any CPU.
 */
static bool consume_stranded(bool any)
{
	u32 cpu;

	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu >= MAX_CPUS ||
		    (!any && !cpu_left[cpu] && !cpu_retaken[cpu] &&
		     !cpu_stuck[cpu]))
			continue;
		if (scx_bpf_dsq_move_to_local(cpu_to_dsq(cpu), 0)) {
			if (cpu_retaken[cpu])
				__sync_fetch_and_add(&nr_retake, 1);
			return true;
		}
	}
	return false;
}

/*
 * scx_gmp: whether @p waits for the agent: runnable, and in this layer's
 * custody (queued to the agent, not yet in any DSQ).
 */
static bool in_custody(const struct task_struct *p)
{
	return (p->scx.flags & SCX_TASK_QUEUED) &&
	       (p->scx.ops_state.counter & OPSS_STATE_MASK) == SCX_OPSS_QUEUED;
}

/*
 * scx_gmp: the deadline server picks on held @cpu, no DSQ holds a task it
 * may run, and the agent is running elsewhere: run here a task that waits
 * for the agent (one counted on @cpu first), ahead of the agent's decision,
 * so that the server does not stop (served()). The agent's decision comes
 * later and is dropped (enq_cnt, or the kernel's own check). Whether one
 * was dispatched. Owner only; walks every thread, so only on this path.
 */
static bool rescue_custody(s32 cpu)
{
	struct task_struct *p, *pick = NULL;
	struct bpf_iter_task it;

	bpf_iter_task_new(&it, NULL, BPF_TASK_ITER_ALL_THREADS);
	while ((p = bpf_iter_task_next(&it))) {
		if (!in_custody(p) || is_usersched_task(p) ||
		    !bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		if (scx_bpf_task_cpu(p) == cpu) {
			pick = p;
			break;
		}
		if (!pick)
			pick = p;
	}
	if (pick) {
		scx_bpf_dsq_insert(pick, SCX_DSQ_LOCAL, slice_ns, 0);
		__sync_fetch_and_add(&nr_retake, 1);
	}
	bpf_iter_task_destroy(&it);
	return pick != NULL;
}

/*
 * scx_gmp: this CPU's own DSQ holds tasks, but the kernel gave it none of
 * them. That happens while the CPU is on its way offline: the kernel marks
 * it inactive, waits for an RCU grace period, and only then calls
 * cpu_offline(). Meanwhile it still dispatches, the agent still sends it
 * tasks, and the kernel refuses to move a task from another CPU onto an
 * inactive one. Nobody else reads this DSQ, so a task preempted in an RCU
 * read-side section could wait there for the very grace period the
 * hotplug waits for, and RCU stalled (issue 12's "rcu_preempt kthread
 * starved ... ->cpu=1"; the kernel counted each refusal as
 * SCX_EV_DISPATCH_LOCAL_DSQ_OFFLINE). So move them one by one: the kernel
 * runs a task here if it may, and puts it on its global DSQ, which every
 * CPU serves first, if this CPU is not active (and an idle CPU is woken
 * to take it). A task that may not run here stays for another CPU.
 * Whether one now runs here. Owner only.
 */
static bool release_own_dsq(s32 cpu)
{
	struct task_struct *p;
	s32 local = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL);

	bpf_for_each(scx_dsq, p, cpu_to_dsq(cpu), 0) {
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) ||
		    p->migration_disabled)
			continue;
		if (!scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
			continue;
		__sync_fetch_and_add(&nr_released, 1);
		if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) > local)
			return true;
		/* On the global DSQ: wake a CPU to take it. */
		kick_idle_for(p);
	}
	return false;
}

/*
 * scx_gmp: steal_committed - this CPU has nothing to run, and neither has
 * the agent: take the first task it may run from the DSQ of another CPU
 * that runs a task other than the agent (Go's stealWork, for the tasks the
 * agent has committed to a CPU already). The model steals from the queues
 * it holds, but a CPU's next task, sent to its DSQ (MAX_INFLIGHT), waited
 * there for the task ahead of it: in a 2-vCPU trace of cyclictest beside
 * two CPU hogs, one CPU ran both hogs by turns while the other idled, 115
 * to 248 ms a second (docs/benchmarks.md). The agent learns where the task
 * ran from the run records, as for any task. Only with --steal-committed. Owner
 * only, in dispatch().
 */
static bool steal_committed(s32 cpu)
{
	struct task_struct *cur;
	bool busy;
	u32 v;

	if (!steal_committed_on)
		return false;
	bpf_for(v, 0, nr_cpu_ids) {
		if (v >= MAX_CPUS || v == cpu || cpu_offline[v] ||
		    !scx_bpf_dsq_nr_queued(cpu_to_dsq(v)))
			continue;
		bpf_rcu_read_lock();
		cur = scx_bpf_cpu_curr(v);
		busy = cur && cur->pid && !is_usersched_task(cur) && cur_pid[v] == cur->pid;
		bpf_rcu_read_unlock();
		/* The first task there that may run here, as consume_stranded(). */
		if (busy && scx_bpf_dsq_move_to_local(cpu_to_dsq(v), 0)) {
			__sync_fetch_and_add(&nr_committed_steals, 1);
			return true;
		}
	}
	return false;
}

/*
 * scx_gmp: agent_again - the agent, @prev, ends a pass on @cpu: does it run
 * another one at once? Yes if a wakeup came for it during the pass
 * (@agent_missed) and is still in the ring, unread: kick_agent() preempts
 * no CPU for the agent while it runs, so the pass, which had read the ring
 * already, ended without it, and it waited until some CPU's task stopped or
 * ended its slice (44 of the 249 waits over 10 ms in the trace of
 * run_started() came so). At most one such pass in a row on a CPU, so that
 * the agent cannot starve the tasks queued there (the dispatch below).
 * Owner only.
 */
static bool agent_again(s32 cpu, const struct task_struct *prev)
{
	u32 i = cpu;
	bool again;

	if (i >= MAX_CPUS)
		return false;
	again = prev && is_usersched_task(prev) && !agent_again_on[i] && is_queued(prev) &&
		__sync_fetch_and_and(&agent_missed, 0) &&
		bpf_ringbuf_query(&queued, BPF_RB_AVAIL_DATA) > 0;
	agent_again_on[i] = again;
	return again;
}

/*
 * Consume all tasks from the @dispatched list and immediately dispatch them
 * on the target CPU decided by the user-space scheduler.
 *
 * scx_gmp: only one CPU drains the ring at a time: another that tries
 * meanwhile gets -EBUSY and reads nothing. The one draining may have looked
 * its last before the agent added its decisions, so those were left in the
 * ring for the next dispatch() of any CPU. With every CPU about to idle,
 * that is when something next wakes one: in one CI run, two tasks of the
 * light request load waited 125 ms beside two idle CPUs, and the one traced
 * then ran from a DSQ without the agent running first, as this race would
 * leave it (docs/reliability.md). So a CPU that finds the ring busy says so
 * (@drain_missed) and tries once more; a CPU that drained drains again if
 * one did. Either the second try drains, or the ring was still busy after
 * the flag was set, and the CPU draining then sees the flag when it is done.
 * Returns whether this CPU made sure that no decision was left: false only
 * when DRAIN_TRIES ran out first (then redrain()). Owner only, in dispatch().
 */
static bool drain_dispatched(void)
{
	bool flagged = false;
	u32 i;

	bpf_for(i, 0, DRAIN_TRIES) {
		long ret = bpf_user_ringbuf_drain(&dispatched, handle_dispatched_task, NULL,
						  BPF_RB_NO_WAKEUP);

		if (ret == -EBUSY) {
			__sync_fetch_and_add(&nr_drain_busy, 1);
			/* Busy after the flag was set: the CPU draining sees it. */
			if (flagged)
				return true;
			__sync_lock_test_and_set(&drain_missed, 1);
			flagged = true;
			continue;
		}
		if (ret < 0)
			dbg_msg("User ringbuf drain error: %ld", ret);
		if (!drain_missed || !__sync_lock_test_and_set(&drain_missed, 0))
			return true;
		__sync_fetch_and_add(&nr_drain_again, 1);
		flagged = false;
	}
	/* Out of tries with a missed drain taken but not made: give it back. */
	if (!flagged)
		__sync_lock_test_and_set(&drain_missed, 1);
	return false;
}

/*
 * scx_gmp: redrain - this CPU found nothing to run, and drain_dispatched()
 * could not make sure that no decision was left in the ring (@drained).
 * Kick this CPU, so that once it has switched to idle it dispatches again
 * and reads them, rather than leave them until something else wakes a CPU.
 * Owner only, at the end of dispatch().
 */
static void redrain(s32 cpu, bool drained)
{
	if (drained)
		return;
	__sync_fetch_and_add(&nr_redrain, 1);
	kick_cpu_flags(cpu, 0);
}

void BPF_STRUCT_OPS(rustland_dispatch, s32 cpu, struct task_struct *prev)
{
	bool drained;
	s32 own;

	reset_lock_streak(cpu);
	/*
	 * scx_gmp: sysmon's retake looks at the held CPUs on every schedule,
	 * whatever the queues hold. Called only once the shared DSQ was found
	 * empty, it once never marked a CPU held for 3 s (a CI run of the
	 * real-time hold test, under a CPU-bound load that kept that DSQ
	 * full): until marked, no other CPU takes from the held CPU's DSQ.
	 */
	if (nr_held)
		retake();

	drained = drain_dispatched();

	/* scx_gmp: a wakeup the agent's pass missed gets it another one. */
	if (agent_again(cpu, prev)) {
		scx_bpf_task_set_slice(prev, slice_ns);
		__sync_fetch_and_add(&nr_agent_again, 1);
		return;
	}

	/*
	 * scx_gmp: runnext first (proc.go runqget). A task woken since the
	 * agent last ran, which the agent has not seen yet, may be this CPU's
	 * runnext, and go ahead of the LRQ task committed to its DSQ (the
	 * agent's LRQ_VTIME_LAG): so when its ring holds new tasks, the agent
	 * runs before that DSQ. Without this, a task woken beside CPU hogs
	 * waited a whole slice behind one for the agent (README, "Beside a
	 * SCHED_IDLE batch job"). Never twice in a row, so that the agent's
	 * backlog cannot starve this DSQ (see below).
	 */
	if (!(prev && is_usersched_task(prev)) &&
	    bpf_ringbuf_query(&queued, BPF_RB_AVAIL_DATA) > 0 &&
	    scx_bpf_dsq_move_to_local(SCHED_DSQ, 0)) {
		__sync_fetch_and_add(&nr_agent_first, 1);
		return;
	}

	/*
	 * Consume a task from the per-CPU DSQ.
	 *
	 * scx_gmp: before the user-space scheduler, not after it. The agent
	 * keeps a backlog in its model, so it always has pending work, and
	 * ahead of this CPU's DSQ it kept the tasks there waiting as long as
	 * the backlog lasted: a kernel thread run in place (RCU's grace-period
	 * kthread among them) starved behind it on its CPU, and RCU stalled.
	 * The agent runs when a CPU has nothing queued, which is when it has
	 * something to hand that CPU.
	 */
	if (scx_bpf_dsq_move_to_local(cpu_to_dsq(cpu), 0)) {
		count_take(cpu);
		return;
	}
	own = scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu));
	if (own > 0) {
		bool ran = release_own_dsq(cpu);

		/*
		 * A CPU that gives up its DSQ's tasks serves that DSQ: it is
		 * not stuck (find_stuck()). The agent goes on sending it tasks
		 * while the kernel waits for the grace period; a wait that
		 * spans two of the timer's looks would count it stuck though
		 * it gave every task up (one CI run counted 1 stuck CPU beside
		 * 44 released tasks).
		 */
		if (scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu)) < own)
			count_take(cpu);
		if (ran)
			return;
	}

	/*
	 * Consume a task from the shared DSQ.
	 *
	 * scx_gmp: also before the user-space scheduler. What waits there was
	 * decided already (by the agent, or by this layer for a kernel thread
	 * or a held CPU), and the agent always has work while its model holds
	 * a backlog. When real-time tasks hold every CPU, sched_ext runs only
	 * within the deadline server's share, and with the agent first, the
	 * kernel's watchdog (an unbound kworker, which waits here while CPUs
	 * are held) once did not run for 30 s.
	 */
	if (scx_bpf_dsq_move_to_local(SHARED_DSQ, 0))
		return;

	/*
	 * scx_gmp: tasks left in the DSQ of a CPU that went offline, or that
	 * a real-time task holds, run on the CPUs that look for work (each
	 * takes one it may run).
	 */
	if ((nr_left || nr_held || nr_stuck) && consume_stranded(false))
		return;

	/*
	 * scx_gmp: the deadline server is picking on a held CPU (served()):
	 * it must not come back empty while anything could run here, or the
	 * kernel stops the server for good (README, "When things go wrong").
	 * So take a task from any CPU's DSQ, then the agent even with nothing
	 * pending (it finds nothing and yields, within the server's share),
	 * then the task that ran here, then one waiting for the agent. A pick
	 * outside the server means the CPU is back (exitsyscall).
	 */
	if (served()) {
		if (consume_stranded(true) ||
		    scx_bpf_dsq_move_to_local(SCHED_DSQ, 0))
			return;
		if (prev && is_queued(prev)) {
			forget_kick(cpu);
			scx_bpf_task_set_slice(prev, idle_slice(prev, slice_ns, idle_slice_ns));
			return;
		}
		if (rescue_custody(cpu))
			return;
	} else if (is_held(cpu)) {
		exitsyscall(cpu);
	}

	/*
	 * Dispatch the user-space scheduler if there's any pending action
	 * to do.
	 */
	if (usersched_has_pending_tasks() &&
	    scx_bpf_dsq_move_to_local(SCHED_DSQ, 0))
		return;

	/*
	 * If the current task expired its time slice and no other task
	 * wants to run, simply replenish its time slice and let it run for
	 * another round on the same CPU.
	 *
	 * In case of the user-space scheduler task, replenish its time
	 * slice only if there're still pending scheduling actions to do.
	 */
	if (prev && is_queued(prev) &&
	    (!is_usersched_task(prev) || usersched_has_pending_tasks())) {
		forget_kick(cpu);
		scx_bpf_task_set_slice(prev, idle_slice(prev, slice_ns, idle_slice_ns));
		return;
	}

	/* scx_gmp: about to idle: a task committed to a busy CPU runs here. */
	if (!steal_committed(cpu))
		redrain(cpu, drained);
}

void BPF_STRUCT_OPS(rustland_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx;

	if (is_usersched_task(p))
		return;

	tctx = try_lookup_task_ctx(p);
	if (!tctx)
		return;

	tctx->exec_runtime = 0;
}

/*
 * scx_gmp: run_started - @p starts on @cpu at @start (cur_pid). A task that
 * comes back from a kick_agent() preemption with nothing but the agent run
 * in between (restore_kicked()) keeps its first start: to the agent its run
 * went on (rustland_stopping() ends no run for it), and so it does to
 * cross_preempts(), as in BPF mode, where no agent preempts it. With a new
 * start at each return, a CPU hog that the agent's passes kept preempting
 * looked fresh: in a 2-vCPU trace of cyclictest beside CPU hogs, 71 of 249
 * timer wakeups that waited over 10 ms had their decision reach a hog that
 * had run under 250 us since it last started, and waited for its slice.
 * Owner only.
 */
static void run_started(const struct task_struct *p, s32 cpu, u64 start)
{
	struct kicked *k = kick_entry(cpu);
	u32 i = cpu;

	if (i >= MAX_CPUS || !k)
		return;
	if (k->resumed != p->pid || cur_pid[i] != p->pid)
		cur_start[i] = start;
	k->resumed = 0;
	__sync_lock_test_and_set(&cur_pid[i], p->pid);
}

/* scx_gmp: @p's run on @cpu from @start ended (run_ring). Owner only. */
static void run_ended(const struct task_struct *p, s32 cpu, u64 start)
{
	u32 i = cpu;
	u64 n;

	if (i >= MAX_CPUS)
		return;
	cur_pid[i] = 0;
	n = run_ends[i];
	run_ring[i][n & (RUN_RING - 1)].pid = p->pid;
	run_ring[i][n & (RUN_RING - 1)].start = start;
	__sync_fetch_and_add(&run_ends[i], 1);
}

/*
 * Task @p starts on its selected CPU (update CPU ownership map).
 */
void BPF_STRUCT_OPS(rustland_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct task_ctx *tctx;
	u64 slice;

	if (is_usersched_task(p)) {
		usersched_last_run_at = scx_bpf_now();
		agent_cpu = cpu;
		return;
	}

	dbg_msg("start: pid=%d (%s) cpu=%ld", p->pid, p->comm, cpu);

	/* scx_gmp: a SCHED_IDLE task runs a short slice (idle_slice()). */
	slice = idle_slice(p, p->scx.slice, idle_slice_ns);
	if (slice != p->scx.slice)
		scx_bpf_task_set_slice(p, slice);

	/*
	 * Mark the CPU as busy by setting the pid as owner (ignoring the
	 * user-space scheduler).
	 */
	__sync_fetch_and_add(&nr_running, 1);

	/*
	 * scx_gmp: a kick_agent() of this CPU is done with by now: the task
	 * it preempted went back (restore_kicked()), or it blocked, or the
	 * kick came after it stopped anyway.
	 */
	forget_kick(cpu);

	tctx = try_lookup_task_ctx(p);
	if (!tctx)
		return;
	tctx->start_ts = scx_bpf_now();
	behind_on_return(p, cpu);
	run_started(p, cpu, tctx->start_ts);
}

/*
 * Task @p stops running on its associated CPU (update CPU ownership map).
 */
void BPF_STRUCT_OPS(rustland_stopping, struct task_struct *p, bool runnable)
{
	u64 now = scx_bpf_now();
	s32 cpu = scx_bpf_task_cpu(p);
	struct task_ctx *tctx;

	if (is_usersched_task(p)) {
		agent_cpu = -1;
		if (runnable && agent_in_pass)
			__sync_fetch_and_add(&nr_agent_cut, 1);
		return;
	}

	dbg_msg("stop: pid=%d (%s) cpu=%ld", p->pid, p->comm, cpu);

	__sync_fetch_and_sub(&nr_running, 1);

	tctx = try_lookup_task_ctx(p);
	if (!tctx)
		return;
	tctx->stop_ts = now;
	/*
	 * scx_gmp: preempted by kick_agent(), it runs on after the agent's
	 * pass: to the agent, its run goes on.
	 */
	if (!(runnable && !p->scx.slice && was_kicked(p, cpu)))
		run_ended(p, cpu, tctx->start_ts);

	/*
	 * Update the partial execution time since last sleep.
	 */
	tctx->exec_runtime += now - tctx->start_ts;
}

/*
 * A task joins the sched_ext scheduler.
 */
void BPF_STRUCT_OPS(rustland_enable, struct task_struct *p)
{
	scx_bpf_task_set_dsq_vtime(p, 0);
	scx_bpf_task_set_slice(p, slice_ns);
}

/*
 * scx_gmp: for each CPU that went offline with tasks left in its DSQ, wake
 * an idle CPU to take them (consume_stranded() runs only when a CPU looks
 * for work). An insert that checked is_offline() just before cpu_offline()
 * ran lands there after it, with nobody looking. From cpu_offline(), and
 * once a second from the timer. Any CPU.
 */
static void kick_stranded(void)
{
	const struct cpumask *online;
	u32 cpu;
	s32 idle;

	if (!nr_left || this_cpu_dying())
		return;
	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu >= MAX_CPUS || !cpu_left[cpu] ||
		    !scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu)))
			continue;
		online = scx_bpf_get_online_cpumask();
		idle = scx_bpf_pick_idle_cpu(online, 0);
		scx_bpf_put_cpumask(online);
		if (idle >= 0)
			kick_cpu(idle);
	}
}

/*
 * scx_gmp: whether a CPU that went offline, or one that is stuck (see
 * @cpu_stuck), still has tasks in its DSQ: tasks any CPU may take
 * (consume_stranded()). Any CPU.
 */
static bool stranded_work(void)
{
	u32 cpu;

	if (!nr_left && !nr_stuck)
		return false;
	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu < MAX_CPUS && (cpu_left[cpu] || cpu_stuck[cpu]) &&
		    scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu)) > 0)
			return true;
	}
	return false;
}

/*
 * scx_gmp: find the stuck CPUs (see @cpu_stuck), and the ones no longer
 * stuck. Timer only.
 */
static void find_stuck(void)
{
	u32 cpu;

	bpf_for(cpu, 0, nr_cpu_ids) {
		u64 takes;
		u32 hotplugs;
		s32 nr;
		bool queued, waiting;

		if (cpu >= MAX_CPUS)
			break;
		takes = dsq_takes[cpu];
		hotplugs = cpu_hotplugs[cpu];
		/* One read: the count reported is the one judged. */
		nr = scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu));
		queued = nr > 0;
		waiting = queued && queued_seen[cpu] &&
			  takes == dsq_takes_seen[cpu] && !cpu_offline[cpu] &&
			  hotplugs == hotplugs_seen[cpu];
		dsq_takes_seen[cpu] = takes;
		hotplugs_seen[cpu] = hotplugs;
		queued_seen[cpu] = queued;
		if (waiting && !cpu_stuck[cpu]) {
			cpu_stuck[cpu] = 1;
			__sync_fetch_and_add(&nr_stuck, 1);
			__sync_fetch_and_add(&nr_stuck_events, 1);
			stuck_cpu = cpu;
			stuck_queued = nr;
			stuck_pid = cur_pid[cpu];
			stuck_ran_ns = cur_pid[cpu] ? time_delta(scx_bpf_now(), cur_start[cpu]) : 0;
			stuck_held = cpu_held[cpu];
			stuck_at = bpf_ktime_get_ns();
		} else if (!waiting && cpu_stuck[cpu]) {
			cpu_stuck[cpu] = 0;
			__sync_fetch_and_sub(&nr_stuck, 1);
		}
	}
}

/*
 * scx_gmp: the timer's backstop against an idle CPU beside queued work.
 * Wake each online CPU that idles while its own DSQ holds tasks, and every
 * idle online CPU while tasks wait where any CPU may take them (the shared
 * DSQ, the agent's, a DSQ that hotplug stranded). Every other wakeup here
 * claims an idle CPU's bit (scx_bpf_pick_idle_cpu()) and then kicks it; if
 * that kick is lost, the CPU idles with its bit clear, no pick finds it
 * again, and its DSQ waits for good: CPU hotplug under load stranded tasks
 * in a CPU's DSQ for 21 s until RCU stalled (README, "Hotplug"). A kick
 * with SCX_KICK_IDLE looks at what the CPU runs, not at its bit, and does
 * nothing to a busy one. Timer only, once a second.
 */
static void kick_idle_beside_work(void)
{
	const struct cpumask *online;
	bool any;
	u32 cpu;

	if (this_cpu_dying())
		return;
	any = scx_bpf_dsq_nr_queued(SHARED_DSQ) > 0 ||
	      scx_bpf_dsq_nr_queued(SCHED_DSQ) > 0 || stranded_work();
	online = scx_bpf_get_online_cpumask();
	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu >= MAX_CPUS)
			break;
		if (!bpf_cpumask_test_cpu(cpu, online) || cpu_offline[cpu])
			continue;
		if (any || scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu)) > 0)
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
	scx_bpf_put_cpumask(online);
}

/*
 * Heartbeat scheduler timer callback.
 *
 * If the system is completely idle the sched-ext watchdog may incorrectly
 * detect that as a stall and automatically disable the scheduler. So, use this
 * timer to periodically wake-up the scheduler and avoid long inactivity.
 *
 * This can also help to prevent real "stalling" conditions in the scheduler.
 */
static int usersched_timer_fn(void *map, int *key, struct bpf_timer *timer)
{
	struct task_struct *p;
	int err = 0;

	/*
	 * Trigger the user-space scheduler if it has been inactive for
	 * more than USERSCHED_TIMER_NS.
	 */
	if (time_delta(scx_bpf_now(), usersched_last_run_at) >= USERSCHED_TIMER_NS) {
		p = bpf_task_from_pid(usersched_pid);
		if (p) {
			set_usersched_needed();
			kick_cpu(scx_bpf_task_cpu(p));
			bpf_task_release(p);
		}
	}

	kick_stranded();
	find_stuck();
	kick_idle_beside_work();

	/* Re-arm the timer */
	err = bpf_timer_start(timer, USERSCHED_TIMER_NS, 0);
	if (err)
		scx_bpf_error("Failed to arm stats timer");

	return 0;
}

/*
 * Initialize the heartbeat scheduler timer.
 */
static int usersched_timer_init(void)
{
	struct bpf_timer *timer;
	u32 key = 0;
	int err;

	timer = bpf_map_lookup_elem(&usersched_timer, &key);
	if (!timer) {
		scx_bpf_error("Failed to lookup scheduler timer");
		return -ESRCH;
	}
	bpf_timer_init(timer, &usersched_timer, CLOCK_BOOTTIME);
	bpf_timer_set_callback(timer, usersched_timer_fn);
	err = bpf_timer_start(timer, USERSCHED_TIMER_NS, 0);
	if (err)
		scx_bpf_error("Failed to arm scheduler timer");

	return err;
}

/*
 * Evaluate the amount of online CPUs.
 */
static s32 get_nr_online_cpus(void)
{
	const struct cpumask *online_cpumask;
	s32 cpus = 0;

	online_cpumask = scx_bpf_get_online_cpumask();
	cpus = bpf_cpumask_weight(online_cpumask);
	scx_bpf_put_cpumask(online_cpumask);

	return cpus;
}

/*
 * Create a DSQ for each CPU available in the system and a global shared DSQ.
 *
 * All the tasks processed by the user-space scheduler can be dispatched either
 * to a specific CPU/DSQ or to the first CPU available (SHARED_DSQ).
 *
 * Custom DSQs are then consumed from the .dispatch() callback, that will
 * transfer all the enqueued tasks to the consuming CPU's local DSQ.
 */
static int dsq_init(void)
{
	int err;
	s32 cpu;

	/* Initialize amount of online CPUs */
	nr_online_cpus = get_nr_online_cpus();

	/* Create per-CPU DSQs */
	bpf_for(cpu, 0, nr_cpu_ids) {
		err = scx_bpf_create_dsq(cpu_to_dsq(cpu), -1);
		if (err) {
			scx_bpf_error("failed to create pcpu DSQ %d: %d",
				      cpu, err);
			return err;
		}
	}

	/* Create the global shared DSQ */
	err = scx_bpf_create_dsq(SHARED_DSQ, -1);
	if (err) {
		scx_bpf_error("failed to create shared DSQ: %d", err);
		return err;
	}

	/* Create the scheduler's DSQ */
	err = scx_bpf_create_dsq(SCHED_DSQ, -1);
	if (err) {
		scx_bpf_error("failed to create scheduler DSQ: %d", err);
		return err;
	}

	return 0;
}

/*
 * A new task @p is being created.
 *
 * Allocate and initialize all the internal structures for the task (this
 * function is allowed to block, so it can be used to preallocate memory).
 */
s32 BPF_STRUCT_OPS(rustland_init_task, struct task_struct *p,
		   struct scx_init_task_args *args)
{
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctx_stor, p, 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;

	return 0;
}

/*
 * scx_gmp: @cpu came online or went offline; record it for the agent.
 */
static void set_offline(s32 cpu, bool offline)
{
	u32 i = cpu;

	if (i >= MAX_CPUS || cpu_offline[i] == offline)
		return;
	cpu_offline[i] = offline;
	__sync_fetch_and_add(&cpu_hotplugs[i], 1);
	__sync_fetch_and_add(&nr_hotplug, 1);
	if (offline) {
		cpu_left[i] = 1;
		__sync_fetch_and_add(&nr_left, 1);
	} else if (cpu_left[i]) {
		cpu_left[i] = 0;
		__sync_fetch_and_sub(&nr_left, 1);
	}
}

/*
 * scx_gmp: entersyscall - a real-time or deadline task took @cpu (not a
 * stop-class migration, which gives it back at once). The tasks in its
 * local DSQ, the one it preempted at their head, come back through
 * rustland_enqueue() (SCX_ENQ_REENQ): to the agent, or, kernel threads, to
 * a CPU that is not held. Owner only.
 */
void BPF_STRUCT_OPS(rustland_cpu_release, s32 cpu,
		    struct scx_cpu_release_args *args)
{
	u32 i = cpu;

	if (i >= MAX_CPUS || args->reason == SCX_CPU_PREEMPT_STOP)
		return;
	if (!cpu_held[i]) {
		held_at[i] = scx_bpf_now();
		cpu_held[i] = 1;
		__sync_fetch_and_add(&nr_held, 1);
	}
	__sync_fetch_and_add(&nr_syscall, 1);
	scx_bpf_reenqueue_local();
}

/*
 * scx_gmp: sched_ext may pick on @cpu again: the CPU is back, unless the
 * deadline server is picking (served()): the real-time task still holds it
 * then. Owner only.
 */
void BPF_STRUCT_OPS(rustland_cpu_acquire, s32 cpu,
		    struct scx_cpu_acquire_args *args)
{
	if (!served())
		exitsyscall(cpu);
}

void BPF_STRUCT_OPS(rustland_cpu_online, s32 cpu)
{
	set_offline(cpu, false);
}

void BPF_STRUCT_OPS(rustland_cpu_offline, s32 cpu)
{
	set_offline(cpu, true);
	kick_stranded();
}

/*
 * scx_gmp: the CPUs offline at load.
 */
static void init_offline(void)
{
	const struct cpumask *online = scx_bpf_get_online_cpumask();
	u32 cpu;

	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu < MAX_CPUS && !bpf_cpumask_test_cpu(cpu, online)) {
			cpu_offline[cpu] = 1;
			cpu_offline_at_load[cpu] = 1;
		}
	}
	scx_bpf_put_cpumask(online);
}

/*
 * Initialize the scheduling class.
 */
s32 BPF_STRUCT_OPS_SLEEPABLE(rustland_init)
{
	int err;

	/* Compile-time checks */
	BUILD_BUG_ON((MAX_CPUS % 2));

	/* Initialize maximum possible CPU number */
	nr_cpu_ids = scx_bpf_nr_cpu_ids();

	init_offline();

	/* Initialize rustland core */
	err = dsq_init();
	if (err)
		return err;
	err = usersched_timer_init();
	if (err)
		return err;

	/* scx_gmp: the timers of preempt_later(). */
	return init_cpu_timers(&preempt_timers, preempt_timer_fn,
			       cross_preempt_ns ? nr_cpu_ids : 0);
}

/*
 * Unregister the scheduling class.
 */
void BPF_STRUCT_OPS(rustland_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

/*
 * scx_gmp: this layer's part of sched_ext's dump when the scheduler exits
 * on an error: hotplug, held CPUs, and each CPU's DSQ and idle bit.
 */
void BPF_STRUCT_OPS(rustland_dump, struct scx_dump_ctx *dctx)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	u32 cpu;

	scx_bpf_dump("gmp: hotplug=%llu left=%llu held=%llu stuck=%llu/%llu released=%llu shared_dsq=%d agent_dsq=%d\n",
		     nr_hotplug, nr_left, nr_held, nr_stuck, nr_stuck_events,
		     nr_released,
		     scx_bpf_dsq_nr_queued(SHARED_DSQ),
		     scx_bpf_dsq_nr_queued(SCHED_DSQ));
	bpf_for(cpu, 0, nr_cpu_ids) {
		if (cpu >= MAX_CPUS)
			break;
		scx_bpf_dump("gmp: cpu%u off=%d left=%d held=%d stuck=%d dsq=%d takes=%llu idle=%d\n",
			     cpu, cpu_offline[cpu], cpu_left[cpu], cpu_held[cpu],
			     cpu_stuck[cpu],
			     scx_bpf_dsq_nr_queued(cpu_to_dsq(cpu)),
			     dsq_takes[cpu],
			     bpf_cpumask_test_cpu(cpu, idle));
	}
	scx_bpf_put_idle_cpumask(idle);
}

/*
 * Scheduling class declaration.
 */
SCX_OPS_DEFINE(rustland,
	       .select_cpu		= (void *)rustland_select_cpu,
	       .enqueue			= (void *)rustland_enqueue,
	       .dispatch		= (void *)rustland_dispatch,
	       .runnable		= (void *)rustland_runnable,
	       .running			= (void *)rustland_running,
	       .stopping		= (void *)rustland_stopping,
	       .enable			= (void *)rustland_enable,
	       .init_task		= (void *)rustland_init_task,
	       .cpu_release		= (void *)rustland_cpu_release,
	       .cpu_acquire		= (void *)rustland_cpu_acquire,
	       .cpu_online		= (void *)rustland_cpu_online,
	       .cpu_offline		= (void *)rustland_cpu_offline,
	       .init			= (void *)rustland_init,
	       .exit			= (void *)rustland_exit,
	       .dump			= (void *)rustland_dump,
	       .timeout_ms		= 5000,
	       .dispatch_max_batch	= MAX_DISPATCH_SLOT,
	       .name			= "rustland");
