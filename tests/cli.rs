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
        "--go-handoff",
        "--global-max-wait-ms",
        "--lrq-max-wait-us",
        "--wakeup-preempt-us",
        "--cross-process-preempt-us",
        "--wakep-delay-us",
        "--idle-slice-us",
        "--ready-idle",
        "--ready-idle-slow-pct",
        "--wakep-delay-slow-pct",
        "--go-wakep",
        "--go-ready",
        "--lazy-agent",
        "--go-cross-process",
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
        &["--global-max-wait-ms", "10001"],
        &["--global-max-wait-ms", "-1"],
        &["--wakeup-preempt-us", "1000001"],
        &["--cross-process-preempt-us", "1000001"],
        &["--wakep-delay-us", "1000001"],
        &["--wakep-delay-us", "-5"],
        &["--lrq-max-wait-us", "1000001"],
        &["--idle-slice-us", "1000001"],
        &["--idle-slice-us", "x"],
        &["--ready-idle-slow-pct", "101"],
        &["--wakep-delay-slow-pct", "101"],
    ] {
        let (code, _, err) = scx_gmp(args);
        assert_eq!(code, 2, "{args:?} accepted");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    for (args, line) in [
        (
            &["--stats", "0"][..],
            "--stats 0: the interval must be from 0.1 to 3600 seconds",
        ),
        (
            &["--monitor", "0.01"],
            "--monitor 0.01: the interval must be from 0.1 to 3600 seconds",
        ),
        (
            &["--stats", "nan"],
            "--stats NaN: the interval must be from 0.1 to 3600 seconds",
        ),
        (
            &["sim", "--trace-ms", "0.000001"],
            "--trace-ms 0.000001: must be from 0.01 to 3600000 milliseconds",
        ),
    ] {
        let (code, _, err) = scx_gmp(args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(err.trim(), format!("scx_gmp: error: {line}"), "{args:?}");
    }
    for args in [
        &["--exit-dump-len", "2000000"][..],
        &["--exit-dump-len", "-1"],
        &["--json"],
        &["--mode", "kernel"],
    ] {
        let (code, _, err) = scx_gmp(args);
        assert_eq!(code, 2, "{args:?} accepted: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[test]
fn help_says_what_it_is_and_what_it_needs() {
    let (code, out, _) = scx_gmp(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("scx_gmp: the Go runtime's G-M-P scheduler"),
        "{out}"
    );
    assert!(
        out.contains("Requires root and a kernel with sched_ext"),
        "{out}"
    );
    assert!(out.contains("docs/go-policy.md"), "{out}");
}

#[test]
fn version_names_the_commit_and_the_target() {
    let (code, out, _) = scx_gmp(&["--version"]);
    assert_eq!(code, 0);
    let version = out
        .trim()
        .strip_prefix("scx_gmp ")
        .unwrap_or_else(|| panic!("{out}"));
    let (semver, target) = version.split_once(' ').unwrap_or_else(|| panic!("{out}"));
    assert!(semver.starts_with(env!("CARGO_PKG_VERSION")), "{out}");
    // Built from a git checkout (as tests are), it names the commit.
    if std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.git")).exists() {
        assert!(semver.contains("-g"), "no commit in {out}");
    }
    assert!(
        target.starts_with("x86_64-") || target.contains("linux"),
        "{out}"
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
        "global_tick",
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
    assert!(out.contains("global-tick takes="), "{out}");
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

#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    // `scx_gmp sim ... | head -1`: the reader goes away before the first
    // line; scx_gmp ends by SIGPIPE, as `yes | head` does, with no error
    // and no panic.
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_scx_gmp"))
        .args([
            "sim",
            "--procs",
            "4",
            "--tasks",
            "2000",
            "--trace-ms",
            "0.01",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run scx_gmp");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("cannot wait for scx_gmp");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "stderr: {err}");
    assert!(err.is_empty(), "stderr: {err}");
}
