//! The benchmark suite's quick variant (`bench/run --quick`) boots the VM,
//! runs each workload under EEVDF and both scx_gmp modes, and writes a
//! table. Its numbers are not checked: no benchmark is a pass/fail test.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An empty scratch directory `name` for one test.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run the repository's python3 `script` (a path under bench/) with `args`.
fn python(script: &str, args: &[&OsStr]) -> Output {
    Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
        .args(args)
        .output()
        .expect("cannot run python3")
}

#[test]
fn quick_benchmark_produces_a_table() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bins = Path::new(env!("CARGO_BIN_EXE_scx_gmp")).parent().unwrap();
    // gmp-load is an example, which `cargo test` builds beside scx_gmp.
    assert!(bins.join("examples/gmp-load").exists());
    assert!(bins.join("scx_gmp-user").exists());
    let out = Command::new(repo.join("bench/run"))
        .args(["--quick", "--bin-dir"])
        .arg(bins)
        .current_dir(repo)
        .output()
        .expect("cannot run bench/run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench/run --quick failed:\n{stderr}");

    let table = std::fs::read_to_string(repo.join("target/bench/quick.md")).unwrap();
    assert!(table.starts_with("VM: VM with "), "{table}");
    let header = table
        .lines()
        .find(|l| l.starts_with("| workload |"))
        .unwrap_or_else(|| panic!("no table:\n{table}"));
    for s in ["EEVDF (default)", "scx_gmp", "scx_gmp --mode user"] {
        assert!(header.contains(s), "{header}");
    }
    for (w, m) in [
        ("stress-cpu", "bogo_ops_per_s"),
        ("stress-idle", "bogo_ops_per_s"),
        ("hackbench-pipe", "time_s"),
        ("perf-pipe", "usecs_per_op"),
        ("perf-pipe-idle", "usecs_per_op"),
        ("fanout", "makespan_ms"),
        ("pingpong", "rtt_p99_us"),
        ("fanout", "ctx_switches_per_s"),
        ("fanout", "sched_cpu_ms_per_s"),
        ("request-light", "wake_p99_us"),
        ("request-over", "req_per_s"),
        ("request-over", "sent_per_s"),
        ("request-over", "wakes"),
        ("cyclictest", "lat_p99_us"),
        ("cyclictest-idle", "lat_max_us"),
        ("maplock", "ops_per_s"),
        ("idle", "sched_cpu_ms_per_s"),
        // The whole system's, while it idles: EEVDF has one too.
        ("idle", "ctx_switches_per_s"),
    ] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {w} | {m} |")))
            .unwrap_or_else(|| panic!("no {w} {m} row:\n{table}"));
        // Every scheduler measured (EEVDF has no scheduler CPU to report).
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let measured = cells[3..cells.len() - 1]
            .iter()
            .filter(|c| **c != "-")
            .count();
        let want = if m == "sched_cpu_ms_per_s" { 2 } else { 3 };
        assert_eq!(measured, want, "{row}");
        // A ratio to EEVDF's, unless EEVDF's is 0: the overloaded request
        // load can keep every worker busy from the start under EEVDF, and
        // then it counts no wakeup at all (CI saw `wakes | 0 [0-0]`).
        let eevdf_no_wakes = m == "wakes" && cells[3].split_whitespace().next() == Some("0");
        if m != "sched_cpu_ms_per_s" && !eevdf_no_wakes {
            assert!(row.contains('×'), "no ratio to EEVDF: {row}");
        }
    }
    // BPF mode's wakep() kicks and their slow share, read from its stats
    // around each workload: only scx_gmp in BPF mode has them (the columns
    // are EEVDF, scx_gmp, user mode), and the ping-pong's futex wakeups kick.
    for m in ["kicks_per_s", "kicks_slow_pct"] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| pingpong | {m} |")))
            .unwrap_or_else(|| panic!("no pingpong {m} row:\n{table}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!((cells[3], cells[5]), ("-", "-"), "{row}");
        let v: f64 = cells[4]
            .split_whitespace()
            .next()
            .and_then(|v| v.replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("no BPF-mode value: {row}"));
        match m {
            "kicks_per_s" => assert!(v > 0.0, "{row}"),
            _ => assert!((0.0..=100.0).contains(&v), "{row}"),
        }
    }
    // The agent-overhead comparison of the two modes.
    for w in ["hackbench-pipe", "fanout"] {
        let row = table
            .lines()
            .rev()
            .find(|l| l.starts_with(&format!("| {w} | ")) && l.matches('|').count() == 5)
            .unwrap_or_else(|| panic!("no overhead row for {w}:\n{table}"));
        // Both modes spend CPU on scheduling: a 0 is a measurement failure.
        let cells: Vec<f64> = row
            .split('|')
            .map(str::trim)
            .filter_map(|c| c.replace(',', "").parse().ok())
            .collect();
        assert_eq!(cells.len(), 2, "{row}");
        assert!(cells.iter().all(|&v| v > 0.0), "{row}");
        assert!(row.contains('×'), "{row}");
    }
    let svg = std::fs::read_to_string(repo.join("target/bench/quick.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<rect"), "{svg}");
}

