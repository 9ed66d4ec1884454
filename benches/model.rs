//! Model scheduling decisions per second on one core (target: >= 10 million).
//!
//! `cargo bench --bench model` measures for about a second per scenario;
//! `cargo test --benches` runs each scenario briefly, as a smoke test.

use std::hint::black_box;
use std::time::{Duration, Instant};

use scx_gmp::model::{Affinity, Params, Sched};

/// Run `decisions` schedule() calls over 4 Ps with `tasks` tasks cycling
/// through the queues; `put` picks where each task goes back.
fn cycle(decisions: u64, tasks: u32, put: fn(u64) -> Put) -> (Duration, String) {
    let mut s = Sched::new(Params::go(4));
    for p in 0..4 {
        s.pidleremove(p);
    }
    for i in 0..tasks {
        let g = s.new_g(Affinity::All);
        s.runqput(i as usize % 4, g, false, 0);
    }
    let mut now = 0u64;
    let t0 = Instant::now();
    for i in 0..decisions {
        let p = (i % 4) as usize;
        if s.ps[p].idle {
            s.pidleremove(p);
        }
        now += 1_000;
        let (run, woke) = s.schedule(p, now);
        if let Some(w) = woke {
            black_box(w);
        }
        if let Some(r) = run {
            match put(i) {
                Put::Tail => s.runqput(p, r.g, false, now),
                Put::Next => s.runqput(p, r.g, true, now),
                Put::Global => s.slice_expired(r.g),
                Put::Elsewhere => s.runqput((p + 1) % 4, r.g, false, now),
            }
        }
    }
    let d = t0.elapsed();
    let m = &s.stats;
    let paths = format!(
        "runnext hits {}, lrq gets {}, 61-tick {}, batches {}, steals {}",
        m.runnext_hit, m.lrq_get, m.global_tick, m.global_batch, m.steal_ok
    );
    (d, paths)
}

/// A scenario: its name, how many tasks cycle, and where each goes back.
type Scenario = (&'static str, u32, fn(u64) -> Put);

enum Put {
    Tail,
    Next,
    Global,
    Elsewhere,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n: u64 = if full { 20_000_000 } else { 100_000 };
    let scenarios: [Scenario; 4] = [
        ("lrq round-robin (runqget, runqput)", 1024, |_| Put::Tail),
        ("runnext ping-pong (inherit, kick)", 8, |i| {
            if i % 2 == 0 {
                Put::Next
            } else {
                Put::Tail
            }
        }),
        ("slice expiry (globrunqput, batch, 61-tick)", 64, |i| {
            if i % 3 == 0 {
                Put::Global
            } else {
                Put::Tail
            }
        }),
        ("imbalance (steal_work, runqsteal)", 3, |i| {
            if i % 4 == 0 {
                Put::Elsewhere
            } else {
                Put::Tail
            }
        }),
    ];
    let mut worst = f64::MAX;
    for (name, tasks, put) in scenarios {
        let (d, paths) = cycle(n, tasks, put);
        let rate = n as f64 / d.as_secs_f64();
        worst = worst.min(rate);
        println!("{name:46} {:>7.1} M decisions/s  ({paths})", rate / 1e6);
    }
    if full {
        let verdict = if worst >= 10e6 { "meets" } else { "MISSES" };
        println!(
            "slowest: {:.1} M decisions/s, {verdict} the 10 M/s target",
            worst / 1e6
        );
    }
}
