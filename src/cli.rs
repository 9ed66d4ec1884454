//! The command-line options: the Go policy's knobs and the agent options that
//! both binaries share (`scx_gmp`, and `scx_gmp-user` in `user/`), and
//! `scx_gmp`'s own. Every default is a Go constant from `bpf/intf.h`.

use std::sync::OnceLock;

use clap::Parser;

use crate::bpf_intf::*;
use crate::model::{us_to_ns, Params};
use crate::sim::SimOpts;
use crate::trace::Knobs;

/// Exit code of scx_gmp-user for "the kernel asked for a restart" (a CPU
/// hotplug during the load): `scx_gmp --mode user` then starts a fresh one.
pub const RESTART_EXIT: i32 = 75;

/// `--version`: the crate version, the git commit and the target, as the scx
/// schedulers print it.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let sha = env!("GMP_GIT_SHA");
        let semver = match sha {
            "" => env!("CARGO_PKG_VERSION").to_string(),
            _ => format!("{}-g{sha}", env!("CARGO_PKG_VERSION")),
        };
        scx_utils::build_id::full_version(&semver)
    })
}

/// Knobs of the Go policy. Every default is the Go runtime's constant.
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyOpts {
    /// Time slice in microseconds (Go's forcePreemptNS = 10 ms). A task whose
    /// slice runs out goes to the tail of the global run queue.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_SLICE_US_DFL as u64, value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub slice_us: u64,

    /// Capacity of each CPU's local run queue (Go: 256). A put into a full
    /// queue moves half of it, plus the task, to the global queue.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_LRQ_CAP_DFL, value_parser = clap::value_parser!(u32).range(2..=65_536))]
    pub lrq_cap: u32,

    /// Every Nth schedtick a CPU takes one task from the global queue before
    /// its own (Go: 61). 0 disables the check.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_GLOBAL_EVERY_DFL, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub global_every: u32,

    /// Rounds of work stealing over all other CPUs before a CPU idles (Go's
    /// stealTries: 4). A victim's runnext is only taken in the last round.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_STEAL_TRIES_DFL, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub steal_tries: u32,

    /// A victim's runnext task may be stolen only after it waited this long,
    /// in microseconds (Go's runqgrab sleeps 3 us).
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_RUNNEXT_GRACE_US_DFL as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub runnext_grace_us: u64,

    /// Once a CPU's slice is spent, the runnext tasks that inherit it share
    /// this much more, in microseconds, before the next one is preempted to
    /// the global queue (Go's sysmon retakes a spent slice within 20 us).
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_MIN_SLICE_US_DFL as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub min_slice_us: u64,

    /// Hand off a sync wakeup as Go's ready() does: into the waker's runnext,
    /// stealable after the grace, with wakep() waking an idle CPU to spin. By
    /// default a sync wakeup (the waker is about to sleep: a pipe or futex
    /// hand-off) goes straight to the waker CPU's local queue with what is
    /// left of the slice, and wakes no other CPU: on Linux that kick costs
    /// an IPI, or steals the task away from the CPU whose caches hold it.
    /// In user mode the BPF layer does that without a round trip through the
    /// agent, and runs a wakeup from a kernel lock (an uninterruptible sleep:
    /// a mutex, the memory-map lock, I/O) next on the waker's CPU the same
    /// way, as Go's semaphore hand-off puts the waiter in the releaser's
    /// runnext; with this option every such wakeup goes through the agent's
    /// model.
    #[arg(long, global = true)]
    pub go_handoff: bool,

    /// User mode: queue every wakeup in the agent's model, as Go's ready()
    /// does (the waker's runnext, then wakep() and a steal if the waker runs
    /// on). By default a wakeup that finds an idle CPU runs there at once,
    /// without a round trip through the agent: Go's outcome, an idle P
    /// taking the new work, without the steal's latency. So does a wakeup
    /// to a CPU that runs a SCHED_IDLE task, which it preempts, and one to
    /// an idle CPU that the agent has given only SCHED_IDLE tasks to run
    /// next, which it runs ahead of (neither with --idle-slice-us 0).
    #[arg(long, global = true)]
    pub go_ready: bool,

    /// User mode: a wakeup that finds every CPU busy waits for the agent
    /// until some CPU's task stops or ends its slice, as in scx_rustland. By
    /// default one of a task that may run on one CPU only, or one that goes
    /// ahead of another process's task (--cross-process-preempt-us),
    /// preempts the task on its CPU for the agent's pass, and that task
    /// then runs on with the rest of its slice; if the agent is in a pass
    /// already, it runs another one right after, for a wakeup that pass
    /// had not read. Go decides where a woken goroutine goes in the waker's
    /// ready(), at once; waiting for the agent added up to a slice to each
    /// wakeup beside CPU-bound work.
    #[arg(long, global = true)]
    pub lazy_agent: bool,

    /// User mode: a CPU about to idle, with nothing from the agent, takes
    /// a task the agent has sent to a busy CPU's queue (its next task, sent
    /// while the one before it runs), as a Go P with nothing to do steals
    /// from a busy P's queue. By default such a task waits for its CPU, as
    /// in scx_rustland: beside two CPU hogs on two CPUs, one CPU then ran
    /// both by turns while the other idled (115 to 248 ms a second in a
    /// trace), but with the steal the ping-pong beside SCHED_IDLE hogs and
    /// cyclictest's median lost in bench/.
    #[arg(long, global = true)]
    pub steal_committed: bool,

    /// BPF mode: call wakep() on every wakeup, as Go's ready() does. By
    /// default a wakeup that an idle CPU's own interrupt (a timer, a device)
    /// puts in that CPU's runnext, with nothing else queued there, wakes no
    /// second CPU: the idle CPU runs the task when the interrupt returns,
    /// and a second CPU could only steal it away or find nothing.
    #[arg(long, global = true)]
    pub go_wakep: bool,

    /// BPF mode: wakep() wakes the CPU that idled last, as Go's pidleget()
    /// takes the top of its stack of idle Ps. By default it wakes the
    /// kernel's first idle CPU (the lowest-numbered, a whole idle core
    /// first), which keeps the kicks on fewer CPUs.
    #[arg(long, global = true)]
    pub go_pidle: bool,

    /// BPF mode: a task put on the global queue (its slice ran out, it
    /// yielded) wakes a CPU only through wakep(), as Go's globrunqput does.
    /// By default, when that wakep() wakes none (a CPU spins, or none
    /// idles), the other CPUs the task may use that spin or are not idle
    /// are kicked, and one that is looking for work looks again: the kernel
    /// adds the task to the queue only after the scheduler's enqueue
    /// returns, so a CPU that looked there just before, found nothing and
    /// idled would leave the task waiting for another CPU's next look (up
    /// to a slice). A busy CPU ignores the kick.
    #[arg(long, global = true)]
    pub go_grq_put: bool,

    /// BPF mode: a wakeup by a running task (not a sync one, not a new
    /// thread) runs at once on an idle CPU it may use, its previous CPU
    /// first, if one is idle. Not Go's rule: Go's ready() puts the task in
    /// the waker's runnext and wakep() wakes an idle P, which steals it
    /// when the waker runs on; on Linux that is an IPI, a dispatch and a
    /// cross-CPU steal where one IPI would do. Off: Go's rule.
    #[arg(long, global = true)]
    pub ready_idle: bool,

    /// BPF mode: --ready-idle, but only while over PCT percent of the
    /// recent kicks of an idle CPU (wakep()) took over 1 ms to answer: a
    /// VM with more vCPUs than its host gives it cores, where each kick
    /// wakes a vCPU that must wait for one, and a steal comes late. Not for
    /// a wakeup by an exiting thread (its joiner runs next where it
    /// exits). With the kicks fast, Go's rule. 0: off, Go's rule always.
    #[arg(long, global = true, value_name = "PCT", default_value_t = gmp_defaults_GMP_READY_IDLE_SLOW_PCT_DFL, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub ready_idle_slow_pct: u32,

    /// BPF mode: wake a task of another process as one of the waker's own,
    /// by Go's ready(): into the waker's runnext (or, for a sync wakeup, its
    /// local queue). By default a wakeup across processes (a pipe or socket
    /// between two programs) runs at once on an idle CPU it may use, its
    /// previous CPU first, when one is idle: Go's goroutines share one
    /// address space, so its hand-off on one CPU is cheap, while between two
    /// processes each such hand-off switches the address space.
    #[arg(long, global = true)]
    pub go_cross_process: bool,

    /// BPF mode: once the task at the head of the global queue has waited
    /// this long, in milliseconds, and longer than the head of a CPU's own
    /// LRQ, that CPU runs it first. Not Go's rule: Go serves the global
    /// queue on every 61st schedtick and when a P's own queues are empty, so
    /// under a deep overload of CPU-bound tasks a preempted task can wait
    /// there for tens of seconds, which on Linux stalls RCU and trips the
    /// kernel's watchdog. 0: Go's rule only.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_GLOBAL_MAX_WAIT_MS_DFL as u64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub global_max_wait_ms: u64,

    /// BPF mode: once the task at the head of a CPU's LRQ, woken and not
    /// run since, has waited this long, in microseconds, it runs before the
    /// CPU's runnext task, which runs after it. Not Go's rule: Go's runnext
    /// goes first and inherits what is left of the slice, so two tasks that
    /// hand the CPU back and forth through runnext (a server's dispatcher
    /// and the worker it just woke) keep it for up to a whole 10 ms slice
    /// while the tasks woken before them, each pushed out of runnext by the
    /// next, wait on the LRQ. Not for a head that was preempted (a CPU hog)
    /// or is SCHED_IDLE, nor before a runnext task that preempts the running
    /// one (it starts a slice of its own). 0: Go's rule. On by default: it
    /// won fan-out and the request load's wakeup tail at 2 and 4 vCPUs
    /// (README: "Where Linux differs from Go").
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_LRQ_MAX_WAIT_US_DFL as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub lrq_max_wait_us: u64,

    /// BPF mode: a wakeup put in a CPU's runnext preempts the task running
    /// there if that task has run this long, in microseconds, since it last
    /// started, or once it has (a timer; a waker that sleeps first, or an
    /// exiting thread, runs on). The woken task starts a slice of its own;
    /// the preempted task runs next (after the LRQ, if tasks wait there),
    /// with the rest of its own slice. Not Go's rule: a woken
    /// goroutine waits in runnext until the running one blocks or its 10 ms
    /// slice ends (or an idle P steals it), so beside CPU-bound work a timer
    /// or I/O wakeup waits up to a slice; EEVDF's wakeup preemption does not
    /// make it wait. Not for a new thread, nor a sync wakeup (its waker is
    /// about to sleep). 0: Go's rule within a process (across processes,
    /// see --cross-process-preempt-us).
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_WAKEUP_PREEMPT_US_DFL as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub wakeup_preempt_us: u64,

    /// --wakeup-preempt-us for a wakeup into another process: a task woken
    /// into a CPU's runnext preempts a task of another program that has run
    /// this long there, in microseconds, since it last started, or once it
    /// has (not for a new thread, a sync wakeup or a SCHED_IDLE task; in
    /// user mode a preemption for the agent's pass does not count as a
    /// start). Not Go's rule: Go
    /// orders the goroutines of one program and never preempts one for a
    /// wakeup; between two programs (a timer thread beside a compile job)
    /// that leaves the woken task up to a whole slice behind the other's.
    /// Within one process, Go's rule. In user mode the preempted task runs
    /// on after the woken one and the LRQ tasks decided for its CPU (with
    /// --lazy-agent, only once the agent's decision reaches the CPU). 0:
    /// Go's rule everywhere.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_CROSS_PREEMPT_US_DFL as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub cross_process_preempt_us: u64,

    /// BPF mode: a wakeup that a running task puts in its own CPU's runnext,
    /// with nothing else queued there, wakes an idle CPU to steal it only if
    /// it still waits after this long, in microseconds. Not Go's rule: Go's
    /// ready() calls wakep() at once; on Linux that is an IPI to a CPU that
    /// most often finds nothing (the waker is about to block, and the task
    /// runs next on its CPU) or steals it from the CPU whose caches hold it.
    /// 0: Go's rule.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_WAKEP_DELAY_US_DFL as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub wakep_delay_us: u64,

    /// BPF mode: --wakep-delay-us only while over PCT percent of the recent
    /// kicks of an idle CPU (wakep()) took over 1 ms to answer (a VM with
    /// more vCPUs than its host gives it cores, where each kick wakes a vCPU
    /// that competes with the waker's for one); with the kicks fast, Go's
    /// wakep() at once. Needs --wakep-delay-us. 0: the delay always.
    #[arg(long, global = true, value_name = "PCT", default_value_t = gmp_defaults_GMP_WAKEP_DELAY_SLOW_PCT_DFL, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub wakep_delay_slow_pct: u32,

    /// A SCHED_IDLE task's slice is at most this long, in microseconds (the
    /// kernel's tick rounds it up), and a task queued to its CPU that is not
    /// SCHED_IDLE preempts it at once. In BPF mode a CPU also runs other
    /// tasks of its LRQ, then the global queue's head, before a SCHED_IDLE
    /// task that has waited less than 100 ms. Not Go's rule: Go has no
    /// priorities, and gives every task the same slice and place. But a
    /// woken task that waits behind a batch job (a task the user marked
    /// SCHED_IDLE: run it only when nothing else wants the CPU) would wait
    /// for that job's whole slice, or on the global queue for a 61st
    /// schedtick. 0: Go's rule, the same slice and order as every task and
    /// no preemption.
    #[arg(long, global = true, default_value_t = gmp_defaults_GMP_IDLE_SLICE_US_DFL as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub idle_slice_us: u64,
}

