//! `scx_gmp-user` (`scx_gmp --mode user`): the Go policy applied in user
//! space. scx_rustland_core's BPF layer hands every task that becomes
//! runnable to this agent; the pure model (`scx_gmp::model`) queues it by
//! Go's rules and picks, for each CPU, the next task and its slice; the BPF
//! layer runs it there. Stealing and the 61-tick check happen in the model,
//! so each CPU's kernel queue is kept to about two tasks.
//!
//! It is a second binary because scx_rustland_core installs a global
//! allocator (a locked 64 MiB arena) and its own SIGINT/SIGTERM handler.

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod bpf_intf {
    include!(concat!(env!("OUT_DIR"), "/bpf_intf.rs"));
}
#[allow(
    clippy::all,
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod bpf_skel {
    include!(concat!(env!("OUT_DIR"), "/bpf_skel.rs"));
}
#[allow(clippy::all, dead_code)]
#[rustfmt::skip]
mod bpf {
    include!(concat!(env!("OUT_DIR"), "/rustland/src/bpf.rs"));
}

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use libbpf_rs::OpenObject;
use scx_stats::prelude::*;
use scx_utils::UserExitInfo;

use bpf::{BpfScheduler, DispatchedTask, QueuedTask};
use scx_gmp::cli::{check_interval, init_log, preflight, Cmd, Opts, PolicyOpts, RESTART_EXIT};
use scx_gmp::model::{Affinity, Sched, G};
use scx_gmp::stats::{server_data, Metrics};

/// Tasks dispatched to one CPU and not yet accounted for, at most: a Go P
/// runs one G at a time, and a task committed to a CPU's kernel queue behind
/// another can no longer be stolen.
const MAX_INFLIGHT: usize = 1;

/// Field `n` (1-based, as in proc(5)) of /proc/<tid>/stat; None if the
/// thread is gone. No heap allocation: this runs in the scheduling loop,
/// which must never wait for the allocator's lock (see `launch_stats`).
fn proc_stat_field(tid: i32, n: usize) -> Option<u64> {
    let mut path = [0u8; 32];
    let mut w = &mut path[..];
    std::io::Write::write_fmt(&mut w, format_args!("/proc/{tid}/stat\0")).ok()?;
    let mut buf = [0u8; 512];
    let len = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let len = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        usize::try_from(len).ok()?
    };
    let stat = &buf[..len];
    // Fields from 3 on follow the last ')' (the command name may hold any).
    let rest = &stat[stat.iter().rposition(|&b| b == b')')? + 2..];
    let field = rest.split(|&b| b == b' ').nth(n.checked_sub(3)?)?;
    match field {
        [state] if n == 3 => Some(*state as u64),
        digits => std::str::from_utf8(digits).ok()?.parse().ok(),
    }
}

/// Whether thread `tid` is not runnable (blocked, stopped or gone).
/// rustland does not report blocking, so this is how a CPU whose task went
/// to sleep gets its next one at once.
fn blocked(tid: i32) -> bool {
    proc_stat_field(tid, 3) != Some(b'R' as u64)
}

/// Whether `tid` is a kernel thread (PF_KTHREAD in the flags field).
fn is_kthread(tid: i32) -> bool {
    proc_stat_field(tid, 9).is_some_and(|flags| flags & 0x0020_0000 != 0)
}

/// What the agent knows of a task.
struct Slot {
    /// The latest enqueue of the task (its `enq_cnt` must match to dispatch).
    task: QueuedTask,
    /// In the model's queues now.
    queued: bool,
    /// A kernel thread: not a goroutine, run at once (see `enqueue`).
    kthread: bool,
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
    locked: u64,
    epoch: Instant,
    per_cpu: Vec<u64>,
}

