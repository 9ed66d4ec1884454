//! What both agents do before they load their BPF side: refuse early, with
//! one clear line, what would fail deep inside libbpf; set up logging; and
//! check the options that clap cannot.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};

/// Refuse early, with one clear line, what would fail deep inside libbpf:
/// no sched_ext, not root, or another sched_ext scheduler loaded.
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

/// Before loading again when the kernel asked for a restart (a CPU went
/// on- or offline during the load; once loaded, both modes take hotplug
/// in place): wait
/// until every CPU hotplug under way has finished, since the kernel asks
/// from inside the hotplug and a load then competes with it. Reading a
/// CPU's `online` file waits for that: the kernel reads it under the CPU
/// device's lock, which a hotplug holds from start to end.
pub fn await_hotplug() {
    for cpu in 0..*scx_utils::NR_CPU_IDS {
        // CPU 0 often has no such file: nothing to wait for there.
        let _ = std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/online"));
    }
}

/// `--stats` and `--monitor` intervals: from 0.1 s to an hour.
pub fn check_interval(name: &str, secs: Option<f64>) -> Result<Option<Duration>> {
    match secs {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.1..=3600.0).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => bail!("--{name} {s}: the interval must be from 0.1 to 3600 seconds"),
    }
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

/// The process exit of either agent: one line on stderr for an error.
pub fn exit_code(result: Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scx_gmp: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