/// The start-up log's words for the timed options that are not Go's and are
/// set: ", what N us" for each `(N, what)` whose N is not 0. Both modes log
/// them.
pub fn timed_not_go(options: &[(u64, &str)]) -> String {
    options
        .iter()
        .filter(|t| t.0 != 0)
        .map(|(us, what)| format!(", {what} {us} us"))
        .collect()
}

impl PolicyOpts {
    /// The model's parameters for `nprocs` Ps. This and knobs() are where the
    /// knobs turn from microseconds into nanoseconds.
    pub fn params(&self, nprocs: usize, seed: u64) -> Params {
        Params {
            nprocs,
            lrq_cap: self.lrq_cap as usize,
            global_every: self.global_every,
            steal_tries: self.steal_tries,
            slice_ns: us_to_ns(self.slice_us),
            min_slice_ns: us_to_ns(self.min_slice_us),
            runnext_grace_ns: us_to_ns(self.runnext_grace_us),
            seed,
        }
    }

    /// The knobs that are not Go's and that a trace's checker holds to a
    /// number, in ns.
    pub fn knobs(&self) -> Knobs {
        Knobs {
            lrq_max_wait_ns: us_to_ns(self.lrq_max_wait_us),
            wakeup_preempt_ns: us_to_ns(self.wakeup_preempt_us),
            cross_preempt_ns: us_to_ns(self.cross_process_preempt_us),
            idle_slice_ns: us_to_ns(self.idle_slice_us),
            grq_kick: u64::from(!self.go_grq_put),
        }
    }
}

