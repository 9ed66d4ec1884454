//! `scx_gmp`: load the Go-policy BPF scheduler, report its stats in Go's
//! schedtrace format, and exit cleanly; or run the policy in the simulator;
//! or, with `--mode user`, hand over to the user-space mode (scx_gmp-user).

mod bpf;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;

use scx_gmp::cli::{
    check_interval, init_log, monitor, preflight, simulate, spawn_monitor, Cmd, Mode, Opts,
    RESTART_EXIT,
};

/// `--mode user`: run `scx_gmp-user` (beside this binary) with the same
/// arguments, forward SIGINT/SIGTERM to it, and start a fresh one when it
/// exits asking for a restart. It is a second binary, and a child process,
/// because scx_rustland_core brings a global allocator (a locked 64 MiB
/// arena), its own SIGINT/SIGTERM handler, and a seccomp filter against
/// mmap() that no process can drop, so that one process can load its BPF
/// side only once.
fn run_user_mode() -> Result<()> {
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::AtomicI32;

    let me = std::env::current_exe().context("cannot find this executable")?;
    let user = me.with_file_name("scx_gmp-user");
    let child = Arc::new(AtomicI32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (child.clone(), stop.clone());
    ctrlc::set_handler(move || {
        s.store(true, Ordering::SeqCst);
        let pid = c.load(Ordering::SeqCst);
        if pid > 0 {
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    })
    .context("cannot set the SIGINT/SIGTERM handler")?;
    loop {
        let mut proc = std::process::Command::new(&user)
            .args(std::env::args_os().skip(1))
            .spawn()
            .with_context(|| format!("cannot run {}", user.display()))?;
        child.store(proc.id() as i32, Ordering::SeqCst);
        let status = proc.wait()?;
        child.store(0, Ordering::SeqCst);
        match status.code() {
            Some(RESTART_EXIT) if !stop.load(Ordering::SeqCst) => {
                log::info!("the kernel asked for a restart: starting scx_gmp-user again");
            }
            Some(0) | Some(RESTART_EXIT) => return Ok(()),
            // scx_gmp-user said why, in one line.
            Some(code) => std::process::exit(code),
            None => bail!(
                "scx_gmp-user was killed by signal {}",
                status.signal().unwrap_or(0)
            ),
        }
    }
}

fn run(opts: Opts) -> Result<()> {
    if let Some(Cmd::Sim(sim)) = &opts.cmd {
        return simulate(&opts.policy, sim);
    }
    if opts.help_stats {
        return scx_gmp::stats::describe();
    }
    let stats = check_interval("stats", opts.stats)?;
    let mon = check_interval("monitor", opts.monitor)?;
    init_log(opts.verbose)?;
    if opts.mode == Mode::User && mon.is_none() {
        return run_user_mode();
    }

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
