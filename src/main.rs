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
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=1_000_000))]
    pub slice_us: u64,

    /// Capacity of each CPU's local run queue (Go: 256). A put into a full
    /// queue moves half of it, plus the task, to the global queue.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=65_536))]
    pub lrq_cap: u32,

    /// Every Nth schedtick a CPU takes one task from the global queue before
    /// its own (Go: 61). 0 disables the check.
    #[arg(long, default_value_t = 61, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub global_every: u32,

    /// Rounds of work stealing over all other CPUs before a CPU idles (Go's
    /// stealTries: 4). A victim's runnext is only taken in the last round.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub steal_tries: u32,

    /// A victim's runnext task may be stolen only after it waited this long,
    /// in microseconds (Go's runqgrab sleeps 3 us).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub runnext_grace_us: u64,

    /// Smallest slice a runnext task inheriting an almost-spent slice gets,
    /// in microseconds (Go's sysmon polls at 20 us at the fastest).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
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