/// What every scheduling agent takes, in both modes.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentOpts {
    /// Print Go's schedtrace line and the rule counters every SECS seconds
    /// while scheduling (at least 0.1).
    #[arg(long, value_name = "SECS")]
    pub stats: Option<f64>,

    /// Bytes of the BPF debug dump kept when the kernel ejects the scheduler
    /// (0: the kernel's default; at most 1 MiB).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1 << 20))]
    pub exit_dump_len: u32,

    /// Verbose output, including the libbpf log.
    #[arg(short, long)]
    pub verbose: bool,

    /// Testing only: never run tasks of this command name, so that the
    /// kernel's watchdog ejects the scheduler (the test of that path).
    #[arg(long, hide = true, value_name = "COMM", value_parser = comm_name)]
    pub debug_stall_comm: Option<String>,

    /// Testing only: user mode takes at most N wakeups from a kernel lock on
    /// a CPU between two of that CPU's dispatch() calls, instead of Go's 61,
    /// so that a test can see the bound act.
    #[arg(long, hide = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub debug_lock_streak: Option<u32>,
}

/// A task's command name: 1 to 15 bytes (TASK_COMM_LEN less its NUL).
fn comm_name(s: &str) -> Result<String, String> {
    match s.len() {
        1..=15 if !s.contains('\0') => Ok(s.to_string()),
        _ => Err("a command name has 1 to 15 bytes".into()),
    }
}