/// Run bench/report.py on `dir`'s results.txt (and died.txt, if any):
/// the Markdown table it writes to `dir`.
fn report(dir: &Path) -> String {
    let out = python(
        "bench/report.py",
        &[dir.join("results.txt").as_os_str(), dir.as_os_str()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(dir.join("latest.md")).unwrap()
}

/// The overloaded request load wakes its workers some 20 times a run: the
/// report says its wakeup percentiles come from few wakeups, with each
/// scheduler's count, and says nothing of a load that woke thousands.
#[test]
fn report_notes_wakeup_percentiles_from_few_wakeups() {
    let dir = scratch_dir("report-few-wakes");
    let mut results = String::new();
    for round in 1..=3 {
        for (sched, over, light) in [("eevdf", 9, 6001), ("gmp", 37, 5990)] {
            results += &format!("{round} {sched} request-over wakes {}\n", over + round);
            results += &format!("{round} {sched} request-over wake_p99_us 3000\n");
            results += &format!("{round} {sched} request-light wakes {light}\n");
        }
    }
    std::fs::write(dir.join("results.txt"), results).unwrap();
    let table = report(&dir);
    assert!(
        table.contains(
            "request-over: its wakeup latencies come from few wakeups a run \
             (median: EEVDF (default) 11, scx_gmp 39)"
        ),
        "{table}"
    );
    assert!(!table.contains("request-light: its wakeup"), "{table}");
}

/// A peer that was ejected in round 2 (bench/guest.sh drops that round's
/// numbers and writes died.txt): the report names it and why, and its
/// column holds round 1 only, while the other schedulers have both rounds.
#[test]
fn report_names_a_peer_that_died() {
    let dir = scratch_dir("report-died");
    let mut results = String::new();
    for round in 1..=2 {
        for (sched, v) in [("eevdf", 10), ("gmp", 8)] {
            results += &format!("{round} {sched} perf-pipe usecs_per_op {}\n", v + round);
        }
    }
    results += "1 bpfland perf-pipe usecs_per_op 20\n";
    std::fs::write(dir.join("results.txt"), results).unwrap();
    std::fs::write(
        dir.join("died.txt"),
        "2 bpfland EXIT: runnable task stall (khugepaged[55] failed to run for 6.848s) on CPU 1\n",
    )
    .unwrap();
    let table = report(&dir);
    assert!(
        table.contains("**scx_bpfland did not survive round 2 of 2** (EXIT: runnable task stall"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("| perf-pipe | usecs_per_op |"))
        .unwrap_or_else(|| panic!("no perf-pipe row:\n{table}"));
    assert!(row.contains("| 20.0 [20.0-20.0] ×1.74 |"), "{row}");
    assert!(row.contains("| 9.5 [9-10.0] ×0.83 |"), "{row}");
}

/// An ftrace text line: `cpu` switches from `prev` (comm, pid) to `next`.
fn switch_line(ts: &str, cpu: u32, prev: (&str, u32), next: (&str, u32)) -> String {
    format!(
        "  {p}-{pp} [{cpu:03}] d..2. {ts}: sched_switch: prev_comm={p} prev_pid={pp} \
         prev_prio=120 prev_state=S ==> next_comm={n} next_pid={np} next_prio=120\n",
        p = prev.0,
        pp = prev.1,
        n = next.0,
        np = next.1
    )
}

/// An ftrace text line: gmp-load thread `pid` is woken.
fn wakeup_line(ts: &str, pid: u32) -> String {
    format!(
        "  gmp-load-11 [000] d..3. {ts}: sched_wakeup: comm=gmp-load pid={pid} prio=120 target_cpu=000\n"
    )
}

/// bench/waits.py finds each wakeup's wait in an ftrace text trace, and
/// names what the CPU ran meanwhile.
#[test]
fn waits_measures_each_wakeup_and_what_ran_meanwhile() {
    let dir = scratch_dir("waits");
    let mut trace = String::from("# tracer: nop\n");
    // pid 10 waits 5 ms while a hog runs, and sleeps; then 0.1 ms with
    // nothing between.
    trace += &wakeup_line("1.000000", 10);
    trace += &switch_line("1.000100", 0, ("gmp-load", 11), ("stress-ng-cpu", 20));
    trace += &switch_line("1.005000", 0, ("stress-ng-cpu", 20), ("gmp-load", 10));
    trace += &switch_line("1.006000", 0, ("gmp-load", 10), ("gmp-load", 11));
    trace += &wakeup_line("2.000000", 10);
    trace += &switch_line("2.000100", 0, ("gmp-load", 11), ("gmp-load", 10));
    std::fs::write(dir.join("trace.txt"), trace).unwrap();
    let out = python("bench/waits.py", &[dir.join("trace.txt").as_os_str()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("wakeups=2 p50=100us"), "{text}");
    assert!(text.contains("max=5000us"), "{text}");
    assert!(text.contains("over 3 ms: 1, 5.0 ms in all"), "{text}");
    assert!(
        text.contains("1 while its CPU ran: stress-ng-cpu"),
        "{text}"
    );
    assert!(
        text.contains("--- pid 10 woken at 1.000000, ran on CPU 0 after 5.0 ms"),
        "{text}"
    );
}

/// bench/waits.py --stranded-ms (the idle-wait VM test's judge) fails a
/// trace in which a task waited beside a CPU that idled for half the wait,
/// and passes one in which the CPUs were busy or the wait was short.
#[test]
fn waits_fails_a_wait_beside_an_idle_cpu() {
    let dir = scratch_dir("waits-stranded");
    let run = |name: &str, trace: &str| {
        let path = dir.join(name);
        std::fs::write(&path, format!("# tracer: nop\n{trace}")).unwrap();
        let out = python(
            "bench/waits.py",
            &[
                path.as_os_str(),
                OsStr::new("--stranded-ms"),
                OsStr::new("50"),
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), text)
    };
    let idle = ("swapper/1", 0);
    // pid 10 waits 100 ms for CPU 0's hog while CPU 1 idles 80 ms of it.
    let beside_idle = [
        switch_line("0.990000", 1, ("gmp-load", 12), idle),
        wakeup_line("1.000000", 10),
        switch_line("1.080000", 1, idle, ("gmp-load", 12)),
        switch_line("1.100000", 0, ("stress-ng-cpu", 20), ("gmp-load", 10)),
    ]
    .concat();
    let (code, text) = run("idle.txt", &beside_idle);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("stranded over 50 ms: 1"), "{text}");
    assert!(
        text.contains("pid 10 woken at 1.000000 waited 100.0 ms (ran on CPU 0) while CPU 1 idled 80.0 ms of it"),
        "{text}"
    );
    // ... and shows it event by event, after the list: a failed test says
    // what the CPUs did meanwhile.
    let (_, shown) = text.split_once("stranded over 50 ms").unwrap();
    assert!(
        shown.contains("--- pid 10 woken at 1.000000, ran on CPU 0 after 100.0 ms")
            && shown.contains("1.080000 [1] swapper/1:0 (S) -> gmp-load:12"),
        "{text}"
    );
    // The same wait with CPU 1 idle for 40 ms of it, under half.
    let (code, text) = run("busy.txt", &beside_idle.replace("1.080000", "1.040000"));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("stranded over 50 ms: 0"), "{text}");
    // CPU 1 idle throughout, but a 30 ms wait.
    let short = [
        switch_line("0.990000", 1, ("gmp-load", 12), idle),
        wakeup_line("1.000000", 10),
        switch_line("1.030000", 0, ("stress-ng-cpu", 20), ("gmp-load", 10)),
    ]
    .concat();
    let (code, text) = run("short.txt", &short);
    assert_eq!(code, Some(0), "{text}");
    // pid 10, still on CPU 1 as it goes to sleep, is woken (the wakeup
    // finds it running), sleeps, and CPU 1 idles 100 ms until the next
    // wakeup, which runs at once: one wakeup, 0.1 ms, nothing stranded.
    let on_cpu = [
        switch_line("0.990000", 1, idle, ("gmp-load", 10)),
        wakeup_line("1.000000", 10),
        switch_line("1.001000", 1, ("gmp-load", 10), idle),
        wakeup_line("1.100000", 10),
        switch_line("1.100100", 1, idle, ("gmp-load", 10)),
    ]
    .concat();
    let (code, text) = run("oncpu.txt", &on_cpu);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("wakeups=1 p50=100us"), "{text}");
}

/// bench/waits.py --batch counts, for each wakeup, the time within its
/// wait that the CPU which ran the task ran the batch job, and with
/// --batch-max-ms fails a trace with one delayed longer than that.
#[test]
fn waits_measures_the_delay_a_batch_job_caused() {
    let dir = scratch_dir("waits-batch");
    let path = dir.join("batch.txt");
    let idle = ("swapper/1", 0);
    // pid 10, woken at 1.000, waits 14 ms on CPU 0: the batch job runs
    // there 1.000-1.012 (12 ms of the wait), then a normal task 2 ms. pid
    // 11, woken at 2.000, waits 3 ms on CPU 1, which idles: no delay.
    let trace = [
        switch_line("0.995000", 0, ("gmp-load", 12), ("stress-ng-cpu", 20)),
        wakeup_line("1.000000", 10),
        switch_line("1.012000", 0, ("stress-ng-cpu", 20), ("kworker/0:1", 30)),
        switch_line("1.014000", 0, ("kworker/0:1", 30), ("gmp-load", 10)),
        switch_line("1.990000", 1, ("gmp-load", 12), idle),
        wakeup_line("2.000000", 11),
        switch_line("2.003000", 1, idle, ("gmp-load", 11)),
    ]
    .concat();
    std::fs::write(&path, format!("# tracer: nop\n{trace}")).unwrap();
    let run = |max: &str| {
        let mut args = vec![
            path.as_os_str(),
            OsStr::new("--batch"),
            OsStr::new("stress-ng"),
        ];
        if !max.is_empty() {
            args.extend([OsStr::new("--batch-max-ms"), OsStr::new(max)]);
        }
        let out = python("bench/waits.py", &args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = run("");
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("delayed by stress-ng*: 1 of 2 wakeups, p99=12000us max=12000us (pid 10 woken at 1.000000, waited 14.0 ms, ran on CPU 0)"),
        "{text}"
    );
    let (code, text) = run("10");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("delayed by stress-ng* over 10 ms: 1"),
        "{text}"
    );
    let (code, text) = run("13");
    assert_eq!(code, Some(0), "{text}");
}

/// bench/waits.py --idle-beside sums the time CPUs idled while a task of
/// that name was preempted and not yet back on a CPU, and not the time
/// they idled while every such task ran or slept.
#[test]
fn waits_measures_idle_cpus_beside_a_waiting_hog() {
    let dir = scratch_dir("waits-idle-beside");
    let path = dir.join("idle.txt");
    let idle = ("swapper/1", 0);
    let preempted = |line: String| line.replace("prev_state=S", "prev_state=R");
    // Hog 21 is preempted on CPU 1, which idles 10 ms until hog 20 takes
    // its place on CPU 0 (20 preempted), and 10 ms more until CPU 1 runs
    // 20: 20 ms idle beside a waiting hog. Then 20 sleeps and CPU 1 idles
    // 10 ms beside no waiting hog. 1.01 s in all.
    let trace = [
        switch_line("0.990000", 0, ("gmp-load", 11), ("stress-ng-cpu", 20)),
        preempted(switch_line("1.000000", 1, ("stress-ng-cpu", 21), idle)),
        preempted(switch_line(
            "1.010000",
            0,
            ("stress-ng-cpu", 20),
            ("stress-ng-cpu", 21),
        )),
        switch_line("1.020000", 1, idle, ("stress-ng-cpu", 20)),
        switch_line("1.990000", 1, ("stress-ng-cpu", 20), idle),
        wakeup_line("1.995000", 12),
        switch_line("2.000000", 1, idle, ("gmp-load", 12)),
    ]
    .concat();
    std::fs::write(&path, format!("# tracer: nop\n{trace}")).unwrap();
    let out = python(
        "bench/waits.py",
        &[
            path.as_os_str(),
            OsStr::new("--idle-beside"),
            OsStr::new("stress-ng"),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("idle beside a waiting stress-ng*: 20 ms per s over 1.01 s"),
        "{text}"
    );
}

/// bench/run and bench/batch-delay explain every option on --help (and
/// -h), on stdout, with exit code 0, before they build or boot anything.
#[test]
fn bench_scripts_explain_their_options_on_help() {
    for (script, options) in [
        (
            "bench/run",
            &[
                "--quick",
                "--cpus",
                "--reps",
                "--no-peers",
                "--bin-dir",
                "--base-dir",
                "--only",
                "--scheds",
            ][..],
        ),
        (
            "bench/batch-delay",
            &["--cpus", "--rounds", "--scheds", "--bin-dir", "--base-dir"],
        ),
    ] {
        for flag in ["--help", "-h"] {
            let out = run_script(script, &[flag]);
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{script} {flag}: {text}");
            assert!(text.starts_with(script), "{script} {flag}: {text}");
            for o in options {
                // Each option has a line of its own that explains it.
                assert!(
                    text.lines().any(|l| l
                        .strip_prefix(o)
                        .is_some_and(|rest| rest.starts_with([':', ' ']) && rest.contains(':'))),
                    "{script} {flag} does not explain {o}:\n{text}"
                );
            }
        }
    }
}

/// Runs the repository's `script` with `args` and returns what it did.
fn run_script(script: &str, args: &[&str]) -> std::process::Output {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Command::new(repo.join(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"))
}

/// Runs `script` with `args` and asserts that it refused them: exit code 2
/// and one line, "SCRIPT: error: ...", that contains `want`.
fn assert_refuses(script: &str, args: &[&str], want: &str) {
    let out = run_script(script, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{script} {args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{script} {args:?}: {stderr}");
    assert!(
        lines[0].starts_with(&format!("{script}: error: ")) && lines[0].contains(want),
        "{script} {args:?}: {stderr}"
    );
}

/// bench/run refuses a scheduler from another build (base, base-user or a
/// variant such as base+slice-us=100) without --base-dir, before it builds
/// or boots anything.
#[test]
fn bench_run_refuses_a_base_scheduler_without_base_dir() {
    for scheds in [
        "eevdf,base",
        "gmp,base-user",
        "base+slice-us=100",
        "gmp,base-user+slice-us=100",
    ] {
        assert_refuses(
            "bench/run",
            &["--no-peers", "--scheds", scheds],
            "base and base-user need --base-dir",
        );
    }
}

/// bench/batch-delay refuses bad input in one line, with exit code 2, before
/// it builds or boots anything.
#[test]
fn batch_delay_refuses_bad_options_in_one_line() {
    for (args, want) in [
        (&["--rounds", "0"][..], "--rounds must be a positive number"),
        (&["--cpus", "two"], "--cpus must be a positive number"),
        (&["--scheds", "eevdf;gmp"], "--scheds takes scheduler names"),
        (
            &["--scheds", "gmp,base"],
            "base and base-user need --base-dir",
        ),
        (
            &["--scheds", "gmp,base+slice-us=100"],
            "base and base-user need --base-dir",
        ),
        (
            &["--base-dir", "/nonexistent"],
            "--base-dir /nonexistent is not a directory",
        ),
        (&["--frob"], "unknown option '--frob'"),
    ] {
        assert_refuses("bench/batch-delay", args, want);
    }
}
