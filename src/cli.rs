//! The command line both binaries share (`scx_gmp` and `scx_gmp-user`), and
//! what they do before and around scheduling: refusing early with one clear
//! line, logging, printing stats, and the simulator front end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Parser;

use crate::model::Params;

/// Exit code of scx_gmp-user for "the kernel asked for a restart" (CPU
/// hotplug, say): `scx_gmp --mode user` then starts a fresh one.
pub const RESTART_EXIT: i32 = 75;
use crate::stats::Metrics;

/// Knobs of the Go policy. Every default is the Go runtime's constant.
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyOpts {
    /// Time slice in microseconds (Go's forcePreemptNS = 10 ms). A task whose
    /// slice runs out goes to the tail of the global run queue.
    #[arg(long, global = true, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub slice_us: u64,

    /// Capacity of each CPU's local run queue (Go: 256). A put into a full
    /// queue moves half of it, plus the task, to the global queue.
    #[arg(long, global = true, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=65_536))]
    pub lrq_cap: u32,

    /// Every Nth schedtick a CPU takes one task from the global queue before
    /// its own (Go: 61). 0 disables the check.
    #[arg(long, global = true, default_value_t = 61, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub global_every: u32,

    /// Rounds of work stealing over all other CPUs before a CPU idles (Go's
    /// stealTries: 4). A victim's runnext is only taken in the last round.
    #[arg(long, global = true, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub steal_tries: u32,

    /// A victim's runnext task may be stolen only after it waited this long,
    /// in microseconds (Go's runqgrab sleeps 3 us).
    #[arg(long, global = true, default_value_t = 3, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub runnext_grace_us: u64,

    /// A runnext task that would inherit less than this much of the shared
    /// slice, in microseconds, is preempted to the global queue instead (Go's
    /// sysmon retakes a spent slice within 20 us).
    #[arg(long, global = true, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub min_slice_us: u64,
}

/// scx_gmp: the Go runtime's G-M-P scheduler (per-CPU run queues of 256 with
/// a runnext slot, one global run queue, the 1/61 global check, work stealing
/// of half a victim's queue, 10 ms slices) applied to every thread.
///
/// Needs root and a kernel with sched_ext (CONFIG_SCHED_CLASS_EXT). Stop it
/// with Ctrl-C or SIGTERM: the kernel's default scheduler takes over again.
impl PolicyOpts {
    /// The model's parameters for `nprocs` Ps.
    pub fn params(&self, nprocs: usize, seed: u64) -> Params {
        Params {
            nprocs,
            lrq_cap: self.lrq_cap as usize,
            global_every: self.global_every,
            steal_tries: self.steal_tries,
            slice_ns: self.slice_us * 1000,
            min_slice_ns: self.min_slice_us * 1000,
            runnext_grace_ns: self.runnext_grace_us * 1000,
            seed,
        }
    }
}

#[derive(Debug, Parser)]
#[command(name = "scx_gmp", version, about, long_about)]
pub struct Opts {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,

    #[command(flatten)]
    pub policy: PolicyOpts,

    /// Where the policy runs: `bpf`, in the kernel (the BPF scheduler), or
    /// `user`, in this agent on scx_rustland_core (the model decides, a thin
    /// BPF layer carries the decisions out; the scx_gmp-user binary).
    #[arg(long, value_enum, default_value_t = Mode::Bpf)]
    pub mode: Mode,

    /// Print Go's schedtrace line and the rule counters every SECS seconds
    /// while scheduling.
    #[arg(long, value_name = "SECS")]
    pub stats: Option<f64>,

    /// Do not schedule: print the stats of a running scx_gmp every SECS
    /// seconds.
    #[arg(long, value_name = "SECS")]
    pub monitor: Option<f64>,

    /// Describe every stats field and exit.
    #[arg(long)]
    pub help_stats: bool,

    /// Bytes of the BPF debug dump kept when the scheduler is ejected (0: the
    /// kernel's default).
    #[arg(long, default_value_t = 0)]
    pub exit_dump_len: u32,

    /// Verbose output, including the libbpf log.
    #[arg(short, long)]
    pub verbose: bool,
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
    /// per-CPU busy share, steals and 61-tick takes. The policy options above
    /// apply.
    Sim(SimOpts),
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Workload {
    /// One task spawns --tasks tasks of --task-us each, then joins them.
    Fanout,
    /// A recursive spawn/join tree of --depth, leaves of --task-us.
    Fib,
    /// --pairs ping-pong pairs, --rounds hand-offs of --task-us each.
    Pingpong,
    /// --tasks CPU-bound tasks of --task-us each.
    Spin,
    /// All of the above at once, plus yielding and sleeping tasks.
    Mixed,
}

#[derive(Debug, clap::Args)]
pub struct SimOpts {
    /// The workload to simulate.
    #[arg(long, value_enum, default_value_t = Workload::Fanout)]
    pub workload: Workload,
    /// Simulated CPUs (Go's Ps).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub procs: u32,
    /// Tasks of the fanout and spin workloads.
    #[arg(long, default_value_t = 8000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tasks: u32,
    /// CPU time of each task, leaf or hand-off, in microseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub task_us: u64,
    /// Depth of the fib tree (2^depth leaves, about).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=22))]
    pub depth: u32,
    /// Ping-pong pairs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub pairs: u32,
    /// Hand-offs of each ping-pong pair.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub rounds: u32,
    /// Print a schedtrace line every MS milliseconds of simulated time.
    #[arg(long, value_name = "MS")]
    pub trace_ms: Option<f64>,
    /// Seed of the random steal order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn simulate(policy: &PolicyOpts, o: &SimOpts) -> Result<()> {
    use crate::model::Affinity;
    use crate::sim::{Config, Sim, Work};