impl AgentOpts {
    /// `--debug-stall-comm` as the kernel stores a comm: NUL-padded.
    pub fn stall_comm(&self) -> [u8; 16] {
        let mut comm = [0u8; 16];
        if let Some(name) = &self.debug_stall_comm {
            comm[..name.len()].copy_from_slice(name.as_bytes());
        }
        comm
    }

    /// User mode's bound on lock hand-offs between two dispatch() calls.
    pub fn lock_streak_max(&self) -> u32 {
        self.debug_lock_streak
            .unwrap_or(gmp_defaults_GMP_GLOBAL_EVERY_DFL)
    }
}

/// scx_gmp: the Go runtime's G-M-P scheduler for every Linux thread.
///
/// Each CPU is a Go P with a local run queue of 256 and a runnext slot; all
/// CPUs share one global run queue. New and woken tasks go to the waker's
/// runnext, every 61st schedtick takes from the global queue, idle CPUs steal
/// half a victim's queue, and slices are 10 ms. Every Go constant is a knob
/// below; docs/go-policy.md has the rules.
///
/// Requires root and a kernel with sched_ext (CONFIG_SCHED_CLASS_EXT=y, Linux
/// 6.12 or newer). Stop it with Ctrl-C or SIGTERM: the kernel's default
/// scheduler takes over again.
#[derive(Debug, Parser)]
#[command(name = "scx_gmp", version = version(), about, long_about)]
pub struct Opts {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,

