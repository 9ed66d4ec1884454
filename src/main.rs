//! `scx_gmp`: load the Go-policy BPF scheduler, report its stats in Go's
//! schedtrace format, and exit cleanly; or run the policy in the simulator;
//! or watch a running instance; or, with `--mode user`, supervise the
//! user-space mode (the `scx_gmp-user` binary, built from `user/`).

mod bpf;
mod bpf_skel;

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;

use scx_gmp::cli::{Cmd, Mode, Opts, RESTART_EXIT};
use scx_gmp::load::{await_hotplug, check_interval, exit_code, init_log, preflight};
use scx_gmp::{check, sim, stats};

/// scx_gmp's arguments less `--mode`: what scx_gmp-user takes.
fn user_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        if a == "--mode" {
            args.next();
        } else if !a.to_string_lossy().starts_with("--mode=") {
            out.push(a);
        }
    }
    out
}

/// `--mode user`: run `scx_gmp-user` (beside this binary) with the same
/// options, forward SIGINT/SIGTERM to it, and start a fresh one when it exits
/// asking for a restart. It is a second binary, and a child process, because
/// scx_rustland_core brings a global allocator (a locked 64 MiB arena), its
/// own SIGINT/SIGTERM handler, and a seccomp filter against mmap() that no
/// process can drop, so that one process can load its BPF side only once.
/// The child gets SIGTERM if this process dies, even by SIGKILL.
fn supervise_user_mode() -> Result<()> {
    let me = std::env::current_exe().context("cannot find this executable")?;
    let user = me.with_file_name("scx_gmp-user");
    if !user.exists() {
        bail!(
            "--mode user needs scx_gmp-user beside {} (install it with `cargo install --path user`)",
            me.display()
        );
    }
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
    let parent = std::process::id() as i32;
    loop {
        let mut cmd = std::process::Command::new(&user);
        cmd.args(user_args(std::env::args_os().skip(1)));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                if libc::getppid() != parent {
                    libc::_exit(1); // the parent died before prctl
                }
                Ok(())
            });
        }
        let mut proc = cmd
            .spawn()
            .with_context(|| format!("cannot run {}", user.display()))?;
        child.store(proc.id() as i32, Ordering::SeqCst);
        let status = proc.wait()?;
        child.store(0, Ordering::SeqCst);
        match status.code() {
            Some(RESTART_EXIT) if !stop.load(Ordering::SeqCst) => {
                log::info!("the kernel asked for a restart: starting scx_gmp-user again");
                await_hotplug();
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

/// For the commands that only print (`sim`, `check`, `--monitor`): a
/// reader that goes away ends the process quietly, as it ends `yes | head`
/// (Rust ignores SIGPIPE, and a print to a closed pipe would panic).
fn die_on_sigpipe() {
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn run(opts: Opts) -> Result<()> {
    if opts.cmd.is_some() || opts.monitor.is_some() {
        die_on_sigpipe();
    }
    match &opts.cmd {
        Some(Cmd::Sim(o)) => return sim::simulate(&opts.policy, o),
        Some(Cmd::Check { file }) => return check::run(file),
        None => {}
    }
    if opts.help_stats {
        return stats::describe();
    }
    let stats = check_interval("stats", opts.agent.stats)?;
    let mon = check_interval("monitor", opts.monitor)?;
    init_log(opts.agent.verbose)?;
    if opts.mode == Mode::User && mon.is_none() {
        if opts.trace.is_some() {
            bail!("--trace records the BPF side's decisions: it works in --mode bpf only");
        }
        return supervise_user_mode();
    }

    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("cannot set the SIGINT/SIGTERM handler")?;
    if let Some(intv) = mon {
        return stats::monitor(intv, opts.json, shutdown);
    }
    preflight()?;
    if let Some(intv) = stats {
        stats::spawn_monitor(intv, shutdown.clone());
    }
    bpf::run(&opts.policy, &opts.agent, opts.trace.as_deref(), shutdown)
}

fn main() -> std::process::ExitCode {
    exit_code(run(Opts::parse()))
}

#[cfg(test)]
mod tests {
    use super::user_args;

    #[test]
    fn user_mode_gets_every_option_but_mode() {
        let args = [
            "--mode",
            "user",
            "--slice-us",
            "500",
            "--mode=user",
            "--stats",
            "1",
            "-v",
        ];
        let got = user_args(args.iter().map(|s| s.into()));
        assert_eq!(got, ["--slice-us", "500", "--stats", "1", "-v"]);
    }
}
