//! `scx_gmp`: load the Go-policy BPF scheduler, report its stats in Go's
//! schedtrace format, and exit cleanly; or run the policy in the simulator.

mod bpf;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;

use scx_gmp::stats::Metrics;

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
#[derive(Debug, Parser)]
#[command(name = "scx_gmp", version, about, long_about)]
struct Opts {
    #[command(subcommand)]
    cmd: Option<Cmd>,

    #[command(flatten)]
    policy: PolicyOpts,

    /// Print Go's schedtrace line and the rule counters every SECS seconds
    /// while scheduling.
    #[arg(long, value_name = "SECS")]
    stats: Option<f64>,

    /// Do not schedule: print the stats of a running scx_gmp every SECS
    /// seconds.
    #[arg(long, value_name = "SECS")]
    monitor: Option<f64>,

    /// Describe every stats field and exit.
    #[arg(long)]
    help_stats: bool,

    /// Bytes of the BPF debug dump kept when the scheduler is ejected (0: the
    /// kernel's default).
    #[arg(long, default_value_t = 0)]
    exit_dump_len: u32,

    /// Verbose output, including the libbpf log.
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// Run the policy in the deterministic simulator instead of the kernel
    /// (no root, no sched_ext needed): Go's schedtrace lines, then makespan,
    /// per-CPU busy share, steals and 61-tick takes. The policy options above
    /// apply.
    Sim(SimOpts),
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Workload {
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
struct SimOpts {
    /// The workload to simulate.
    #[arg(long, value_enum, default_value_t = Workload::Fanout)]
    workload: Workload,
    /// Simulated CPUs (Go's Ps).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=512))]
    procs: u32,
    /// Tasks of the fanout and spin workloads.
    #[arg(long, default_value_t = 8000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    tasks: u32,
    /// CPU time of each task, leaf or hand-off, in microseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    task_us: u64,
    /// Depth of the fib tree (2^depth leaves, about).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=22))]
    depth: u32,
    /// Ping-pong pairs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pairs: u32,
    /// Hand-offs of each ping-pong pair.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    rounds: u32,
    /// Print a schedtrace line every MS milliseconds of simulated time.
    #[arg(long, value_name = "MS")]
    trace_ms: Option<f64>,
    /// Seed of the random steal order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn simulate(policy: &PolicyOpts, o: &SimOpts) -> Result<()> {
    use scx_gmp::model::{Affinity, Params};
    use scx_gmp::sim::{Config, Sim, Work};

    let trace_ns = match o.trace_ms {
        None => None,
        Some(ms) if ms.is_finite() && ms > 0.0 => Some((ms * 1e6).max(1.0) as u64),
        Some(ms) => bail!("--trace-ms {ms}: must be a positive number of milliseconds"),
    };
    let params = Params {
        nprocs: o.procs as usize,
        lrq_cap: policy.lrq_cap as usize,
        global_every: policy.global_every,
        steal_tries: policy.steal_tries,
        slice_ns: policy.slice_us * 1000,
        min_slice_ns: policy.min_slice_us * 1000,
        runnext_grace_ns: policy.runnext_grace_us * 1000,
        seed: o.seed,
    };
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

fn check_interval(name: &str, secs: Option<f64>) -> Result<Option<Duration>> {
    match secs {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => bail!("--{name} {s}: the interval must be in (0, 3600] seconds"),
    }
}

/// Refuse early, with one clear line, what would fail deep inside libbpf.
fn preflight() -> Result<()> {
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

fn init_log(verbose: bool) -> Result<()> {
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
fn monitor(intv: Duration, shutdown: Arc<AtomicBool>) -> Result<()> {
    scx_utils::monitor_stats::<Metrics>(
        &[],
        intv,
        || shutdown.load(Ordering::Relaxed),
        |m| Ok(m.format(&mut std::io::stdout())?),
    )
}

fn run(opts: Opts) -> Result<()> {
    if let Some(Cmd::Sim(sim)) = &opts.cmd {
        return simulate(&opts.policy, sim);
    }
    if opts.help_stats {
        bpf::describe_stats()?;
        return Ok(());
    }
    let stats = check_interval("stats", opts.stats)?;
    let mon = check_interval("monitor", opts.monitor)?;
    init_log(opts.verbose)?;

    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("cannot set the SIGINT/SIGTERM handler")?;

    if let Some(intv) = mon {
        return monitor(intv, shutdown);
    }
    preflight()?;
    if let Some(intv) = stats {
        let flag = shutdown.clone();
        std::thread::spawn(move || {
            if let Err(e) = monitor(intv, flag) {
                log::warn!("stats monitor stopped: {e:#}");
            }
        });
    }
    bpf::run(&opts.policy, opts.exit_dump_len, opts.verbose, shutdown)
}

fn main() -> ExitCode {
    match run(Opts::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scx_gmp: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