    #[command(flatten)]
    pub policy: PolicyOpts,

    #[command(flatten)]
    pub agent: AgentOpts,

    /// Where the policy runs: `bpf`, in the kernel (the BPF scheduler), or
    /// `user`, in the agent on scx_rustland_core (the model decides, a thin
    /// BPF layer carries the decisions out; the scx_gmp-user binary, which
    /// must be installed beside scx_gmp).
    #[arg(long, value_enum, default_value_t = Mode::Bpf)]
    pub mode: Mode,

    /// Do not schedule: print the stats of a running scx_gmp (either mode)
    /// every SECS seconds (at least 0.1).
    #[arg(long, value_name = "SECS")]
    pub monitor: Option<f64>,

    /// With --monitor: print each sample as one line of JSON (the scx_stats
    /// record) instead of the schedtrace text.
    #[arg(long, requires = "monitor")]
    pub json: bool,

    /// Describe every stats field and exit.
    #[arg(long)]
    pub help_stats: bool,

    /// Record every policy decision of the BPF side (each put, pick, idle,
    /// spin, kick and late move) in FILE, one line each, for `scx_gmp check
    /// FILE`. Off by default; the README says what it costs.
    #[arg(long, value_name = "FILE", conflicts_with = "monitor")]
    pub trace: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// The Go policy in BPF: every decision in the kernel.
    Bpf,
    /// The Go policy in user space, on scx_rustland_core.
    User,
}

#[derive(Debug, clap::Subcommand)]
pub enum Cmd {
    /// Run the policy in the deterministic simulator instead of the kernel
    /// (no root, no sched_ext needed): Go's schedtrace lines, then makespan,
    /// per-CPU busy share, steals and global-queue takes. The policy options
    /// above apply.
    Sim(SimOpts),

    /// Check a trace that `--trace FILE` recorded against Go's rules: print
    /// each violation (event, CPU, rule, what was expected) and a summary;
    /// exit 1 if any rule was broken or the trace dropped events.
    Check {
        /// The trace file.
        file: std::path::PathBuf,
    },
}
