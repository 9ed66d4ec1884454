//! `scx_gmp-user` (`scx_gmp --mode user`): the Go policy applied in user
//! space. scx_rustland_core's BPF layer hands every task that becomes
//! runnable to this agent; the pure model (`scx_gmp::model`) queues it by
//! Go's rules and picks, for each CPU, the next task and its slice; the BPF
//! layer runs it there. Stealing and the 61-tick check happen in the model,
//! so each CPU's kernel queue is kept to about two tasks.
//!
//! It is a crate of its own because scx_rustland_core installs a global
//! allocator (a locked 64 MiB arena), its own SIGINT/SIGTERM handler and a
//! seccomp filter, which the BPF mode and the simulator must not run under.
//! `src/bpf.rs` and `bpf/` are a copy of scx_rustland_core's BPF connector
//! and BPF layer; the layer is changed to take CPU hotplug in place and to
//! run every kernel thread itself (they are the runtime, not goroutines:
//! Go's sysmon runs without a P), so only user threads reach the model.
//!
//! The agent schedules every task, so it must never sleep on a lock that a
//! task it has not run yet may hold: that task would wait for the agent and
//! the agent for it, until the kernel ejects the scheduler (an RCU stall).
//! Reading another task's /proc files can do that on Linux 7.3: `stat`
//! takes the target's exec lock (held by a task preempted in execve), and
//! `status` may drop the last reference to an exiting task's memory and
//! free it under a lock shared with its forked relatives. So once loaded it
//! reads none, nor sysfs: it asks the BPF layer's task storage, and
//! `kill(tid, 0)`.

#[allow(clippy::all)]
#[rustfmt::skip]
mod bpf;
mod bpf_intf;
mod bpf_skel;

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use scx_stats::prelude::*;
use scx_utils::UserExitInfo;

use bpf::{BpfScheduler, DispatchedTask, QueuedTask, RL_CPU_ANY};
use bpf_intf::LRQ_VTIME_LAG;
use scx_gmp::bpf_intf::gmp_consts_GMP_TIMEOUT_MS as GMP_TIMEOUT_MS;
use scx_gmp::cli::{timed_not_go, version, AgentOpts, PolicyOpts, RESTART_EXIT};
use scx_gmp::load::{check_interval, exit_code, init_log, preflight};
use scx_gmp::model::{us_to_ns, Affinity, Params, Sched, G};
use scx_gmp::stats::{server_data, Metrics};

/// scx_gmp-user: the Go runtime's G-M-P policy applied from user space.
///
/// The pure model (the same code `scx_gmp sim` runs) makes every decision in
/// this process; scx_rustland_core's BPF layer carries them out. Run it as
/// `scx_gmp --mode user`, which supervises it. Requires root and a kernel
/// with sched_ext.
#[derive(Debug, Parser)]
#[command(name = "scx_gmp-user", version = version(), about, long_about)]
struct Opts {
    #[command(flatten)]
    policy: PolicyOpts,

    #[command(flatten)]
    agent: AgentOpts,
}

/// How long decisions go through rustland's shared DSQ after it had to take
/// tasks this agent could not receive (see `Agent::dispatch`).
const SHARED_AFTER_CONGESTION_NS: u64 = 100_000_000;

/// Task ids the agent checks for exited threads in one batch (see
/// `Agent::prune`).
const PRUNE_BATCH: usize = 8;

/// While tasks wait in the model, one prune batch at most this often (ns):
/// each id costs a system call (a /proc read once, which under load took 60%
/// of the agent's time when it ran on every pass).
const PRUNE_EVERY_NS: u64 = 20_000_000;

/// With no task waiting, one prune batch at most this often (ns). On every
/// pass, its 8 kill() calls were a fifth of the agent's time on a ping-pong
/// beside CPU hogs, where each hand-off waits for a pass (perf, 2 vCPUs).
const PRUNE_IDLE_EVERY_NS: u64 = 1_000_000;

/// Tasks dispatched to one CPU and not yet accounted for, at most: the one
/// it runs and the one it runs next. With one, a CPU idled from its task's
/// end until the agent's next pass; with two it goes straight on, and the
/// agent has a task's length to refill it (a 2,000-thread fan-out of 1 ms
/// tasks: 19.5 s with one, 16.2 s with two, in one 4-vCPU boot). The
/// second, committed to the CPU's kernel queue, can no longer be stolen
/// (README, "Where Linux differs from Go").
const MAX_INFLIGHT: usize = 2;

/// The vtime of the `seq`-th decision: a runnext task's (`ahead`) orders
/// before every LRQ task's sent less than LRQ_VTIME_LAG (user/bpf/intf.h)
/// decisions earlier.
fn dispatch_vtime(seq: u64, ahead: bool) -> u64 {
    match ahead {
        true => seq,
        false => seq + LRQ_VTIME_LAG,
    }
}

/// A CPU's in-flight head is done: the task behind it starts its slice now
/// (timed from its dispatch, it would be dropped at once after waiting a
/// slice behind a long runner, and the CPU handed a third task: a CPU-bound
/// load then piled up on one CPU).
fn finish_head(q: &mut VecDeque<(G, u64)>, now: u64) {
    q.pop_front();
    if let Some(next) = q.front_mut() {
        next.1 = now;
    }
}

/// What rustland's BPF layer last recorded of a task (its `task_ctx`
/// storage): when it last started and last stopped running (ns).
fn run_times(bpf: &BpfScheduler, tid: i32) -> Option<(u64, u64)> {
    // PIDFD_THREAD (O_EXCL): a pidfd for any thread, not only a leader.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, libc::O_EXCL) } as i32;
    if fd < 0 {
        return None;
    }
    let value = bpf
        .skel
        .maps
        .task_ctx_stor
        .lookup(&fd.to_ne_bytes(), MapFlags::ANY);
    unsafe { libc::close(fd) };
    let value = value.ok()??;
    let u64_at = |i: usize| Some(u64::from_ne_bytes(value.get(i..i + 8)?.try_into().ok()?));
    Some((u64_at(0)?, u64_at(8)?))
}

