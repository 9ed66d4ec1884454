//! `gmp-watch`: a lost-task watcher for the VM tests, independent of the
//! scheduler under test (so it also runs under the kernel's own, as a
//! control, and in user mode, whose decisions are not traced).
//!
//! A thread is *lost* when it stays runnable without running for RUNNABLE_MS
//! or more while a CPU it may run on idles for at least half of that time:
//! the class of bug where a scheduler drops or strands a task and CPUs sleep
//! beside it, which the kernel's watchdog sees only after 30 s. Every
//! INTERVAL_MS it reads each thread's state (`/proc/<pid>/task/<tid>/stat`)
//! and, for the runnable ones, its CPU time so far (`schedstat`). A thread
//! seen runnable at two looks with the same CPU time did not run in between
//! (it cannot have slept without running). Each CPU's idle time comes from
//! `/proc/stat`; an offline CPU counts as busy. Prints one `lost:` line per
//! lost thread (the first 20), then one line of `key=value` results.

use std::collections::HashMap;
use std::fs;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "gmp-watch",
    about = "Watch for runnable threads that do not run while a CPU they may use idles"
)]
struct Opts {
    /// How long to watch, in seconds; SIGTERM or SIGINT ends it sooner,
    /// with the same results line.
    #[arg(long, default_value_t = 60.0)]
    secs: f64,
    /// How often to look at every thread, in milliseconds (less often
    /// while a look takes more than half of that).
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// A thread runnable this long without running, beside an idle CPU it
    /// may use, is lost (milliseconds).
    #[arg(long, default_value_t = 2000)]
    runnable_ms: u64,
}

/// Each online CPU's idle time so far (idle + iowait), in clock ticks.
fn cpu_idle_ticks() -> HashMap<usize, u64> {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            Some((cpu, v.get(3)? + v.get(4).copied().unwrap_or(0)))
        })
        .collect()
}

/// A thread's state letter and name, from its `stat` line. The name sits in
/// parentheses and may itself hold spaces and ')', so the state is read
/// after the last ')'.
fn parse_stat(stat: &str) -> Option<(char, String)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let state = stat.get(close + 1..)?.trim_start().chars().next()?;
    Some((state, stat.get(open + 1..close)?.to_string()))
}

/// The CPUs a thread may run on, from `Cpus_allowed_list:` in its `status`
/// ("0-3,6"). None if unreadable.
fn parse_allowed(status: &str) -> Option<Vec<usize>> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b): (usize, usize) = match part.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let a = part.parse().ok()?;
                (a, a)
            }
        };
        cpus.extend(a..=b);
    }
    Some(cpus)
}

/// Every thread of every process: (tid, its /proc directory).
fn threads() -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) {
                out.push((tid, format!("/proc/{pid}/task/{tid}")));
            }
        }
    }
    out
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// One look at every thread: when, and each online CPU's idle ticks then.
struct Look {
    at: Instant,
    idle: HashMap<usize, u64>,
}

/// A thread seen runnable at `since`, and not run since: every thread first
/// seen waiting at one look shares that look.
struct Waiting {
    since: Rc<Look>,
    exec_ns: u64,
    reported: bool,
}

fn main() {
    let o = Opts::parse();
    let tick_ms = 1000.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let runnable = Duration::from_millis(o.runnable_ms);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(o.secs);
    let mut waiting: HashMap<u32, Waiting> = HashMap::new();
    let (mut scans, mut max_threads, mut lost, mut worst_ms) = (0u64, 0usize, 0u64, 0u64);
    let me = std::process::id();
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, stop as *const () as libc::sighandler_t);
    }
    while Instant::now() < end && !STOP.load(Ordering::Relaxed) {
        let look = Rc::new(Look {
            at: Instant::now(),
            idle: cpu_idle_ticks(),
        });
        let all = threads();
        max_threads = max_threads.max(all.len());
        let mut seen = HashMap::with_capacity(waiting.len());
        for (tid, dir) in all {
            // Our own thread runs only when we look: never waiting here.
            if tid == me {
                continue;
            }
            let Some((state, comm)) = fs::read_to_string(format!("{dir}/stat"))
                .ok()
                .as_deref()
                .and_then(parse_stat)
            else {
                continue;
            };
            if state != 'R' {
                continue;
            }
            let Some(exec_ns) = fs::read_to_string(format!("{dir}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            else {
                continue;
            };
            let mut w = match waiting.remove(&tid) {
                Some(w) if w.exec_ns == exec_ns => w,
                _ => Waiting {
                    since: look.clone(),
                    exec_ns,
                    reported: false,
                },
            };
            let waited = look.at - w.since.at;
            if !w.reported && waited >= runnable {
                let allowed = fs::read_to_string(format!("{dir}/status"))
                    .ok()
                    .as_deref()
                    .and_then(parse_allowed)
                    .unwrap_or_default();
                // The allowed CPU that idled most since the thread was seen
                // waiting, online at both looks.
                let best = allowed
                    .iter()
                    .filter_map(|c| {
                        let d = look.idle.get(c)?.checked_sub(*w.since.idle.get(c)?)?;
                        Some((*c, (d as f64 * tick_ms) as u64))
                    })
                    .max_by_key(|&(_, ms)| ms);
                let waited_ms = waited.as_millis() as u64;
                if let Some((cpu, idle_ms)) = best.filter(|&(_, ms)| 2 * ms >= waited_ms) {
                    w.reported = true;
                    lost += 1;
                    worst_ms = worst_ms.max(waited_ms);
                    if lost <= 20 {
                        println!(
                            "lost: tid={tid} comm={comm} runnable_ms={waited_ms} cpu={cpu} idle_ms={idle_ms}"
                        );
                    }
                }
            }
            seen.insert(tid, w);
        }
        waiting = seen;
        scans += 1;
        // A look at 10,000 threads takes seconds in an emulated guest: rest
        // twice as long as it took, so that the watcher stays a light load.
        let rest = Duration::from_millis(o.interval_ms).max(2 * look.at.elapsed());
        let until = Instant::now() + rest;
        while Instant::now() < until && !STOP.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50).min(rest));
        }
    }
    println!(
        "workload=watch secs={:.0} scans={scans} max_threads={max_threads} lost_tasks={lost} worst_lost_ms={worst_ms}",
        start.elapsed().as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_names_with_spaces_and_parens() {
        let (s, c) = parse_stat("12 (a b) c)) R 1 2 3").unwrap();
        assert_eq!((s, c.as_str()), ('R', "a b) c)"));
        assert_eq!(parse_stat("7 (kworker/0:1) S 2").unwrap().0, 'S');
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn allowed_cpu_lists() {
        let st = "Name:\tx\nCpus_allowed:\tf\nCpus_allowed_list:\t0-2,5\n";
        assert_eq!(parse_allowed(st), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_allowed("Cpus_allowed_list:\t3\n"), Some(vec![3]));
        assert_eq!(parse_allowed("Name:\tx\n"), None);
    }
}