impl<'a> Agent<'a> {
    fn init(
        policy: &PolicyOpts,
        exit_dump_len: u32,
        verbose: bool,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        let nr_cpus = *scx_utils::NR_CPU_IDS;
        let slice_ns = policy.slice_us * 1000;
        let bpf = BpfScheduler::init(
            open_object,
            None,
            exit_dump_len,
            false,    // partial: schedule every task
            verbose,  // debug
            false,    // builtin_idle: every decision is the model's
            false,    // numa_local
            slice_ns, // slice of tasks the BPF layer places itself (per-CPU kthreads)
            "gmp_user",
        )?;
        log::info!(
            "scx_gmp-user {} scheduling {nr_cpus} CPUs from user space: slice {} us, LRQ {}, global every {}",
            env!("CARGO_PKG_VERSION"),
            policy.slice_us,
            policy.lrq_cap,
            policy.global_every
        );
        // Ps for CPU ids that are offline never run (a hotplug event makes
        // the kernel ask for a restart, which brings a fresh agent).
        let mut sched = Sched::new(policy.params(nr_cpus, 1));
        let online = scx_utils::Topology::new()?.all_cpus;
        for c in (0..nr_cpus).filter(|c| !online.contains_key(c)) {
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
            locked: 0,
            epoch: Instant::now(),
            per_cpu: vec![0; nr_cpus],
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A task became runnable: queue it by Go's rules (proc.go ready,
    /// newproc, gopreempt_m).
    fn enqueue(&mut self, task: QueuedTask, now: u64) {
        let g = match self.pids.get(&task.pid) {
            Some(&g) => g,
            None => {
                let g = self.sched.new_g(Affinity::All);
                self.pids.insert(task.pid, g);
                self.slots.push(Slot {
                    kthread: is_kthread(task.pid),
                    task: task.clone(),
                    queued: false,
                });
                g
            }
        };
        // Kernel threads are the runtime, not goroutines (Go's sysmon runs
        // without a P), and a task that may not run everywhere is a locked
        // G: both go straight back to their CPU (the BPF layer moves a task
        // whose CPU is no longer allowed).
        if self.slots[g as usize].kthread || (task.nr_cpus_allowed as usize) < self.nr_cpus {
            let mut d = DispatchedTask::new(&task);
            d.slice_ns = self.slice_ns;
            d.vtime = self.next_vtime();
            self.locked += 1;
            let _ = self.bpf.dispatch_task(&d);
            return;
        }
        let cpu = (task.cpu.max(0) as usize).min(self.nr_cpus - 1);
        // Woken or new: rustland resets exec_runtime when a task wakes up.
        let woken = task.exec_runtime == 0;
        let slot = &mut self.slots[g as usize];
        slot.task = task;
        if slot.queued {
            return; // still queued in the model: only its enq_cnt moved on
        }
        slot.queued = true;
        for q in &mut self.inflight {
            q.retain(|&(x, _)| x != g);
        }
        if woken {
            // The CPU it was queued on readies it, into that CPU's runnext.
            if self.sched.ps[cpu].idle {
                self.sched.pidleremove(cpu);
            }
            self.sched.runqput(cpu, g, true, now);
        } else {
            // Still runnable when it stopped: its slice ran out.
            self.sched.slice_expired(g);
        }
        self.sched.wakep();
    }

    fn next_vtime(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Fill each CPU's kernel queue up to MAX_INFLIGHT from the model. An
    /// in-flight task stops counting when it comes back (see `enqueue`),
    /// blocks, or has had a whole slice: past that the CPU takes its next
    /// task, which makes the kernel preempt the long runner.
    fn dispatch(&mut self, now: u64) {
        for c in 0..self.nr_cpus {
            let slice = self.slice_ns;
            let slots = &self.slots;
            self.inflight[c].retain(|&(g, at)| {
                now.saturating_sub(at) < slice && !blocked(slots[g as usize].task.pid)
            });
        }
        for c in 0..self.nr_cpus {
            while !self.sched.ps[c].idle && self.inflight[c].len() < MAX_INFLIGHT {
                let (run, _woke) = self.sched.schedule(c, now);
                let Some(run) = run else { break };
                let slot = &mut self.slots[run.g as usize];
                slot.queued = false;
                let mut d = DispatchedTask::new(&slot.task);
                d.cpu = c as i32;
                d.slice_ns = run.slice_ns;
                d.vtime = self.next_vtime();
                let _ = self.bpf.dispatch_task(&d);
                self.inflight[c].push_back((run.g, now));
                self.per_cpu[c] += 1;
            }
        }
    }

    fn metrics(&self) -> Metrics {
        let mut m = self.sched.metrics(
            self.epoch.elapsed().as_millis() as u64,
            self.slots.iter().filter(|s| s.queued).count() as u64
                + self.inflight.iter().map(|q| q.len() as u64).sum::<u64>(),
        );
        m.locked = self.locked;
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
            if let (Some(at), Some(intv)) = (next_print, stats) {
                if Instant::now() >= at {
                    let _ = self.metrics().format(&mut std::io::stdout());
                    next_print = Some(at + intv);
                }
            }
            let now = self.now();
            while let Ok(Some(task)) = self.bpf.dequeue_task() {
                self.enqueue(task, now);
            }
            self.dispatch(now);
            // With tasks left in the model, rustland runs this loop again
            // whenever a CPU looks for work: when its task blocked or
            // exited, which nothing else would tell (an exit never comes
            // back as an enqueue).
            let queued = self.sched.queued().count() as u64;
            self.bpf.notify_complete(queued);
            if req_ch.try_recv().is_ok() {
                res_ch.send(self.metrics())?;
            }
        }
        let m = self.metrics();
        log::info!("final stats:\n{}\n{}", m.schedtrace(), m.counters());
        let c = [
            *self.bpf.nr_user_dispatches_mut(),
            *self.bpf.nr_kernel_dispatches_mut(),
            *self.bpf.nr_bounce_dispatches_mut(),
            *self.bpf.nr_cancel_dispatches_mut(),
            *self.bpf.nr_failed_dispatches_mut(),
            *self.bpf.nr_sched_congested_mut(),
        ];
        log::debug!(
            "dispatches per CPU {:?}; rustland user/kernel/bounce/cancel/fail/congested {:?}",
            self.per_cpu,
            c
        );
        self.bpf.shutdown_and_report()
    }
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
    if let Some(Cmd::Sim(_)) = opts.cmd {
        bail!("the simulator runs in scx_gmp: use `scx_gmp sim`");
    }
    let stats = check_interval("stats", opts.stats)?;
    if opts.monitor.is_some() {
        bail!("--monitor is scx_gmp's: use `scx_gmp --monitor SECS`");
    }
    init_log(opts.verbose)?;
    preflight()?;
    // Go's FIFO queues may hold a task for seconds under overload (1000 tasks
    // of 20 ms on 4 CPUs: 5 s), within the kernel's 30 s watchdog that the
    // BPF mode has; rustland's default is 5 s. SCX_TIMEOUT_MS still wins.
    if std::env::var_os("SCX_TIMEOUT_MS").is_none() {
        std::env::set_var("SCX_TIMEOUT_MS", "30000");
    }
    let stats_server = launch_stats()?;
    // One load per process: after it, the seccomp filter forbids the mmap()
    // a second one needs. A restart is a new process (see scx_gmp's
    // run_user_mode), which RESTART_EXIT asks for.
    let mut open_object = MaybeUninit::uninit();
    let mut agent = Agent::init(
        &opts.policy,
        opts.exit_dump_len,
        opts.verbose,
        &mut open_object,
    )?;
    Ok(agent.run(&stats_server, stats)?.should_restart())
}

fn main() -> ExitCode {
    match run(Opts::parse()) {
        Ok(true) => {
            log::info!("the kernel asked for a restart: exiting with {RESTART_EXIT} for scx_gmp to restart");
            ExitCode::from(RESTART_EXIT as u8)
        }
        Ok(false) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scx_gmp: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