/// Whether `task`, dispatched from this enqueue, has started since, and
/// whether it has also stopped without coming back to the agent: it blocked
/// or exited. rustland does not report blocking, so this is how a CPU whose
/// task went to sleep gets its next one at once. It reads the BPF layer's
/// own record, never /proc: the agent must never sleep on a lock that a
/// task it has not run yet may hold, and reading another task's /proc files
/// can (see README, "Two modes").
///
/// Mostly without a system call: from the BPF layer's record of each CPU's
/// current run and its last RUN_RING ended runs (`runs`). Only when those
/// may have lost the task's run (more than RUN_RING runs ended since it was
/// dispatched, counting every CPU: `since`) is its own record read.
fn run_state(bpf: &BpfScheduler, runs: &Runs, task: &QueuedTask, since: u64) -> (bool, bool) {
    if let Some(state) = runs.state(task.pid, task.start_ts, since) {
        return state;
    }
    match run_times(bpf, task.pid) {
        Some((start, stop)) => {
            let started = start > task.start_ts;
            (started, started && stop >= start)
        }
        None => (true, true), // gone
    }
}

/// A snapshot of the runs the BPF layer recorded (user/bpf: run_ring),
/// taken once per pass into the same buffers.
#[derive(Default)]
struct Runs {
    /// Per CPU: the pid running now and when it started.
    current: Vec<(u32, u64)>,
    /// The last ended runs of every CPU: pid and start.
    ended: Vec<(u32, u64)>,
    /// Runs ended on every CPU so far, and the records kept per CPU.
    total: u64,
    ring: usize,
}

impl Runs {
    fn read(&mut self, bpf: &BpfScheduler, nr_cpus: usize) {
        let bss = bpf.bss();
        let ring = bss.run_ring[0].len();
        self.current.clear();
        self.ended.clear();
        self.total = 0;
        self.ring = ring;
        // Each value read once (`read_once`). A record read while its CPU
        // rewrites it can be torn; the worst that does is one wrong answer
        // for one pass (see `run_state`).
        for c in 0..nr_cpus {
            let n = read_once(&bss.run_ends[c]);
            self.total += n;
            let pid = read_once(&bss.cur_pid[c]);
            let start = read_once(&bss.cur_start[c]);
            self.current.push((pid, start));
            for r in bss.run_ring[c].iter().take(n.min(ring as u64) as usize) {
                let pid = read_once(&r.pid);
                let start = read_once(&r.start);
                self.ended.push((pid, start));
            }
        }
    }

    /// The start of `pid`'s latest recorded ended run.
    fn ended(&self, pid: i32) -> Option<u64> {
        self.ended
            .iter()
            .filter(|&&(p, _)| p as i32 == pid)
            .map(|&(_, start)| start)
            .max()
    }

    /// When `pid` started, if it runs now.
    fn current(&self, pid: i32) -> Option<u64> {
        self.current
            .iter()
            .find(|&&(p, _)| p as i32 == pid && p != 0)
            .map(|&(_, start)| start)
    }

    /// `run_state` of `pid`, last started at `start_ts` before it was
    /// dispatched when `since` runs had ended; None if the records may have
    /// lost its run.
    fn state(&self, pid: i32, start_ts: u64, since: u64) -> Option<(bool, bool)> {
        let after = |start: u64| start > start_ts;
        if self.ended(pid).is_some_and(after) {
            return Some((true, true));
        }
        if self.current(pid).is_some_and(after) {
            return Some((true, false));
        }
        match self.total.saturating_sub(since) < self.ring as u64 {
            true => Some((false, false)),
            false => None,
        }
    }
}

/// The backstop's stuck CPUs for the agent's last line: how many times one
/// got stuck, and what the last one was doing then (user/bpf: `stuck_cpu`).
fn stuck_cpus(bpf: &BpfScheduler) -> String {
    let bss = bpf.bss();
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the kernel to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let now_ns = now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64;
    Stuck {
        n: read_once(&bss.nr_stuck_events),
        cpu: read_once(&bss.stuck_cpu),
        queued: read_once(&bss.stuck_queued),
        pid: read_once(&bss.stuck_pid),
        held: read_once(&bss.stuck_held) != 0,
        ran_ns: read_once(&bss.stuck_ran_ns),
        ago_ns: now_ns.saturating_sub(read_once(&bss.stuck_at)),
    }
    .to_string()
}

/// What the backstop recorded of the last stuck CPU (see `stuck_cpus`).
struct Stuck {
    n: u64,
    cpu: i32,
    queued: u32,
    pid: u32,
    held: bool,
    ran_ns: u64,
    ago_ns: u64,
}

impl std::fmt::Display for Stuck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.n)?;
        if self.n == 0 {
            return Ok(());
        }
        write!(
            f,
            " (the last: CPU {}, {} tasks in its DSQ, {}running pid {} for {} ms, {:.1} s before this line)",
            self.cpu,
            self.queued,
            if self.held { "held by a higher class, " } else { "" },
            self.pid,
            self.ran_ns / 1_000_000,
            self.ago_ns as f64 / 1e9
        )
    }
}

/// The BPF layer's count of CPU hotplug events (user/bpf).
fn hotplug_count(bpf: &BpfScheduler) -> u64 {
    let bss = bpf.bss();
    read_once(&bss.nr_hotplug)
}