    let trace_ns = match o.trace_ms {
        None => None,
        Some(ms) if ms.is_finite() && ms > 0.0 => Some((ms * 1e6).max(1.0) as u64),
        Some(ms) => bail!("--trace-ms {ms}: must be a positive number of milliseconds"),
    };
    let params = policy.params(o.procs as usize, o.seed);
    let ns = o.task_us * 1000;
    let fanout = Work::FanOut {
        n: o.tasks,
        child_ns: ns,
    };
    let fib = Work::Fib {
        depth: o.depth,
        leaf_ns: ns,
    };
    let pairs = (0..o.pairs as usize).map(|i| {
        let w = Work::PingPong {
            tx: 2 * i,
            rx: 2 * i + 1,
            rounds: o.rounds,
            work_ns: ns,
        };
        (w, Affinity::All)
    });
    let all = |w: Work| (w, Affinity::All);
    let root = match o.workload {
        Workload::Fanout => fanout,
        Workload::Fib => fib,
        Workload::Pingpong => Work::Spawner {
            children: pairs.collect(),
        },
        Workload::Spin => Work::Spawner {
            children: (0..o.tasks).map(|_| all(Work::Busy { ns })).collect(),
        },
        Workload::Mixed => {
            let mut children: Vec<_> = pairs.collect();
            children.extend([
                all(fanout),
                all(fib),
                all(Work::Yielder {
                    rounds: 100,
                    work_ns: ns,
                }),
                all(Work::Sleeper {
                    rounds: 100,
                    work_ns: ns,
                    sleep_ns: 10 * ns,
                }),
            ]);
            Work::Spawner { children }
        }
    };
    let mut cfg = Config::new(params);
    cfg.trace_ns = trace_ns;
    let mut sim = Sim::new(cfg);
    sim.spawn_root(root);
    let report = sim.run();
    for line in &report.trace {
        println!("{line}");
    }
    println!("{}", report.summary());
    if !report.lost.is_empty() {
        bail!("{} tasks never finished", report.lost.len());
    }
    Ok(())
}

pub fn check_interval(name: &str, secs: Option<f64>) -> Result<Option<Duration>> {
    match secs {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => bail!("--{name} {s}: the interval must be in (0, 3600] seconds"),
    }
}

/// Refuse early, with one clear line, what would fail deep inside libbpf.
pub fn preflight() -> Result<()> {
    let state = std::fs::read_to_string("/sys/kernel/sched_ext/state").map_err(|_| {
        anyhow!(
            "this kernel has no sched_ext (no /sys/kernel/sched_ext): boot one built with \
             CONFIG_SCHED_CLASS_EXT=y, or try scx_gmp in a VM with vm/run"
        )
    })?;
    if unsafe { libc::geteuid() } != 0 {
        bail!("must run as root to load a BPF scheduler (try: sudo scx_gmp)");
    }
    if state.trim() != "disabled" {
        let ops = std::fs::read_to_string("/sys/kernel/sched_ext/root/ops").unwrap_or_default();
        bail!(
            "another sched_ext scheduler is loaded ({}, state {}): stop it first",
            ops.trim(),
            state.trim()
        );
    }
    Ok(())
}

pub fn init_log(verbose: bool) -> Result<()> {
    let level = if verbose {
        simplelog::LevelFilter::Debug
    } else {
        simplelog::LevelFilter::Info
    };
    let cfg = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Off)
        .set_location_level(simplelog::LevelFilter::Off)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .build();
    simplelog::TermLogger::init(
        level,
        cfg,
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    )?;
    Ok(())
}

/// Print the stats of the running scheduler every `intv` until `shutdown`.
/// `--stats`: print the stats every `intv` from a thread, until `shutdown`.
pub fn spawn_monitor(intv: Duration, shutdown: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        if let Err(e) = monitor(intv, shutdown) {
            log::warn!("stats monitor stopped: {e:#}");
        }
    });
}

pub fn monitor(intv: Duration, shutdown: Arc<AtomicBool>) -> Result<()> {
    scx_utils::monitor_stats::<Metrics>(
        &[],
        intv,
        || shutdown.load(Ordering::Relaxed),
        |m| Ok(m.format(&mut std::io::stdout())?),
    )
}
