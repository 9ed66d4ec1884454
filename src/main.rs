//! `scx_gmp`: load the Go-policy BPF scheduler, report its stats in Go's
//! schedtrace format, and exit cleanly; or run the policy in the simulator;
//! or, with `--mode user`, hand over to the user-space mode (scx_gmp-user).

mod bpf;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;

use scx_gmp::cli::{
    check_interval, init_log, monitor, preflight, simulate, spawn_monitor, Cmd, Mode, Opts,
};

/// Run `scx_gmp-user` (beside this binary) with the same arguments. It is a
/// second binary because scx_rustland_core brings a global allocator (a
/// locked 64 MiB arena) and its own SIGINT/SIGTERM handler, which the BPF
/// mode and the simulator should not run under.
fn exec_user_mode() -> Result<()> {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().context("cannot find this executable")?;
    let user = me.with_file_name("scx_gmp-user");
    let err = std::process::Command::new(&user)
        .args(std::env::args_os().skip(1))
        .exec();
    Err(err).with_context(|| format!("cannot run {}", user.display()))
}

fn run(opts: Opts) -> Result<()> {
    if let Some(Cmd::Sim(sim)) = &opts.cmd {
        return simulate(&opts.policy, sim);
    }
    if opts.help_stats {
        return scx_gmp::stats::describe();
    }
    if opts.mode == Mode::User {
        return exec_user_mode();
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
        spawn_monitor(intv, shutdown.clone());
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