/// The BPF layer's count of hotplug events of each of the first `nr_cpus`
/// CPUs (user/bpf).
fn cpu_hotplugs(bpf: &BpfScheduler, nr_cpus: usize) -> Vec<u32> {
    let bss = bpf.bss();
    (0..nr_cpus)
        .map(|c| read_once(&bss.cpu_hotplugs[c]))
        .collect()
}

/// One read of a value in the BPF maps' memory, which the BPF layer changes
/// under us: never cached or merged with another read by the compiler.
fn read_once<T: Copy>(v: &T) -> T {
    // SAFETY: a reference is valid and aligned for a read of T.
    unsafe { std::ptr::read_volatile(v) }
}

/// The states a CPU that was offline (`off`) passes through in `n` hotplug
/// events, in order: all of them, or, for many, the last two or three (a
/// CPU that went and came back twice needs its queues moved once).
fn hotplug_steps(off: bool, n: u32) -> impl Iterator<Item = bool> {
    let steps = if n > 3 { 2 + n % 2 } else { n };
    (1..=steps).map(move |k| off ^ (k % 2 == 1))
}

/// Which of the first `nr_cpus` CPUs were offline when the BPF layer was
/// loaded (user/bpf): the state its hotplug counts start from.
fn offline_at_load(bpf: &BpfScheduler, nr_cpus: usize) -> Vec<bool> {
    let bss = bpf.bss();
    (0..nr_cpus)
        .map(|c| bss.cpu_offline_at_load[c] != 0)
        .collect()
}

