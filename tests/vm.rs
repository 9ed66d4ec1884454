//! End-to-end tests in the sched_ext VM, through `vm/run`.
//!
//! They need what `vm/setup` installs (the README's test command runs it);
//! without it they fail and say so. The boots are serialised: two TCG guests
//! at once would only slow each other down on a 2-core machine.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use scx_gmp::stats::Metrics;

static VM: Mutex<()> = Mutex::new(());

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn guest_script(name: &str) -> String {
    repo().join("tests/guest").join(name).display().to_string()
}

fn vm_run_env(env: &[(&str, &str)], opts: &[&str], cmd: &[&str]) -> Run {
    let _one_at_a_time = VM.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(repo().join("vm/run"))
        .envs(env.iter().copied())
        .args(opts)
        .arg("--")
        .args(cmd)
        .output()
        .expect("cannot execute vm/run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: command_output(&stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The command's output in vm/run's stdout: what follows the last
/// "vm/run: ----" line, which vm/run prints before running the command
/// again on a new boot (the first one died).
fn command_output(stdout: &str) -> &str {
    match stdout.rfind("vm/run: ----") {
        Some(at) => stdout[at..].split_once('\n').map_or("", |(_, rest)| rest),
        None => stdout,
    }
}

/// vm/run, which must have booted the guest and brought CMD's exit back.
fn vm_run(opts: &[&str], cmd: &[&str]) -> Run {
    let run = vm_run_env(&[], opts, cmd);
    assert!(
        run.code != 125 && run.code != 124,
        "the VM did not run the command (exit {}: 125 harness error, 124 guest died or timed out).\nstderr:\n{}",
        run.code,
        run.stderr
    );
    run
}

/// The value of the first `key=value` token on any line.
fn kv<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("{key}=");
    text.split_whitespace()
        .find_map(|tok| tok.strip_prefix(pat.as_str()))
}

/// The scheduler's stats record that a guest script printed as
/// `stats_json=...` (`scx_gmp --monitor --json`, see tests/guest/lib.sh).
fn stats(text: &str) -> Metrics {
    stats_named(text, "stats_json")
}

/// The stats record a guest script printed as `NAME=...` (`stats_json NAME`).
fn stats_named(text: &str, name: &str) -> Metrics {
    let prefix = format!("{name}=");
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {prefix} line in:\n{text}"));
    serde_json::from_str(json).unwrap_or_else(|e| panic!("bad stats record ({e}) in:\n{text}"))
}

/// The guest's sched_ext log lines (`dmesg: ...`): scx_gmp was enabled, and
/// every unload was one of `unloads` (never an ejection), with no error.
fn assert_not_ejected(out: &str, unloads: &[&str]) {
    let dmesg: Vec<&str> = out.lines().filter(|l| l.starts_with("dmesg:")).collect();
    assert!(dmesg.iter().any(|l| l.contains("enabled")), "{out}");
    assert!(
        dmesg
            .iter()
            .all(|l| !l.contains("disabled") || unloads.iter().any(|u| l.contains(u))),
        "scx_gmp was ejected: {dmesg:#?}"
    );
    assert!(
        !dmesg.iter().any(|l| l.contains("error")),
        "sched_ext errors: {dmesg:#?}"
    );
}

/// An example's binary (examples/NAME.rs), built beside the tests.
fn example(name: &str) -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_scx_gmp"));
    let path = bin.parent().unwrap().join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built: run `cargo test`, which builds the examples",
        path.display()
    );
    path.display().to_string()
}

/// gmp-load, the workloads' binary.
fn gmp_load() -> String {
    example("gmp-load")
}

/// The `lost:` lines of gmp-watch, the lost-task watcher, in a guest's output.
fn lost_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with("lost: ")).collect()
}

// ---- the harness (vm/run) -------------------------------------------------

#[test]
fn harness_output_of_a_rerun_is_the_last_boots() {
    assert_eq!(command_output("a=1\nb=2\n"), "a=1\nb=2\n");
    let rerun = "a=1\nvm/run: ---- the output above is from a boot that died; \
                 the command runs again ----\na=2\n";
    assert_eq!(command_output(rerun), "a=2\n");
    assert_eq!(kv(command_output(rerun), "a"), Some("2"));
}

#[test]
fn harness_boots_sched_ext_kernel_with_requested_cpus() {
    let r = vm_run(
        &["--cpus", "3"],
        &["sh", "-c", "cat /sys/kernel/sched_ext/state; nproc"],
    );
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines, ["disabled", "3"], "stdout: {}", r.stdout);
    assert!(
        r.stderr.contains("with TCG") || r.stderr.contains("with KVM"),
        "vm/run must say which accelerator it used: {}",
        r.stderr
    );
}

