//! The agent's command line on the host, which has no sched_ext.

use std::process::Command;

fn scx_gmp(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_scx_gmp"))
        .args(args)
        .output()
        .expect("cannot run scx_gmp");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_explains_every_knob() {
    let (code, out, _) = scx_gmp(&["--help"]);
    assert_eq!(code, 0);
    for knob in [
        "--slice-us",
        "--lrq-cap",
        "--global-every",
        "--steal-tries",
        "--runnext-grace-us",
        "--min-slice-us",
        "--stats",
        "--monitor",
        "--help-stats",
        "--exit-dump-len",
        "--verbose",
    ] {
        assert!(out.contains(knob), "--help does not explain {knob}");
    }
    assert!(out.contains("[default: 10000]") && out.contains("[default: 61]"));
}

#[test]
fn out_of_range_knobs_are_refused() {
    for args in [
        &["--lrq-cap", "1"][..],
        &["--slice-us", "0"],
        &["--steal-tries", "0"],
        &["--global-every", "x"],
    ] {
        let (code, _, err) = scx_gmp(args);
        assert_eq!(code, 2, "{args:?} accepted");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    let (code, _, err) = scx_gmp(&["--stats", "0"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "scx_gmp: error: --stats 0: the interval must be in (0, 3600] seconds"
    );
}

#[test]
fn kernel_without_sched_ext_is_one_clear_line() {
    if std::path::Path::new("/sys/kernel/sched_ext").exists() {
        // This host has sched_ext: the VM tests cover loading.
        return;
    }
    let (code, _, err) = scx_gmp(&[]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("scx_gmp: error: this kernel has no sched_ext"));
}

#[test]
fn help_stats_describes_the_schedtrace_fields() {
    let (code, out, _) = scx_gmp(&["--help-stats"]);
    assert_eq!(code, 0);
    for f in [
        "gomaxprocs",
        "runqueue",
        "global_61",
        "stolen_tasks",
        "runnext_hit",
    ] {
        assert!(out.contains(f), "--help-stats lacks {f}:\n{out}");
    }
}

#[test]
fn sim_prints_schedtrace_and_a_summary() {
    let (code, out, err) = scx_gmp(&["sim", "--procs", "4", "--tasks", "2000", "--trace-ms", "10"]);
    assert_eq!(code, 0, "{err}");
    let trace: Vec<&str> = out.lines().filter(|l| l.starts_with("SCHED ")).collect();
    assert!(trace.len() >= 4, "{out}");
    assert!(
        trace[0].starts_with("SCHED 10ms: gomaxprocs=4 idleprocs="),
        "{out}"
    );
    assert!(
        out.contains("makespan_ms=") && out.contains("tasks=2001 lost=0"),
        "{out}"
    );
    for p in 0..4 {
        assert!(out.contains(&format!("P{p}: busy=")), "{out}");
    }
    assert!(out.contains("61-tick takes="), "{out}");
}

#[test]
fn sim_takes_the_policy_knobs_and_refuses_bad_ones() {
    let (code, out, _) = scx_gmp(&["sim", "--lrq-cap", "16", "--tasks", "500"]);
    assert_eq!(code, 0);
    let over: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("steals: "))
        .and_then(|l| scx_gmp::stats::field(l, "", "overflows"))
        .unwrap();
    assert!(
        over > 0,
        "a 16-slot LRQ must overflow with 500 tasks: {out}"
    );
    let (code, _, err) = scx_gmp(&["sim", "--procs", "0"]);
    assert_eq!(code, 2, "{err}");
}