/// Whether thread `tid` still exists. A signal 0 reads no /proc file and
/// takes no lock a task the agent schedules could hold.
fn alive(tid: i32) -> bool {
    let sent = unsafe { libc::kill(tid, 0) } == 0;
    sent || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The CPUs thread `tid` may run on, of the first `nr_cpus` (All if it is
/// gone).
fn cpu_affinity(tid: i32, nr_cpus: usize) -> Affinity {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if unsafe { libc::sched_getaffinity(tid, size, &mut set) } != 0 {
        return Affinity::All;
    }
    let cpus: Vec<usize> = (0..nr_cpus)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    match cpus.len() {
        0 => Affinity::All,
        _ => Affinity::only(&cpus),
    }
}

/// What the agent knows of a task.
struct Slot {
    /// The latest enqueue of the task (its `enq_cnt` must match to dispatch).
    task: QueuedTask,
    /// In the model's queues now.
    queued: bool,
    /// Names a live thread (false: its task id was given back).
    live: bool,
    /// When it was last handed to the agent, and last dispatched (ns, 0:
    /// never), and where: what a stall report says of it.
    enqueued_at: u64,
    dispatched_at: u64,
    dispatched_to: i32,
    /// `Runs::total` when it was last dispatched.
    dispatched_runs: u64,
}

struct Agent<'a> {
    bpf: BpfScheduler<'a>,
    sched: Sched,
    nr_cpus: usize,
    slice_ns: u64,
    pids: HashMap<i32, G>,
    slots: Vec<Slot>,
    /// Per CPU: tasks dispatched there, with when.
    inflight: Vec<VecDeque<(G, u64)>>,
    /// vtime of the next dispatch: the rustland DSQs are priority queues,
    /// so an increasing vtime keeps each CPU's queue FIFO.
    seq: u64,
    /// Dispatches the BPF layer's ring had no room for, oldest first: sent
    /// again before anything else, never dropped.
    unsent: VecDeque<DispatchedTask>,
    /// Times the ring was full and a dispatch had to wait (dropped before).
    deferred: u64,
    /// rustland's count of tasks it could not hand to this agent, last seen.
    congested: u64,
    /// Until then (ns), decisions go through rustland's shared DSQ.
    shared_until: u64,
    /// `--debug-stall-comm`, NUL-padded (all 0: off).
    stall_comm: [u8; 16],
    /// The task id `prune` looked at last, and when its next batch is due.
    prune_at: usize,
    prune_next: u64,
    /// `--stats` lines skipped because stdout could block.
    stats_skipped: u64,
    epoch: Instant,
    per_cpu: Vec<u64>,
    /// Per CPU: offline, as the model knows it; the BPF layer's count of
    /// CPU hotplug events, and of each CPU's, last seen (see `resize`).
    offline: Vec<bool>,
    hotplugs: u64,
    cpu_hotplugs: Vec<u32>,
    /// CPUs that went offline or came online.
    procresize: u64,
    /// The BPF layer's run records, read on each pass (see `dispatch`).
    runs: Runs,
}

impl<'a> Agent<'a> {
    fn init(
        params: Params,
        policy: &PolicyOpts,
        agent: &AgentOpts,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        let nr_cpus = params.nprocs;
        let slice_ns = params.slice_ns;
        // The fast paths skip the agent, so with --debug-stall-comm (a task the
        // agent must never run) every wakeup goes through it.
        let all_through_agent = agent.debug_stall_comm.is_some();
        let sync_handoff = !policy.go_handoff && !all_through_agent;
        let idle_wakeups = !policy.go_ready && !all_through_agent;
        let agent_kick = !policy.lazy_agent;
        let idle_slice_ns = us_to_ns(policy.idle_slice_us);
        let cross_preempt_ns = us_to_ns(policy.cross_process_preempt_us);
        let bpf = BpfScheduler::init(
            open_object,
            None,
            agent.exit_dump_len,
            false,                   // partial: schedule every task
            agent.verbose,           // debug
            idle_wakeups,            // builtin_idle: a wakeup that finds an idle CPU runs there
            false,                   // numa_local
            slice_ns,      // slice of tasks the BPF layer places itself (per-CPU kthreads)
            idle_slice_ns, // a SCHED_IDLE task's longest slice (0: slice_ns)
            sync_handoff,  // a sync wakeup runs next on the waker's CPU, as runnext does
            agent.lock_streak_max(), // lock hand-offs per CPU between two dispatch() calls
            agent_kick,    // a wakeup for the agent preempts its CPU's task for the agent
            cross_preempt_ns, // a wakeup goes ahead of another process's task that ran this long
            policy.steal_committed, // a CPU about to idle takes a task committed to a busy one
            "gmp_user",
        )?;
        // As the BPF mode's line: the options that are not Go's, when set.
        let not_go = timed_not_go(&[
            (policy.idle_slice_us, "SCHED_IDLE slice"),
            (
                policy.cross_process_preempt_us,
                "wakeup preemption across processes after",
            ),
        ]);
        log::info!(
            "scx_gmp-user {} scheduling {nr_cpus} CPUs from user space: {params}{not_go}",
            version()
        );
        // Ps for CPU ids that are offline never run. The BPF layer found
        // which are when it was loaded (this agent must not read sysfs now:
        // see `resize`); its hotplug counts start there, and the first
        // `resize` applies any change since, even one made before this line.
        let mut sched = Sched::new(params);
        let offline = offline_at_load(&bpf, nr_cpus);
        for c in (0..nr_cpus).filter(|&c| offline[c]) {
            sched.set_offline(c);
        }
        Ok(Self {
            bpf,
            sched,
            nr_cpus,
            slice_ns,
            pids: HashMap::new(),
            slots: Vec::new(),
            inflight: vec![VecDeque::new(); nr_cpus],
            seq: 0,
            unsent: VecDeque::new(),
            deferred: 0,
            congested: 0,
            shared_until: 0,
            prune_at: 0,
            prune_next: 0,
            stall_comm: agent.stall_comm(),
            stats_skipped: 0,
            epoch: Instant::now(),
            per_cpu: vec![0; nr_cpus],
            offline,
            hotplugs: 0,
            cpu_hotplugs: vec![0; nr_cpus],
            procresize: 0,
            runs: Runs::default(),
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A task became runnable: queue it by Go's rules (proc.go ready,
    /// newproc, gopreempt_m).
    fn enqueue(&mut self, task: QueuedTask, now: u64) {
        if self.stall_comm[0] != 0 && task.comm.map(|c| c as u8) == self.stall_comm {
            return; // --debug-stall-comm: never run it (the watchdog test)
        }
        let g = match self.pids.get(&task.pid) {
            Some(&g) => g,
            None => {
                let g = self.sched.new_g(Affinity::All);
                self.pids.insert(task.pid, g);
                let slot = Slot {
                    task: task.clone(),
                    queued: false,
                    live: true,
                    enqueued_at: 0,
                    dispatched_at: 0,
                    dispatched_to: -1,
                    dispatched_runs: 0,
                };
                match self.slots.get_mut(g as usize) {
                    Some(old) => *old = slot,
                    None => self.slots.push(slot),
                }
                g
            }
        };
        self.slots[g as usize].enqueued_at = now;
        // A task that may not run everywhere (a cpuset, sched_setaffinity)
        // is queued by Go's rules like any other, within its CPUs.
        let aff = match (task.nr_cpus_allowed as usize) < self.nr_cpus {
            true => cpu_affinity(task.pid, self.nr_cpus),
            false => Affinity::All,
        };
        self.sched.set_affinity(g, aff);
        let last = (task.cpu.max(0) as usize).min(self.nr_cpus - 1);
        let cpu = self.sched.home(g, self.online_cpu(last));
        // Woken or new: rustland resets exec_runtime when a task wakes up.
        let woken = task.exec_runtime == 0;
        let slot = &mut self.slots[g as usize];
        slot.task = task;
        if slot.queued {
            // Still queued in the model: only its enq_cnt moved on, and
            // maybe its affinity (set above). If it waits on the global
            // queue, a P of its new CPUs must be awake to take it: without
            // this a pinned task sat there for 41 s while every P idled.
            self.sched.wake_allowed(g);
            return;
        }
        slot.queued = true;
        for q in &mut self.inflight {
            if q.front().is_some_and(|&(x, _)| x == g) {
                finish_head(q, now);
            }
            q.retain(|&(x, _)| x != g);
        }
        if woken {
            // The CPU it was queued on readies it, into that CPU's runnext.
            if self.sched.ps[cpu].idle {
                self.sched.pidleremove(cpu);
            }
            self.sched.runqput(cpu, g, true, now);
            self.sched.wake_thief(g, cpu);
        } else {
            // Still runnable when it stopped: its slice ran out.
            self.sched.slice_expired(g);
            self.sched.wake_allowed(g);
        }
        self.sched.wakep();
    }

    /// `cpu`, or if it is offline the first online CPU.
    fn online_cpu(&self, cpu: usize) -> usize {
        match self.offline[cpu] {
            false => cpu,
            true => (0..self.nr_cpus).find(|&c| !self.offline[c]).unwrap_or(cpu),
        }
    }

    /// Hand a decision to the BPF layer, behind any it could not take yet.
    /// Its vtime orders the CPU's queue: the rustland DSQs are priority
    /// queues, so an increasing vtime keeps each one FIFO, with a runnext
    /// task (`ahead`) before the LRQ tasks (LRQ_VTIME_LAG).
    fn send(&mut self, mut d: DispatchedTask, ahead: bool) {
        self.seq += 1;
        d.vtime = dispatch_vtime(self.seq, ahead);
        self.unsent.push_back(d);
        self.flush_unsent();
    }

    /// Send what the ring had no room for, in order, until it is full again.
    fn flush_unsent(&mut self) {
        while let Some(d) = self.unsent.front() {
            if self.bpf.dispatch_task(d).is_err() {
                self.deferred += 1;
                return;
            }
            self.unsent.pop_front();
        }
    }

    /// proc.go procresize: follow the CPUs that went offline or came online
    /// since the last pass. The BPF layer takes hotplug in place (user/bpf)
    /// and counts it; a CPU that went offline has its P's queues moved to
    /// the global queue and idles for good, and the tasks already handed to
    /// its kernel queue run on the first CPUs that look for work. Nothing is
    /// read from sysfs: a hotplug holds its CPU's device lock until it ends,
    /// and it may wait for a task that only this agent can run.
    fn resize(&mut self) {
        let hotplugs = hotplug_count(&self.bpf);
        if hotplugs == self.hotplugs {
            return;
        }
        self.hotplugs = hotplugs;
        // Each CPU's own count, not its offline flag: a CPU may go and come
        // back between two passes, and the flag alone would not say so.
        for (c, seen) in cpu_hotplugs(&self.bpf, self.nr_cpus)
            .into_iter()
            .enumerate()
        {
            let n = seen.wrapping_sub(self.cpu_hotplugs[c]);
            self.cpu_hotplugs[c] = seen;
            // Every event counts, as the kernel counts them (its
            // hotplug_seq), even those whose steps are folded below.
            self.procresize += u64::from(n);
            for off in hotplug_steps(self.offline[c], n) {
                self.offline[c] = off;
                if off {
                    self.sched.procresize(c);
                    self.sched.set_offline(c);
                    self.inflight[c].clear();
                } else {
                    self.sched.set_online(c);
                }
            }
        }
    }

    /// Fill each CPU's kernel queue up to MAX_INFLIGHT from the model. An
    /// in-flight task stops counting when it comes back (see `enqueue`),
    /// blocks, or has had a whole slice: past that the CPU takes its next
    /// task, which makes the kernel preempt the long runner.
    fn dispatch(&mut self, now: u64) {
        // When the ring from the kernel is full, rustland's BPF layer puts
        // the tasks it cannot hand over on its shared DSQ, which a CPU
        // serves only when its own DSQ is empty. This agent keeps every
        // CPU's DSQ filled, so they would wait until the watchdog ejects the
        // scheduler. So for a while after that happens, the decisions go
        // through the shared DSQ too, where the older tasks (lower vtime)
        // run first.
        let congested = self.bpf.bss().nr_sched_congested;
        if congested != self.congested {
            self.congested = congested;
            self.shared_until = now + SHARED_AFTER_CONGESTION_NS;
        }
        let shared = now < self.shared_until;
        // The head holds the CPU, and the task behind it waits for it: the
        // BPF layer's run records tell when the head started and stopped
        // (`run_state`). A head that has not started yet is still behind
        // whatever runs there now.
        self.runs.read(&self.bpf, self.nr_cpus);
        let mut head_started = vec![true; self.nr_cpus];
        // A head that has had a whole slice and still runs: the kernel
        // preempts it when the CPU has a next task.
        let mut overdue = vec![false; self.nr_cpus];
        let state =
            |slot: &Slot| run_state(&self.bpf, &self.runs, &slot.task, slot.dispatched_runs);
        for (c, q) in self.inflight.iter_mut().enumerate() {
            // The kernel may run the task behind the head first: a runnext
            // task sent ahead of a head that had not started (see `send`),
            // or any task sent behind a SCHED_IDLE one (user/bpf,
            // idle_vtime()). Started before the head, it is the head; ended,
            // it is done. Else, in a 2-vCPU trace of the ping-pong beside
            // SCHED_IDLE hogs, a thread of the pair that had run ahead of
            // the hog and blocked kept the CPU's second slot, and its woken
            // partner waited for the hog's slice.
            if let (Some(&(h, _)), Some(&(g, _))) = (q.front(), q.get(1)) {
                match state(&self.slots[g as usize]) {
                    (_, true) => drop(q.remove(1)),
                    (true, false) if !state(&self.slots[h as usize]).0 => q.swap(0, 1),
                    _ => {}
                }
            }
            while let Some(&(g, at)) = q.front() {
                let (started, stopped) = state(&self.slots[g as usize]);
                if now.saturating_sub(at) < self.slice_ns && !stopped {
                    head_started[c] = started;
                    break;
                }
                overdue[c] = !stopped;
                finish_head(q, now);
            }
        }
        // The CPUs that run nothing look for work first, as a Go P whose task
        // stopped calls schedule(); then those whose head ran past its slice;
        // then each CPU fills the slot behind its head. Else a busy CPU took
        // the global queue's task (or stole) ahead of an idle CPU that
        // wakep() woke for it: two CPU hogs then shared one CPU and left the
        // other idle.
        let n = self.nr_cpus;
        let free = (0..n).filter(|&c| !overdue[c]).map(|c| (1, c));
        let late = (0..n).filter(|&c| overdue[c]).map(|c| (1, c));
        let behind = (0..n).map(|c| (MAX_INFLIGHT, c));
        for (fill, c) in free.chain(late).chain(behind) {
            let head_started = head_started[c];
            while !self.sched.ps[c].idle && self.inflight[c].len() < fill {
                // A CPU that still runs a task looks behind it: finding
                // nothing there does not make it idle.
                let (run, _woke) = match self.inflight[c].is_empty() && !overdue[c] {
                    true => self.sched.schedule(c, now),
                    false => self.sched.schedule_behind(c, now),
                };
                let Some(run) = run else { break };
                let slot = &mut self.slots[run.g as usize];
                slot.queued = false;
                slot.dispatched_at = now;
                slot.dispatched_to = c as i32;
                slot.dispatched_runs = self.runs.total;
                let mut d = DispatchedTask::new(&slot.task);
                d.cpu = if shared { RL_CPU_ANY } else { c as i32 };
                d.slice_ns = run.slice_ns;
                // The shared DSQ keeps plain FIFO: there the oldest decision
                // runs first (see above).
                let ahead = run.inherit && !shared;
                self.send(d, ahead);
                // Ahead of a committed head that has not started, it runs
                // first (see `send`), and so heads the CPU's queue here.
                match ahead && self.inflight[c].len() == 1 && !head_started {
                    true => self.inflight[c].push_front((run.g, now)),
                    false => self.inflight[c].push_back((run.g, now)),
                }
                self.per_cpu[c] += 1;
            }
        }
    }

    /// Forget the threads that exited: their task ids go back to the model
    /// for reuse, so the agent's state follows the live threads, not every
    /// id it ever saw (a new thread under an id it knows needs nothing new:
    /// each enqueue brings its name and CPUs). Each call looks at the next PRUNE_BATCH task ids,
    /// round-robin: one system call each, so that 10,000 parked threads do
    /// not cost 10,000 at once. Only tasks that are neither queued nor
    /// dispatched are looked at. A batch at most every PRUNE_EVERY_NS while
    /// tasks wait in the model, else every PRUNE_IDLE_EVERY_NS.
    fn prune(&mut self, now: u64) {
        if now < self.prune_next {
            return;
        }
        self.prune_next = now
            + match self.sched.nr_queued() {
                0 => PRUNE_IDLE_EVERY_NS,
                _ => PRUNE_EVERY_NS,
            };
        for _ in 0..PRUNE_BATCH.min(self.slots.len()) {
            self.prune_at = (self.prune_at + 1) % self.slots.len();
            let g = self.prune_at as G;
            let slot = &self.slots[g as usize];
            let tid = slot.task.pid;
            if !slot.live
                || slot.queued
                || self.inflight.iter().any(|q| q.iter().any(|&(x, _)| x == g))
            {
                continue;
            }
            if alive(tid) {
                continue;
            }
            self.pids.remove(&tid);
            self.slots[g as usize].live = false;
            self.sched.free_g(g);
        }
    }

    /// After a watchdog ejection ("... name[tid] failed to run for ..."):
    /// log what the agent knew of that task, to tell a task lost on the way
    /// (neither queued nor dispatched) from one the policy kept waiting.
    /// After an RCU stall ejection, which names no task: the same for RCU's
    /// grace-period kthread and for the task that has waited longest.
    fn explain_stall(&self, why: &str) {
        let tid = why
            .split('[')
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .and_then(|tid| tid.parse::<i32>().ok());
        if let Some(tid) = tid {
            return self.explain_task(tid);
        }
        let mut name = [0u8; 16];
        name[..11].copy_from_slice(b"rcu_preempt");
        let live = || self.slots.iter().filter(|s| s.live);
        if let Some(rcu) = live().find(|s| s.task.comm.map(|c| c as u8) == name) {
            self.explain_task(rcu.task.pid);
        }
        let inflight = |g: usize| {
            self.inflight
                .iter()
                .any(|q| q.iter().any(|&(x, _)| x as usize == g))
        };
        let oldest = (0..self.slots.len())
            .filter(|&g| self.slots[g].live && (self.slots[g].queued || inflight(g)))
            .min_by_key(|&g| self.slots[g].enqueued_at);
        if let Some(g) = oldest {
            self.explain_task(self.slots[g].task.pid);
        }
    }

    fn explain_task(&self, tid: i32) {
        let Some(&g) = self.pids.get(&tid) else {
            log::warn!("stalled task {tid}: never handed to the agent");
            return;
        };
        let slot = &self.slots[g as usize];
        let now = self.now();
        let ms = |t: u64| {
            if t == 0 {
                -1
            } else {
                (now.saturating_sub(t) / 1_000_000) as i64
            }
        };
        let inflight: Vec<usize> = (0..self.nr_cpus)
            .filter(|&c| self.inflight[c].iter().any(|&(x, _)| x == g))
            .collect();
        let place = if let Some(p) = self.sched.ps.iter().position(|p| p.runnext == Some(g)) {
            format!("runnext of P{p}")
        } else if let Some(p) = self
            .sched
            .ps
            .iter()
            .position(|p| p.runq.iter().any(|x| x == g))
        {
            format!("LRQ of P{p}")
        } else if let Some(i) = self.sched.runq.iter().position(|&x| x == g) {
            format!("global queue, {i} ahead of it")
        } else {
            "in no model queue".into()
        };
        log::warn!(
            "stalled task {tid} (task id {g}): queued {} ({place}), in flight on {inflight:?}; \
             handed to the agent {} ms ago (enq_cnt {}, cpu {}, {} CPUs allowed), dispatched {} ms ago to CPU {}; \
             {} unsent dispatches",
            slot.queued,
            ms(slot.enqueued_at),
            slot.task.enq_cnt,
            slot.task.cpu,
            slot.task.nr_cpus_allowed,
            ms(slot.dispatched_at),
            slot.dispatched_to,
            self.unsent.len()
        );
    }

    /// Print the `--stats` lines, unless stdout could block. Whoever reads
    /// it (a terminal, a pipe, journald) is a task this agent schedules: if
    /// it has fallen a buffer behind, a blocking write would wait for a task
    /// that only this agent can run, and nothing would run again. Those
    /// lines are skipped and counted instead.
    fn print_stats(&mut self) {
        if !writable(libc::STDOUT_FILENO) {
            self.stats_skipped += 1;
            return;
        }
        let mut buf = Vec::new();
        let _ = self.metrics().format(&mut buf);
        // One write for both lines (under PIPE_BUF: a pipe takes it whole).
        let n = unsafe { libc::write(libc::STDOUT_FILENO, buf.as_ptr().cast(), buf.len()) };
        if n != buf.len() as isize {
            self.stats_skipped += 1;
        }
    }

    fn metrics(&self) -> Metrics {
        let mut m = self.sched.metrics(
            self.epoch.elapsed().as_millis() as u64,
            self.slots.iter().filter(|s| s.queued).count() as u64
                + self.inflight.iter().map(|q| q.len() as u64).sum::<u64>(),
        );
        m.procresize = self.procresize;
        let b = self.bpf.bss();
        // Kernel threads never reach the agent: the BPF layer runs them.
        m.kthread = b.nr_kernel_dispatches;
        // Nor do CPUs held by real-time tasks (user/bpf, cpu_release).
        m.syscalls = b.nr_syscall;
        m.retakes = b.nr_retake_cpus;
        m.retake_tasks = b.nr_retake;
        // Nor do sync wakeups handed off on the waker's CPU.
        m.handoffs = b.nr_handoffs;
        // And wakeups that found an idle CPU.
        m.idle_places = b.nr_idle_places;
        // And wakeups from a kernel lock, up to a streak of them.
        m.lock_handoffs = b.nr_lock_handoffs;
        m.lock_refusals = b.nr_lock_refusals;
        // And the tasks a CPU on its way offline moved out of its own DSQ.
        m.released = b.nr_released;
        // A woken task that went ahead of another process's task, or of a
        // SCHED_IDLE one.
        m.wakeup_preempts = b.nr_cross_preempts + b.nr_idle_yields;
        m
    }

    /// Schedule until stopped. `--stats` lines are printed from this loop:
    /// a printer thread would be scheduled by this very loop, and holding
    /// the shared allocator's lock while preempted it would stall it.
    fn run(
        &mut self,
        stats_server: &StatsServer<(), Metrics>,
        stats: Option<Duration>,
    ) -> Result<UserExitInfo> {
        let (res_ch, req_ch) = stats_server.channels();
        let mut next_print = stats.map(|intv| Instant::now() + intv);
        while !self.bpf.exited() {
            self.bpf.begin_pass();
            let now = self.now();
            self.prune(now);
            if let (Some(at), Some(intv)) = (next_print, stats) {
                if Instant::now() >= at {
                    self.print_stats();
                    next_print = Some(at + intv);
                }
            }
            self.flush_unsent();
            self.resize();
            while let Ok(Some(task)) = self.bpf.dequeue_task() {
                self.enqueue(task, now);
            }
            self.dispatch(now);
            // With tasks left in the model, rustland runs this loop again
            // whenever a CPU looks for work: when its task blocked or
            // exited, which nothing else would tell (an exit never comes
            // back as an enqueue).
            // A CPU runs the tasks in its DSQ before this loop again
            // (user/bpf), so the backlog delays no task handed to the CPU
            // that this loop runs on.
            let queued = self.sched.nr_queued() + self.unsent.len();
            self.bpf.notify_complete(queued as u64, self.seq);
            if req_ch.try_recv().is_ok() {
                res_ch.send(self.metrics())?;
            }
        }
        self.metrics().log_final();
        let bss = self.bpf.bss();
        let c = [
            bss.nr_user_dispatches,
            bss.nr_kernel_dispatches,
            bss.nr_bounce_dispatches,
            bss.nr_cancel_dispatches,
            bss.nr_failed_dispatches,
            bss.nr_sched_congested,
        ];
        log::info!(
            "dispatches deferred on a full ring: {}; \
             stats lines skipped (stdout full): {}; rustland user/kernel/bounce/cancel/fail/congested {:?}",
            self.deferred,
            self.stats_skipped,
            c
        );
        log::debug!("dispatches per CPU {:?}", self.per_cpu);
        log::info!(
            "CPU hotplug events: {} seen by the BPF layer, {} applied; stuck CPUs: {}; \
             tasks a CPU moved out of its own DSQ: {}; tasks a CPU about to idle took from a busy CPU's DSQ: {}; agent runs ahead of a CPU's DSQ: {}; \
             passes again for a wakeup a pass missed: {}; passes cut short (agent put back in a pass): {}; \
             tasks preempted for the agent: {} ({} back with their slice); \
             tasks preempted for a woken task of another process: {} ({} timers set for later, {} as they came back); \
             SCHED_IDLE tasks preempted: {} ({} for a wakeup without the agent); \
             wakeups run ahead of the SCHED_IDLE tasks committed to an idle CPU: {}; \
             drains of the agent's decisions refused while another CPU drained: {} \
             ({} drained again for one, {} self-kicks with a drain owed); \
             puts for any CPU that found none idle: {}",
            hotplug_count(&self.bpf),
            self.procresize,
            stuck_cpus(&self.bpf),
            read_once(&bss.nr_released),
            read_once(&bss.nr_committed_steals),
            read_once(&bss.nr_agent_first),
            read_once(&bss.nr_agent_again),
            read_once(&bss.nr_agent_cut),
            read_once(&bss.nr_agent_kicks),
            read_once(&bss.nr_kick_restores),
            read_once(&bss.nr_cross_preempts),
            read_once(&bss.nr_preempt_later),
            read_once(&bss.nr_behind_on_return),
            read_once(&bss.nr_idle_yields),
            read_once(&bss.nr_beside_idle),
            read_once(&bss.nr_ahead_of_idle),
            read_once(&bss.nr_drain_busy),
            read_once(&bss.nr_drain_again),
            read_once(&bss.nr_redrain),
            read_once(&bss.nr_kick_idle_none)
        );
        let exit = self.bpf.shutdown_and_report();
        if let Err(e) = &exit {
            self.explain_stall(&format!("{e}"));
        }
        exit
    }
}

/// Whether a write of a few hundred bytes to `fd` would not block now.
fn writable(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let ready = unsafe { libc::poll(&mut p, 1, 0) };
    ready == 1 && p.revents & libc::POLLOUT != 0
}

/// Start the stats server, before the BPF layer is up: after that, this
/// thread may not mmap() (scx_rustland_core's seccomp filter), so it cannot
/// start threads. The server's threads (and those they start per client)
/// are made SCHED_FIFO, outside sched_ext: were the agent to schedule them,
/// one preempted while holding the shared allocator's lock would stall the
/// agent the next time it allocates.
fn launch_stats() -> Result<StatsServer<(), Metrics>> {
    fn set_policy(policy: libc::c_int, prio: libc::c_int) -> std::io::Result<()> {
        let param = libc::sched_param {
            sched_priority: prio,
        };
        match unsafe { libc::sched_setscheduler(0, policy, &param) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
    set_policy(libc::SCHED_FIFO, 1).context("cannot make the stats threads SCHED_FIFO")?;
    let server = StatsServer::new(server_data()).launch();
    set_policy(libc::SCHED_OTHER, 0).context("cannot restore SCHED_OTHER")?;
    server
}

/// Schedule; true if the kernel asked for a restart.
fn run(opts: Opts) -> Result<bool> {
    let stats = check_interval("stats", opts.agent.stats)?;
    init_log(opts.agent.verbose)?;
    preflight()?;
    // The watchdog timeout both modes use (bpf/intf.h says why) instead of
    // rustland's 5 s; rustland reads it from SCX_TIMEOUT_MS, which still wins.
    if std::env::var_os("SCX_TIMEOUT_MS").is_none() {
        std::env::set_var("SCX_TIMEOUT_MS", GMP_TIMEOUT_MS.to_string());
    }
    let stats_server = launch_stats()?;
    // One load per process: after it, the seccomp filter forbids the mmap()
    // a second one needs. A restart is a new process (see scx_gmp's
    // run_user_mode), which RESTART_EXIT asks for.
    let mut open_object = MaybeUninit::uninit();
    let params = opts.policy.params(*scx_utils::NR_CPU_IDS, 1);
    let mut agent = Agent::init(params, &opts.policy, &opts.agent, &mut open_object)?;
    Ok(agent.run(&stats_server, stats)?.should_restart())
}

fn main() -> ExitCode {
    match run(Opts::parse()) {
        Ok(true) => {
            log::info!("the kernel asked for a restart: exiting with {RESTART_EXIT} for scx_gmp to restart");
            ExitCode::from(RESTART_EXIT as u8)
        }
        result => exit_code(result.map(|_| ())),
    }
}

#[cfg(test)]
mod tests {
    use super::{dispatch_vtime, hotplug_steps, Runs, Stuck};

    #[test]
    fn run_records_tell_started_and_stopped_or_say_they_cannot() {
        // Task 7 was enqueued after a run that started at 100, and
        // dispatched when 40 runs had ended.
        let runs = |current: Vec<(u32, u64)>, ended: Vec<(u32, u64)>, total| Runs {
            current,
            ended,
            total,
            ring: 16,
        };
        // Its run from before the enqueue does not count.
        let r = runs(vec![(0, 0), (3, 150)], vec![(7, 100), (3, 90)], 45);
        assert_eq!(r.state(7, 100, 40), Some((false, false)));
        // Running now, since 200.
        let r = runs(vec![(7, 200), (3, 150)], vec![(7, 100)], 45);
        assert_eq!(r.state(7, 100, 40), Some((true, false)));
        // Ran from 200 and stopped (blocked or exited).
        let r = runs(vec![(0, 0), (3, 150)], vec![(7, 100), (7, 200)], 45);
        assert_eq!(r.state(7, 100, 40), Some((true, true)));
        // Not found, but 16 runs ended since: its record may be gone.
        let r = runs(vec![(0, 0), (0, 0)], vec![], 56);
        assert_eq!(r.state(7, 100, 40), None);
        // Pid 0 is no task.
        let r = runs(vec![(0, 500)], vec![], 40);
        assert_eq!(r.state(0, 100, 40), Some((false, false)));
    }

    #[test]
    fn a_runnext_task_runs_before_an_lrq_task_committed_ahead_of_it() {
        let lrq = dispatch_vtime(10, false);
        let runnext = dispatch_vtime(11, true);
        assert!(runnext < lrq, "runnext first (proc.go runqget)");
        // Each kind stays FIFO.
        assert!(dispatch_vtime(12, true) > runnext);
        assert!(dispatch_vtime(12, false) > lrq);
    }

    fn steps(off: bool, n: u32) -> Vec<bool> {
        hotplug_steps(off, n).collect()
    }

    #[test]
    fn hotplug_steps_follow_each_change_between_two_passes() {
        assert_eq!(steps(false, 0), Vec::<bool>::new());
        assert_eq!(steps(false, 1), [true]);
        assert_eq!(steps(true, 1), [false]);
        // Offline and back between two passes: its queues move once.
        assert_eq!(steps(false, 2), [true, false]);
        assert_eq!(steps(true, 2), [false, true]);
        assert_eq!(steps(false, 3), [true, false, true]);
        // Many: the last two or three, ending in the right state.
        assert_eq!(steps(false, 4), [true, false]);
        assert_eq!(steps(false, 7), [true, false, true]);
    }

    #[test]
    fn the_last_stuck_cpu_is_told_only_when_there_was_one() {
        let mut s = Stuck {
            n: 0,
            cpu: 1,
            queued: 3,
            pid: 812,
            held: false,
            ran_ns: 4_200_000,
            ago_ns: 31_250_000_000,
        };
        // The lifecycle test looks for "stuck CPUs: 0;".
        assert_eq!(format!("stuck CPUs: {s};"), "stuck CPUs: 0;");
        s.n = 2;
        assert_eq!(
            s.to_string(),
            "2 (the last: CPU 1, 3 tasks in its DSQ, running pid 812 for 4 ms, 31.2 s before this line)"
        );
        s.held = true;
        assert!(s
            .to_string()
            .contains("DSQ, held by a higher class, running pid 812"));
    }
}