#[test]
fn harness_returns_command_exit_codes() {
    let r = vm_run(&[], &["false"]);
    assert_eq!(r.code, 1, "stderr: {}", r.stderr);
    let r = vm_run(&[], &["sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(r.code, 7, "stderr: {}", r.stderr);
    assert_eq!(r.stdout.trim(), "out");
    assert!(r.stderr.contains("err"));
}

#[test]
fn harness_missing_kernel_is_one_clear_line() {
    let r = vm_run_env(&[("GMP_KERNEL", "/nonexistent/vmlinuz")], &[], &["true"]);
    assert_eq!(r.code, 125);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr: {}", r.stderr);
    assert!(lines[0].contains("no kernel image at /nonexistent/vmlinuz"));
}

#[test]
fn harness_refuses_bad_settings_in_one_line() {
    for (env, opts, want) in [
        (
            ("GMP_BOOT_TIMEOUT", "soon"),
            &[][..],
            "GMP_BOOT_TIMEOUT='soon' is not a positive number",
        ),
        (
            ("GMP_VM_TIMEOUT", "0"),
            &[],
            "GMP_VM_TIMEOUT='0' is not a positive number",
        ),
        (("GMP_ACCEL", "xen"), &[], "GMP_ACCEL='xen': use kvm or tcg"),
        (
            ("GMP_X", ""),
            &["--cpus", "two"],
            "--cpus 'two' is not a positive number",
        ),
    ] {
        let r = vm_run_env(&[env], opts, &["true"]);
        assert_eq!(r.code, 125, "{env:?} {opts:?}: {}", r.stderr);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{env:?}: {}", r.stderr);
        assert!(lines[0].contains(want), "{env:?}: {}", r.stderr);
    }
}

#[test]
fn harness_reports_a_guest_kernel_panic() {
    let r = vm_run_env(
        &[],
        &[],
        &["sh", "-c", "echo c > /proc/sysrq-trigger; sleep 600"],
    );
    assert_eq!(r.code, 124, "stderr: {}", r.stderr);
    assert!(
        r.stderr
            .contains("vm/run: error: the guest kernel panicked")
            && r.stderr.contains("sysrq triggered crash"),
        "stderr: {}",
        r.stderr
    );
}

// ---- the scheduler, in each mode -----------------------------------------

/// Arguments that select a mode ("" is the BPF mode).
const BPF: &str = "";
const USER: &str = "--mode user";

/// Run tests/guest/SCRIPT in the VM with scx_gmp, then `args`.
fn guest(opts: &[&str], script: &str, args: &[&str]) -> Run {
    if args.iter().any(|a| a.contains(USER)) {
        assert_user_mode_built();
    }
    let path = guest_script(script);
    let mut cmd = vec!["bash", &path, env!("CARGO_BIN_EXE_scx_gmp")];
    cmd.extend_from_slice(args);
    vm_run(opts, &cmd)
}

/// scx_gmp-user is another package's binary: `cargo test --test vm` builds
/// scx_gmp's binaries only, and would let the user-mode tests run an old
/// scx_gmp-user. So they refuse one older than its sources.
fn assert_user_mode_built() {
    let modified = |p: &std::path::Path| p.metadata().and_then(|m| m.modified()).ok();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_scx_gmp")).with_file_name("scx_gmp-user");
    let built = modified(&bin).unwrap_or_else(|| panic!("{} is not built", bin.display()));
    let newest = ["user/src", "user/bpf", "src", "bpf"]
        .iter()
        .filter_map(|d| std::fs::read_dir(repo().join(d)).ok())
        .flatten()
        .filter_map(|e| modified(&e.ok()?.path()))
        .max()
        .unwrap();
    assert!(
        built >= newest,
        "{} is older than its sources: run `cargo build -p scx_gmp-user` (or plain `cargo test`) first",
        bin.display()
    );
}

/// The per-CPU busy shares a gmp-load line reports (`share=a,b,...`).
fn shares(text: &str) -> Vec<f64> {
    kv(text, "share")
        .unwrap_or_else(|| panic!("no share= in:\n{text}"))
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect()
}

fn lifecycle(mode: &str) {
    let r = guest(&[], "lifecycle.sh", &[mode]);
    let out = &r.stdout;
    assert_eq!(r.code, 0, "stdout:\n{out}\nstderr:\n{}", r.stderr);
    assert_eq!(kv(out, "before"), Some("disabled"), "{out}");
    assert_eq!(kv(out, "state"), Some("enabled"), "{out}");
    assert!(
        kv(out, "ops").is_some_and(|o| o.starts_with("gmp")),
        "{out}"
    );
    assert_eq!(kv(out, "gmp_exit"), Some("0"), "{out}");
    assert_eq!(kv(out, "after"), Some("disabled"), "{out}");
    // Loading froze no task: a sleeper woke within a second throughout
    // (user mode, locking its memory after attaching, kept every task off
    // the CPUs for up to 3 s at each start: README, "When things go wrong").
    let gap = num(out, "start_gap_ms");
    eprintln!("lifecycle {mode:?}: longest wait of a sleeper while loading: {gap} ms");
    assert!(
        gap < 1000,
        "a sleeper waited {gap} ms while it loaded:\n{out}"
    );
    // Refusals: one clear line and a non-zero exit.
    assert_eq!(kv(out, "nonroot_exit"), Some("1"), "{out}");
    assert!(out.contains("scx_gmp: error: must run as root"), "{out}");
    assert_eq!(kv(out, "second_exit"), Some("1"), "{out}");
    assert!(
        out.contains("scx_gmp: error: another sched_ext scheduler is loaded"),
        "{out}"
    );
    assert_eq!(kv(out, "badarg_exit"), Some("2"), "{out}");
    assert!(out.contains("--slice-us"), "{out}");
    // --monitor attaches to the running instance.
    let lines: u32 = kv(out, "monitor_lines").unwrap().parse().unwrap();
    assert!(
        lines >= 2,
        "--monitor printed {lines} schedtrace lines:\n{out}"
    );
    // CPU hotplug: both modes resize themselves (procresize) and stay
    // loaded, each time.
    assert!(out.contains("after_offline=kept cpus=3"), "{out}");
    assert!(out.contains("after_online=kept cpus=4"), "{out}");
    assert_eq!(kv(out, "cycles_state"), Some("enabled"), "{out}");
    assert_eq!(kv(out, "cycles_reloads"), Some("0"), "{out}");
    // Each of the 22 hotplug events, as the kernel counts them, resized it.
    assert_eq!(num(out, "hotplug_events"), 22, "{out}");
    assert_eq!(stats(out).procresize, 22, "{out}");
    // User mode: no CPU sat a second beside tasks in its own DSQ that it
    // could not take (a CPU made inactive on its way offline gives them up
    // at once: README, "Hotplug"), so the timer's backstop found none.
    if mode == USER {
        let line = out
            .lines()
            .find(|l| l.contains("CPU hotplug events:"))
            .unwrap_or_else(|| panic!("no hotplug line from the agent:\n{out}"));
        assert!(line.contains("stuck CPUs: 0;"), "{line}\n{out}");
        // Beside the hogs, wakeups preempted a CPU's task for the agent's
        // pass (kick_agent), and those tasks came back with their slice
        // without the agent (restore_kicked). The sleepers are other
        // processes than the hogs, so by default some hogs went back behind
        // a woken sleeper instead (--cross-process-preempt-us). Some of
        // those decisions reached a hog that had run under 250 us, and a
        // timer was set to preempt it once it had (preempt_later()), as in
        // BPF mode below. Without that timer, none would be counted.
        let (kicks, back, behind, later, returned) = agent_kicks(line);
        eprintln!(
            "lifecycle {mode:?}: {kicks} tasks preempted for the agent, {back} back, {behind} behind a wakeup, {later} set for later, {returned} as they came back"
        );
        assert!(kicks > 0 && back > 0 && back <= kicks, "{line}\n{out}");
        assert!(behind > 0, "{line}\n{out}");
        assert!(later > 0, "no preemption set for later:\n{line}\n{out}");
    }
    // BPF mode: beside the hogs, the sleepers are other processes, so their
    // wakeups preempt a hog (--cross-process-preempt-us); some came when
    // the hog had run under 250 us, and a timer was set to preempt it once
    // it had (preempt_later()). Without that timer, none would be counted.
    if mode == BPF {
        let m = stats(out);
        eprintln!(
            "lifecycle {mode:?}: {} wakeup preemptions, {} set for later",
            m.wakeup_preempts, m.preempt_laters
        );
        assert!(m.wakeup_preempts > 0, "{out}");
        assert!(
            m.preempt_laters > 0,
            "no wakeup preemption set for later:\n{out}"
        );
    }
    // The systemd unit's command line loads it and SIGTERM unloads it.
    assert_eq!(kv(out, "unit_state"), Some("enabled"), "{out}");
    assert_eq!(kv(out, "unit_exit"), Some("0"), "{out}");
    assert_eq!(kv(out, "unit_after"), Some("disabled"), "{out}");
}

/// The first `n` numbers in `text` after `marker` (user mode's last log
/// line); panics if there are fewer.
fn numbers_after(text: &str, marker: &str, n: usize) -> Vec<u64> {
    let rest = text
        .split(marker)
        .nth(1)
        .unwrap_or_else(|| panic!("no '{marker}' in:\n{text}"));
    let found: Vec<u64> = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(
        found.len(),
        n,
        "no {n} numbers after '{marker}' in:\n{text}"
    );
    found
}

/// From user mode's last log line: the tasks preempted for the agent,
/// those that came back with their slice ahead of the agent's decisions,
/// the tasks that went back behind a woken task of another process
/// (cross_preempts()), the timers set to preempt one later
/// (preempt_later()), and those preempted as they came back from the
/// agent's pass (behind_on_return()).
fn agent_kicks(line: &str) -> (u64, u64, u64, u64, u64) {
    let n = numbers_after(line, "tasks preempted for the agent: ", 2);
    let behind = numbers_after(line, "for a woken task of another process: ", 3);
    (n[0], n[1], behind[0], behind[1], behind[2])
}

/// From user mode's last log line: the SCHED_IDLE tasks preempted for a
/// task queued to their CPU; of those, for a wakeup that ran there without
/// the agent (run_beside_idle()); and the wakeups that ran on an idle CPU
/// ahead of the SCHED_IDLE tasks the agent had committed to it
/// (only_idle_queued()).
fn idle_yields(out: &str) -> (u64, u64, u64) {
    let n = numbers_after(out, "SCHED_IDLE tasks preempted: ", 2);
    let ahead = numbers_after(out, "committed to an idle CPU: ", 1);
    (n[0], n[1], ahead[0])
}

/// The guest's stdout, once its command exited 0.
fn ok_stdout(r: &Run) -> &str {
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    &r.stdout
}

/// Each `key=value` the guest must have printed.
fn assert_kvs(out: &str, want: &[(&str, &str)]) {
    for &(key, value) in want {
        assert_eq!(kv(out, key), Some(value), "{key} in:\n{out}");
    }
}

/// The number the guest printed as `key=N`.
fn num(out: &str, key: &str) -> u64 {
    kv(out, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in:\n{out}"))
}

/// The guest printed each `key=value` in `want`, and scx_gmp was unloaded
/// only by its SIGTERM, never ejected.
fn assert_survived(out: &str, want: &[(&str, &str)]) {
    assert_kvs(out, want);
    assert_not_ejected(out, &["(unregistered from user space)"]);
}

fn survival(mode: &str) {
    let r = guest(&[], "survival.sh", &[mode]);
    let out = ok_stdout(&r);
    assert_survived(
        out,
        &[
            ("stress_exit", "0"),
            ("state_after_stress", "enabled"),
            ("gmp_exit", "0"),
        ],
    );
    assert!(stats(out).steal_ok > 0, "{out}");
}

/// Readers of every task's /proc stat beside CPU hogs (tests/guest/
/// procread.sh): the user-mode agent once read a workqueue worker's stat
/// there and waited, for a kernel mutex, on a reader only it could run.
fn proc_readers(mode: &str) {
    let r = guest(&["--cpus", "4"], "procread.sh", &[mode]);
    let out = ok_stdout(&r);
    assert_survived(out, &[("state_after_reads", "enabled"), ("gmp_exit", "0")]);
}

/// `--stats` into a pipe nobody reads (tests/guest/statspipe.sh): the
/// user-mode agent once wrote its stats lines from the scheduling loop and,
/// with the pipe full, waited for a reader that only it could run.
fn stats_pipe(mode: &str) {
    let r = guest(&[], "statspipe.sh", &[mode]);
    let out = ok_stdout(&r);
    assert_survived(
        out,
        &[
            ("stress_exit", "0"),
            ("state_while_full", "enabled"),
            ("gmp_exit", "0"),
        ],
    );
    assert!(num(out, "stats_skipped") > 0, "no line skipped: {out}");
    assert!(num(out, "stats_lines") > 0, "no line written: {out}");
}

/// Real-time tasks hold every CPU (tests/guest/rthold.sh): in user mode the
/// kernel's deadline servers for sched_ext once stopped for good, one CPU
/// after another (a server pick that finds nothing stops the server, and
/// it restarts only when no sched_ext task is left counted on its CPU), and
/// the stressor, which waits for a sched_ext task to end it, never ended.
/// Then a real-time hog holds one CPU for 3 s under a CPU-bound load, and
/// handoffp must give the held CPU's queues to the other CPUs: the retake
/// counters grow.
fn rt_hold(mode: &str) {
    let r = guest(&["--cpus", "4"], "rthold.sh", &[mode]);
    let out = ok_stdout(&r);
    assert_survived(
        out,
        &[
            ("stress_exit", "0"),
            ("hold_load_exit", "0"),
            ("state_after_stress", "enabled"),
            ("rcu_stall_warnings", "0"),
            ("gmp_exit", "0"),
        ],
    );
    let (before, after) = (stats_named(out, "stats_before_hold"), stats(out));
    let counts = format!(
        "retake cpus {} -> {}, tasks {} -> {}",
        before.retakes, after.retakes, before.retake_tasks, after.retake_tasks
    );
    eprintln!("mode '{mode}': {counts}");
    // In the BPF mode a held CPU's queues fill only from what was queued
    // there before the hog came (wakeups and kernel threads go elsewhere),
    // so whether handoffp has work is chance: CI's debug build on 5546e7b
    // counted 7 -> 7 and 6 -> 6. Reported there, asserted in user mode.
    if mode == USER {
        assert!(
            after.retakes > before.retakes && after.retake_tasks > before.retake_tasks,
            "a real-time hog held CPU 1 for 3 s beside queued tasks, and no handoffp moved \
             them ({counts}):\n{out}"
        );
    }
}

fn rules(mode: &str) {
    // User mode applies the Go rules with every wakeup through its model;
    // its defaults skip the model for a sync hand-off, a wakeup from a
    // kernel lock, an idle CPU and a CPU that runs a SCHED_IDLE task
    // (README, "Where Linux differs from Go"), checked in the last three
    // phases.
    let go_literal = format!("{mode} --go-ready --go-handoff");
    let args = if mode == USER { &go_literal } else { mode };
    let r = guest(&["--cpus", "4"], "rules.sh", &[&gmp_load(), args, mode]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let phase = |name: &str| -> String {
        let start = r
            .stdout
            .find(&format!("== phase {name}"))
            .unwrap_or_else(|| panic!("no phase {name} in:\n{}", r.stdout));
        let rest = &r.stdout[start + 1..];
        rest[..rest.find("== phase").unwrap_or(rest.len())].to_string()
    };

    // 1000 threads from one: the LRQ overflows to the global queue, idle
    // CPUs steal, and the work spreads over every CPU.
    let fan = phase("fanout");
    assert_eq!(kv(&fan, "gmp_exit"), Some("0"), "{fan}");
    let m = stats(&fan);
    // In BPF mode every woken thread goes to the waker's runnext, so one
    // LRQ takes all 1000 and overflows. In user mode the waker's CPU is the
    // one the kernel queued the thread on, which is not always the
    // creator's (README, "Where Linux differs from Go"), so the 1000 need
    // not overflow one LRQ; they reach the global queue either way.
    if mode == BPF {
        assert!(m.overflow > 0, "{fan}");
    } else {
        assert!(m.global_put > 0, "{fan}");
    }
    assert!(m.steal_ok > 0, "{fan}");
    assert!(m.stolen_tasks > 0, "{fan}");
    let share = shares(&fan);
    assert_eq!(share.len(), 4, "{fan}");
    assert!(
        share.iter().all(|&s| s >= 0.10),
        "work not spread over all CPUs: {share:?}"
    );

    // More CPU-bound threads than CPUs: slices expire to the global queue,
    // and the every-61st-tick check takes from it.
    let spin = phase("spin");
    assert_eq!(kv(&spin, "gmp_exit"), Some("0"), "{spin}");
    assert!(shares(&spin).iter().all(|&s| s >= 0.10), "{spin}");
    let m = stats(&spin);
    assert!(m.slice_expired > 0, "{spin}");
    assert!(m.global_tick > 0, "{spin}");

    // As many CPU-bound threads as CPUs, each spinning until it has used
    // 3 s of CPU: each runs on a CPU of its own, so all are done in about
    // 3 s. User mode once kept two on one CPU and left another idle (a busy
    // CPU took a slice-expired thread from the global queue ahead of the
    // idle one that wakep() woke for it): 5.0 to 5.3 s at 4 vCPUs, against
    // 3.4 to 3.8 s since, and 3.0 s in BPF mode. Two threads that share a
    // CPU take twice their CPU time, so past 1.5 times it they did.
    let spread = phase("spread");
    assert_eq!(kv(&spread, "gmp_exit"), Some("0"), "{spread}");
    assert_eq!(kv(&spread, "cpus_used"), Some("4"), "{spread}");
    let makespan: u64 = kv(&spread, "makespan_ms").unwrap().parse().unwrap();
    assert!(
        makespan <= 4_500,
        "one thread per CPU shared CPUs: {makespan} ms for 3 s of CPU each\n{spread}"
    );

    // A ping-pong pair runs through runnext.
    let pp = phase("pingpong");
    assert_eq!(kv(&pp, "gmp_exit"), Some("0"), "{pp}");
    let m = stats(&pp);
    assert!(m.runnext_hit > 0, "{pp}");
    assert!(m.runnext_put > 0, "{pp}");
    // BPF mode: the CPUs wakep() kicked answered, each kick counted once,
    // with its time and whether it took over 1 ms. (A snapshot reads the
    // CPUs one at a time: a kick counted on a CPU read before it may be
    // answered on one read after, so a few answers may lead the kicks.)
    if mode == BPF {
        assert!(m.kicks_answered > 0, "{pp}");
        assert!(m.kicks_answered <= m.kicks + m.gomaxprocs, "{pp}");
        assert!(m.kicks_slow <= m.kicks_answered, "{pp}");
    }

    // Beside a SCHED_IDLE hog on every CPU, a sleeper's wakeups preempt
    // the hog on their CPU (idle_yields()), in BPF mode on the waker's CPU,
    // in user mode wherever the task is queued; there a wakeup to a CPU
    // that runs a hog runs without the agent (run_beside_idle()), and so
    // does one to an idle CPU that the agent had committed hogs to
    // (only_idle_queued()).
    let b = phase("batch");
    assert_eq!(kv(&b, "gmp_exit"), Some("0"), "{b}");
    assert!(kv(&b, "batch_gap_ms").is_some(), "{b}");
    let preempted = match mode {
        BPF => stats(&b).wakeup_preempts,
        _ => {
            let (preempted, beside, ahead) = idle_yields(&b);
            assert!(beside > 0, "no wakeup ran beside a SCHED_IDLE task:\n{b}");
            assert!(
                ahead > 0,
                "no wakeup ran ahead of SCHED_IDLE tasks committed to an idle CPU:\n{b}"
            );
            preempted
        }
    };
    assert!(preempted > 0, "no SCHED_IDLE task preempted:\n{b}");

    // Beside a CPU hog on every CPU, threads queueing for their memory-map
    // lock finish; in user mode, by default, a wakeup from that lock runs
    // next on the waker's CPU without the agent (lock_handoff()).
    let l = phase("locks");
    assert_eq!(kv(&l, "gmp_exit"), Some("0"), "{l}");
    assert!(num(&l, "ops_per_s") > 0, "{l}");
    let m = stats(&l);
    if mode == USER {
        assert!(
            m.lock_handoffs > 0,
            "no wakeup from a kernel lock handed off:\n{l}"
        );
        // User mode's bound on those hand-offs, cut to 1 between two
        // dispatch() calls on a CPU (--debug-lock-streak): the wakeups past
        // it go through the agent (lock_streak_ok()), and the threads still
        // finish.
        let s = phase("streak");
        assert_eq!(kv(&s, "gmp_exit"), Some("0"), "{s}");
        assert!(num(&s, "ops_per_s") > 0, "{s}");
        let m = stats(&s);
        assert!(
            m.lock_refusals > 0,
            "no lock wakeup sent to the agent past a streak of 1:\n{s}"
        );
        assert!(m.lock_handoffs > 0, "{s}");
    } else {
        assert_eq!(m.lock_handoffs + m.lock_refusals, 0, "{l}");
    }

    // By default a pipe's sync wakeup runs next on the waker's CPU directly,
    // and in user mode a wakeup that finds an idle CPU runs there; both
    // ping-pongs finish.
    let w = phase("wakeups");
    assert_eq!(kv(&w, "gmp_exit"), Some("0"), "{w}");
    assert!(w.contains("usecs/op"), "{w}");
    assert!(kv(&w, "rtt_p50_us").is_some(), "{w}");
    let m = stats(&w);
    assert!(m.handoffs > 0, "{w}");
    if mode == USER {
        assert!(m.idle_places > 0, "{w}");
    }
}

/// kill -9 of the agent under load: the kernel falls back to EEVDF, the
/// workload finishes, nothing of scx_gmp is left, and it loads again.
fn killed(mode: &str) {
    let r = guest(&[], "kill.sh", &[&gmp_load(), mode]);
    let out = ok_stdout(&r);
    assert_kvs(
        out,
        &[
            ("state_after_kill", "disabled"),
            ("left_running", "0"),
            ("fanout_exit", "0"),
            ("reloaded", "enabled"),
            ("gmp_exit", "0"),
        ],
    );
}

/// A task the scheduler never runs: the watchdog ejects it, the task runs
/// under EEVDF, and scx_gmp says why and exits 1.
fn watchdog(mode: &str) {
    let r = guest(&[], "watchdog.sh", &[&example("gmp-watch"), mode]);
    let out = ok_stdout(&r);
    // The lost-task watcher that the soak relies on names the stalled task
    // (runnable for a second beside an idle CPU) before the watchdog fires.
    assert_eq!(kv(out, "watch_exit"), Some("0"), "{out}");
    assert!(num(out, "lost_tasks") >= 1, "{out}");
    let lost = lost_lines(out);
    eprintln!("watchdog {mode:?}: {lost:#?}");
    assert!(
        lost.iter().any(|l| l.contains("comm=gmp-stallme ")),
        "{out}"
    );
    assert_kvs(
        out,
        &[
            ("gmp_exit", "1"),
            ("state_after", "disabled"),
            ("stalled_task_finished", "yes"),
        ],
    );
    let reason = out
        .lines()
        .find(|l| l.starts_with("reason: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        reason.contains("scx_gmp: error: EXIT: runnable task stall"),
        "{out}"
    );
    assert!(reason.contains("gmp-stallme"), "{out}");
    // The dump names each CPU's queues (the `dump` callback of each mode).
    assert_eq!(num(out, "dump_cpus"), num(out, "nproc"), "{out}");
}

/// No task waits beside an idle CPU (tests/guest/idlewait.sh): 20 s of the
/// light request load at 2 vCPUs, each wakeup of its threads timed from the
/// kernel's own events, and none may wait over 50 ms while a CPU idles for
/// half of that. User mode's agent once sent a decision, from one CPU's
/// dispatch(), to a CPU whose task blocked just then; the task waited in
/// that CPU's queue, with every CPU idle, for 104 to 330 ms, in 4 of 9 runs
/// of 6 s (docs/reliability.md).
fn idle_wait(mode: &str, rt: bool) {
    let waits = repo().join("bench/waits.py");
    let waits = waits.to_str().unwrap();
    let rt = if rt { "rt" } else { "-" };
    let r = guest(
        &["--cpus", "2"],
        "idlewait.sh",
        &[&gmp_load(), waits, "20", rt, mode],
    );
    let out = ok_stdout(&r);
    let summary = out.lines().find(|l| l.starts_with("wakeups="));
    eprintln!("idle wait {mode:?} {rt}: {summary:?}");
    // A flagged wait, said in few enough lines that the failure's report
    // keeps them whole: the agent's counters, the waits over the bound and
    // the first one event by event (a CI report cut the whole output's
    // middle, and with it where that wait began).
    if kv(out, "waits_exit") != Some("0") {
        let counters = out
            .lines()
            .filter(|l| l.contains("dispatches deferred") || l.contains("CPU hotplug events"));
        let stranded = out.find("stranded over").map_or(out, |i| &out[i..]);
        let counters: Vec<&str> = counters.collect();
        panic!(
            "a task waited beside an idle CPU:\n{}\n{stranded}",
            counters.join("\n")
        );
    }
    assert_kvs(
        out,
        &[
            ("workload_exit", "0"),
            ("trace_lost", "0"),
            ("gmp_exit", "0"),
            ("waits_exit", "0"),
        ],
    );
    if rt == "rt" {
        assert_kvs(out, &[("cyclictest_exit", "0")]);
    }
    assert_not_ejected(out, &["(unregistered from user space)"]);
}

/// The soak: GMP_SOAK_SECS (default 60; the README's 10-minute run sets
/// 600) of mixed load, a cpuset, nice and SCHED_IDLE hogs, a 10,000-thread
/// fan-out and hotplug, with no ejection and flat agent memory; in the BPF
/// mode, and up to two minutes, the decision checker passes its trace.
fn soak(mode: &str) {
    let secs = std::env::var("GMP_SOAK_SECS").unwrap_or_else(|_| "60".into());
    let secs: u32 = secs
        .parse()
        .expect("GMP_SOAK_SECS must be a number of seconds");
    assert!(secs >= 30, "GMP_SOAK_SECS must be at least 30");
    // The BPF mode's decisions are traced and checked in runs of up to two
    // minutes: 60 s make a 220 MB trace in the guest's memory.
    let traced = mode == BPF && secs <= 120;
    let (opts, args): (&[&str], &str) = if traced {
        (&["--memory", "4G"], "--trace /tmp/soak.trace")
    } else {
        (&[], mode)
    };
    let r = guest(opts, "soak.sh", &[&gmp_load(), &secs.to_string(), args]);
    let out = &r.stdout;
    // The guest's hang guard (lib.sh) kills a soak that runs too long, after
    // printing the blocked tasks' stacks.
    assert!(kv(out, "hung_after_s").is_none(), "the soak hung:\n{out}");
    assert_eq!(r.code, 0, "stdout:\n{out}\nstderr:\n{}", r.stderr);
    if traced {
        let summary = out
            .lines()
            .find(|l| l.starts_with("checked "))
            .unwrap_or("");
        eprintln!("soak {mode:?}: {summary}");
        assert_eq!(num(out, "nothing_lost_violations"), 0, "{out}");
        assert!(summary.contains(" 0 violations, 0 events dropped"), "{out}");
        assert_eq!(kv(out, "check_exit"), Some("0"), "{out}");
    }
    // stress-ng's scheduler class has stressors this guest refuses (e.g.
    // SCHED_DEADLINE): 2 and 3 are its "some failed / no resources" codes.
    // It must finish, not hang (124) or die by a signal.
    assert!([0, 2, 3].contains(&num(out, "class_exit")), "{out}");
    // No thread waited runnable for 2 s beside an idle CPU it may use.
    assert_eq!(kv(out, "watch_exit"), Some("0"), "{out}");
    let watch = out.lines().find(|l| l.starts_with("watch_exit=")).unwrap();
    eprintln!("soak {mode:?}: {watch}");
    assert_eq!(num(out, "lost_tasks"), 0, "{:#?}\n{out}", lost_lines(out));
    for k in [
        "mix_exit",
        "nice19_exit",
        "idle_exit",
        "fan10k_exit",
        "cpuset_exit",
    ] {
        assert_eq!(num(out, k), 0, "{k}: {out}");
    }
    assert_eq!(kv(out, "hotplug_off"), Some("kept"), "{out}");
    assert_eq!(kv(out, "hotplug_on"), Some("kept"), "{out}");
    // One procresize for the CPU going offline, one for its return.
    assert_eq!(stats(out).procresize, 2, "{out}");
    // The cpuset's fan-out ran on its CPUs only, and on each of them.
    let cpuset = out.lines().find(|l| l.starts_with("cpuset_exit=")).unwrap();
    eprintln!("soak {mode:?}: {cpuset}");
    for k in ["class_exit=", "fan10k_exit="] {
        if let Some(l) = out.lines().find(|l| l.starts_with(k)) {
            eprintln!("soak {mode:?}: {l}");
        }
    }
    let share = shares(cpuset);
    let half = share.len() / 2;
    assert!(
        share[half..].iter().all(|&s| s == 0.0),
        "ran outside the cpuset: {cpuset}"
    );
    assert!(
        share[..half].iter().all(|&s| s >= 0.15),
        "not spread over the cpuset: {cpuset}"
    );
    // Flat memory: at most 16 MiB more at the end than near the start.
    let (start, end) = (num(out, "rss_start_kb"), num(out, "rss_end_kb"));
    eprintln!("soak {mode:?} {secs} s: agent RSS {start} kB near the start, {end} kB at the end");
    assert!(
        end <= start + 16 * 1024,
        "agent RSS grew from {start} to {end} kB"
    );
    assert_eq!(kv(out, "state_after_soak"), Some("enabled"), "{out}");
    // RCU's warnings that a task it waits for did not run for 21 s (the
    // kernel ejects the scheduler only if that goes on): reported, not yet
    // a failure (README, "When things go wrong").
    let rcu: Vec<&str> = out.lines().filter(|l| l.starts_with("rcu: ")).collect();
    eprintln!(
        "soak {mode:?}: {} RCU stall warnings {rcu:#?} (hotplug from {:?} to {:?} s)",
        num(out, "rcu_stall_warnings"),
        kv(out, "hotplug_at"),
        kv(out, "hotplug_done_at")
    );
    // No task sat in uninterruptible sleep for 120 s: a stall the watchdog
    // does not see.
    assert_eq!(num(out, "hung_task_warnings"), 0, "{out}");
    assert_eq!(kv(out, "gmp_exit"), Some("0"), "{out}");
    // One unload only: by SIGTERM.
    assert_not_ejected(out, &["(unregistered from user space)"]);
}

#[test]
fn scheduler_falls_back_when_killed() {
    killed(BPF);
}

#[test]
fn user_mode_falls_back_when_killed() {
    killed(USER);
}

#[test]
fn scheduler_watchdog_ejection_is_reported() {
    watchdog(BPF);
}

#[test]
fn user_mode_watchdog_ejection_is_reported() {
    watchdog(USER);
}

#[test]
fn scheduler_runs_no_task_late_beside_an_idle_cpu() {
    idle_wait(BPF, false);
}

#[test]
fn user_mode_runs_no_task_late_beside_an_idle_cpu() {
    idle_wait(USER, false);
}

/// The same beside real-time timer threads that preempt whatever runs,
/// the user-mode agent in the middle of its passes among them.
#[test]
fn scheduler_runs_no_task_late_beside_real_time_wakeups() {
    idle_wait(BPF, true);
}

#[test]
fn user_mode_runs_no_task_late_beside_real_time_wakeups() {
    idle_wait(USER, true);
}

#[test]
fn scheduler_soak() {
    soak(BPF);
}

#[test]
fn user_mode_soak() {
    soak(USER);
}

#[test]
fn scheduler_loads_refuses_and_unloads_on_sigterm() {
    lifecycle(BPF);
}

#[test]
fn scheduler_survives_scx_ci_stress_ng_run() {
    survival(BPF);
}

#[test]
fn scheduler_survives_real_time_tasks_holding_every_cpu() {
    rt_hold(BPF);
}

#[test]
fn scheduler_applies_each_go_rule() {
    rules(BPF);
}

/// Every decision the BPF side makes, traced and replayed against Go's
/// rules: the rule workloads (a 1000-thread fan-out among them) and the
/// stress-ng survival mix, with zero violations and no event dropped; and a
/// trace with one decision altered, which the checker must refuse.
#[test]
fn scheduler_decisions_follow_go_rules_in_the_trace() {
    let r = guest(&["--cpus", "4"], "trace.sh", &[&gmp_load()]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    for name in [
        "fanout",
        "spin",
        "gospin",
        "pingpong",
        "pidle",
        "stress",
        "preempt",
        "xpreempt",
        "gopreempt",
        "idle",
        "idlestarve",
        "wakepdelay",
        "readyidle",
        "lrqaged",
        "rtwaker",
        "crossproc",
    ] {
        let start = r
            .stdout
            .find(&format!("== trace {name}"))
            .unwrap_or_else(|| panic!("no trace {name} in:\n{}", r.stdout));
        let rest = &r.stdout[start + 1..];
        let out = &rest[..rest.find("== trace").unwrap_or(rest.len())];
        assert_kvs(out, &[("workload_exit", "0"), ("gmp_exit", "0")]);
        let summary = out
            .lines()
            .find(|l| l.starts_with("checked "))
            .unwrap_or_else(|| panic!("no checker summary in:\n{out}"));
        assert!(
            summary.contains(" 0 violations, 0 events dropped"),
            "{name}: {summary}\n{out}"
        );
        assert_eq!(kv(out, "check_exit"), Some("0"), "{out}");
        let lines: u64 = kv(out, "trace_lines").unwrap().parse().unwrap();
        assert!(lines > 1000, "{name}: only {lines} trace lines");
        // The agent that writes the trace is not a busy task in it: at
        // most 1,000 records a second of its own. It makes a few at each
        // of its 20 wakes a second (150 a second beside CPU hogs); woken
        // by each record, it made 14,600 a second, 55% of the records of
        // a request load at 4 vCPUs.
        let (agent, ms) = (num(out, "agent_records"), num(out, "trace_ms"));
        assert!(
            agent <= ms.max(1000),
            "{name}: the agent made {agent} of {lines} records in {ms} ms\n{out}"
        );
    }
    // --go-pidle: wakep() woke the CPU that idled last, bar the races where
    // that CPU was not yet in the kernel's idle mask (90% to 97% of the
    // wakeps in three 4-vCPU ping-pongs; 25% to 62% without the option).
    let pidle = &r.stdout[r.stdout.find("== trace pidle").unwrap()..];
    let line = pidle
        .lines()
        .find(|l| l.starts_with("pidleget: "))
        .unwrap_or_else(|| panic!("no pidleget count in:\n{pidle}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let (newest, wakeps): (u64, u64) = (words[1].parse().unwrap(), words[3].parse().unwrap());
    assert!(
        wakeps >= 50 && newest * 10 >= wakeps * 8,
        "--go-pidle: {line}\n{pidle}"
    );
    // --wakeup-preempt-us preempted tasks beside the timer wakeups, and put
    // each back to run next.
    assert!(num(&r.stdout, "preempt_puts") > 0, "{}", r.stdout);
    // So did the timer wakeups under the defaults, into another process
    // than the hogs' (--cross-process-preempt-us); with 0, Go's rule, no
    // task was preempted.
    assert!(num(&r.stdout, "xpreempt_puts") > 0, "{}", r.stdout);
    assert_eq!(num(&r.stdout, "gopreempt_puts"), 0, "{}", r.stdout);
    // Some of those wakeups ran at once in the hog's place
    // (preempt_at_once()), each traced as a pick.preempt that the checker
    // held to the header's preemption knobs; with Go's rule, none.
    assert!(num(&r.stdout, "xpreempt_at_once") > 0, "{}", r.stdout);
    assert_eq!(num(&r.stdout, "gopreempt_at_once"), 0, "{}", r.stdout);
    // A real-time shell's wakeups of a task of ours never queued it on the
    // shell's own CPU, which the shell holds unannounced when it started
    // there from idle (before the fix, 194 of 200 were). Only wakeups of a
    // reader that slept count: one that the shell preempted on its own CPU
    // just before it slept is woken where it is queued, without
    // select_cpu(). One CI run failed here (its count was not kept); that
    // path, found by reading, is the one known way there.
    assert!(num(&r.stdout, "rtwaker_rt_wakes") >= 100, "{}", r.stdout);
    let rtwaker: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("rtwaker_"))
        .collect();
    assert_eq!(
        num(&r.stdout, "rtwaker_on_rt_cpu"),
        0,
        "{}",
        rtwaker.join("\n")
    );
    // Beside SCHED_IDLE hogs, CPUs ran other tasks before them
    // (idle_last()), and no task that is not a hog waited on the GRQ for
    // the 61st schedtick: 60 to 108 ms before, 7 to 17 ms since.
    assert!(num(&r.stdout, "before_idle") > 0, "{}", r.stdout);
    assert!(num(&r.stdout, "idle_hogs") > 0, "{}", r.stdout);
    let wait = num(&r.stdout, "idle_grq_wait_ms");
    assert!(
        wait < 50,
        "a task waited {wait} ms on the GRQ beside SCHED_IDLE hogs\n{}",
        r.stdout
    );
    // Passed over for CPU-bound threads that keep the GRQ full, the hogs
    // still ran once they had waited 100 ms: their longest wait was 123 ms
    // (107 ms in Go's order), and 1,292 ms with no such bound.
    assert!(num(&r.stdout, "starve_hogs") > 0, "{}", r.stdout);
    let wait = num(&r.stdout, "starve_hog_wait_ms");
    assert!(
        wait < 500,
        "a SCHED_IDLE hog waited {wait} ms beside CPU-bound threads\n{}",
        r.stdout
    );
    // --wakep-delay-us: the delayed wakep() found woken tasks still waiting
    // behind a waker that ran on, and woke a CPU for them.
    assert!(num(&r.stdout, "wakep_late") > 0, "{}", r.stdout);
    // --wakep-delay-slow-pct 100: kicks are never over 100% slow, so the
    // same load's wakep()s all went at once and none was late.
    assert!(num(&r.stdout, "wakepfast_kicks") > 0, "{}", r.stdout);
    assert_eq!(num(&r.stdout, "wakepfast_late"), 0, "{}", r.stdout);
    // --ready-idle: woken workers ran on idle CPUs directly, for a far
    // larger share of the run's wakeups than the same load's wakeups into
    // another process had without it (2,489 of 9,237 wakeup puts, 27%,
    // against 231 of 9,715, 2.4%, in one run). Shares, not counts: in one
    // CI run the --ready-idle load had a ninth of the usual wakeups (687
    // runnext puts against some 6,000), and its 195 idle puts were not
    // twice the base's 157.
    let share = |prefix: &str| {
        let idle = num(&r.stdout, &format!("{prefix}idle_puts"));
        let wakes = num(&r.stdout, &format!("{prefix}wake_puts"));
        idle as f64 / wakes.max(1) as f64
    };
    let base = share("base_");
    assert!(share("") > 2.0 * base, "{}", r.stdout);
    // --ready-idle-slow-pct 1: some kicks were slow (4 vCPUs on 2 host
    // cores), and then woken workers ran on idle CPUs directly (2,188 of
    // 8,380 wakeup puts, 26%, in that run).
    assert!(num(&r.stdout, "slowkick_slow") > 0, "{}", r.stdout);
    assert!(share("slowkick_") > 2.0 * base, "{}", r.stdout);
    // --lrq-max-wait-us 500: woken workers pushed out of the dispatcher's
    // runnext ran before it once they had waited that long.
    assert!(num(&r.stdout, "lrq_aged") > 0, "{}", r.stdout);
    // Slices that expired to the GRQ while every CPU was busy kicked the
    // other CPUs for it (grq_put_kick()); with --go-grq-put none did.
    assert!(num(&r.stdout, "spin_grq_kicks") > 0, "{}", r.stdout);
    assert_eq!(num(&r.stdout, "gospin_grq_kicks"), 0, "{}", r.stdout);
    // By default each side of a pipe between two processes wakes the other
    // on an idle CPU.
    assert!(num(&r.stdout, "crossproc_idle_puts") > 0, "{}", r.stdout);
    assert_eq!(kv(&r.stdout, "altered_exit"), Some("1"), "{}", r.stdout);
    assert!(
        r.stdout.contains("steal-half: a steal from an LRQ of"),
        "{}",
        r.stdout
    );
}

#[test]
fn user_mode_loads_refuses_and_unloads_on_sigterm() {
    lifecycle(USER);
}

#[test]
fn user_mode_survives_scx_ci_stress_ng_run() {
    survival(USER);
}

#[test]
fn user_mode_survives_proc_readers_beside_cpu_hogs() {
    proc_readers(USER);
}

#[test]
fn user_mode_stats_never_wait_for_a_full_stdout() {
    stats_pipe(USER);
}

#[test]
fn user_mode_survives_real_time_tasks_holding_every_cpu() {
    rt_hold(USER);
}

#[test]
fn user_mode_applies_each_go_rule() {
    rules(USER);
}
