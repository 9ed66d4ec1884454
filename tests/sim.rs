//! The seeds' examples, reproduced on the model through the simulator, and
//! property tests of the policy's guarantees.

use proptest::prelude::*;
use scx_gmp::model::{Affinity, Params, Sched, G};
use scx_gmp::sim::{Config, Report, Sim, Work};
use scx_gmp::stats::field;

fn run(params: Params, roots: Vec<Work>, trace_ns: Option<u64>) -> Report {
    let mut cfg = Config::new(params);
    cfg.trace_ns = trace_ns;
    cfg.check = true;
    let mut sim = Sim::new(cfg);
    for w in roots {
        sim.spawn_root(w);
    }
    let r = sim.run();
    assert!(r.lost.is_empty(), "lost tasks: {:?}", r.lost);
    r
}

/// Seed 001: "Spawn 8000 short-running Gs from one goroutine ... Without work
/// stealing, P0 would run all 8000. With it, you will see roughly 2000 each."
#[test]
fn seed001_8000_tasks_from_one_p_run_about_2000_per_p() {
    let r = run(
        Params::go(4),
        vec![Work::FanOut {
            n: 8000,
            child_ns: 100_000,
        }],
        None,
    );
    // The root counts as one more task on P0.
    assert_eq!(r.started_on.iter().sum::<u64>(), 8001);
    for (p, &n) in r.started_on.iter().enumerate() {
        assert!(
            (1800..=2200).contains(&n),
            "P{p} started {n}: {:?}",
            r.started_on
        );
    }
    // 800 ms of work on 4 Ps: close to 200 ms.
    assert!(r.makespan_ns < 220_000_000, "makespan {}", r.makespan_ns);
}

/// Seed 000: with two Ps, a spawning burst fills the LRQ to 256 and the rest
/// stacks up in the global queue (`runqueue=N [.. 256]`, N growing).
#[test]
fn seed000_burst_past_256_spills_to_the_global_queue() {
    let r = run(
        Params::go(2),
        vec![Work::FanOut {
            n: 5000,
            child_ns: 1_000_000,
        }],
        Some(100_000),
    );
    assert_eq!(r.max_lrq, 256, "an LRQ filled up, and never past 256");
    let lines: Vec<(u64, Vec<u64>)> = r
        .trace
        .iter()
        .map(|l| {
            let grq = field(l, "", "runqueue").unwrap();
            let lrq = l[l.find('[').unwrap() + 1..l.find(']').unwrap()]
                .split(' ')
                .map(|x| x.parse().unwrap())
                .collect();
            (grq, lrq)
        })
        .collect();
    // During the burst (the first 5 ms), the global queue only grows while
    // an LRQ stays at least half full.
    let burst: Vec<_> = lines.iter().take(50).collect();
    assert!(burst.iter().all(|(_, l)| l.iter().all(|&n| n <= 256)));
    assert!(burst.windows(2).all(|w| w[1].0 >= w[0].0), "{:?}", r.trace);
    assert!(burst.last().unwrap().0 > 1000, "{:?}", r.trace);
    assert!(burst[5..].iter().all(|(_, l)| l.iter().any(|&n| n >= 128)));
}

/// Seed 000/001: "if the victim has 8 Gs, the thief takes 4 ... 1 G, the
/// thief takes 1": ceil(n/2), so 7 leave 3.
#[test]
fn seed_steal_takes_ceil_half() {
    for (n, left) in [(7u32, 3usize), (8, 4), (1, 0), (256, 128)] {
        let mut s = scx_gmp::model::Sched::new(Params::go(2));
        s.pidleremove(0);
        s.pidleremove(1);
        for _ in 0..n {
            let g = s.new_g(Affinity::All);
            s.runqput(0, g, false, 0);
        }
        assert!(s.runqsteal(1, 0, false, 0).is_some());
        assert_eq!(s.ps[0].runq.len(), left, "victim of {n}");
        assert_eq!(s.stats.stolen_tasks as usize, n as usize - left);
    }
}

/// Seed 001: "every 61st schedule() call checks the GRQ first": with local
/// work always queued, the global queue is still served.
#[test]
fn seed_every_61st_tick_serves_the_global_queue_despite_local_work() {
    // One P: a fan-out keeps the LRQ busy while yielders wait in the GRQ.
    let mut params = Params::go(1);
    params.slice_ns = 1_000_000;
    let r = run(
        params,
        vec![Work::Spawner {
            children: vec![
                (
                    Work::Yielder {
                        rounds: 5,
                        work_ns: 10_000,
                    },
                    Affinity::All,
                ),
                (
                    Work::FanOut {
                        n: 200,
                        child_ns: 50_000,
                    },
                    Affinity::All,
                ),
            ],
        }],
        None,
    );
    assert!(r.metrics.global_tick > 0, "{}", r.summary());
    assert!(r.metrics.yields == 5);
}

/// proc.go findRunnable: with local work always queued, exactly every 61st
/// schedtick takes the global queue's head first.
#[test]
fn exactly_every_61st_schedtick_takes_from_the_global_queue() {
    let mut s = Sched::new(Params::go(1));
    s.pidleremove(0);
    let local: Vec<G> = (0..250).map(|_| s.new_g(Affinity::All)).collect();
    for &g in &local {
        s.runqput(0, g, false, 0);
    }
    let global: Vec<G> = (0..5).map(|_| s.new_g(Affinity::All)).collect();
    for &g in &global {
        s.globrunqput(g);
    }
    let mut took = Vec::new();
    for i in 0..200 {
        let (run, _) = s.schedule(0, 0);
        let g = run.expect("work is queued").g;
        if global.contains(&g) {
            took.push((i, g));
        }
    }
    // Schedticks 0, 61, 122 and 183 (call i starts schedtick i), in GRQ order.
    assert_eq!(
        took,
        [
            (0, global[0]),
            (61, global[1]),
            (122, global[2]),
            (183, global[3])
        ]
    );
    assert_eq!(s.stats.global_tick, 4);
}

/// Seed 004 / proc.go: a runnext ping-pong pair shares one slice, so it
/// cannot keep a task waiting in the LRQ beyond one slice.
#[test]
fn seed_runnext_pingpong_pair_cannot_hold_a_p_beyond_one_slice() {
    let params = Params::go(1);
    let slice = params.slice_ns;
    let mut cfg = Config::new(params);
    cfg.check = true;
    let mut sim = Sim::new(cfg);
    let pair = sim.spawn_root(Work::PingPong {
        tx: 0,
        rx: 1,
        rounds: 5000,
        work_ns: 10_000,
    });
    let waiter = sim.spawn_root(Work::Busy { ns: 1_000_000 });
    let r = sim.run();
    assert!(r.lost.is_empty());
    let waited = r.started_at[waiter as usize] - r.started_at[pair as usize];
    assert!(
        waited <= slice + 20_000,
        "the LRQ task waited {waited} ns behind the pair"
    );
    assert!(r.metrics.runnext_hit > 100, "{}", r.summary());
    assert!(r.metrics.slice_expired >= 1);
}

// ---- properties -------------------------------------------------------------

fn affinity(nprocs: usize) -> impl Strategy<Value = Affinity> {
    prop_oneof![
        3 => Just(Affinity::All),
        1 => proptest::collection::vec(any::<bool>(), nprocs).prop_map(move |bits| {
            let mut ps: Vec<usize> = (0..nprocs).filter(|&p| bits[p]).collect();
            if ps.is_empty() {
                ps.push(0);
            }
            Affinity::only(&ps)
        }),
    ]
}

fn work() -> impl Strategy<Value = Work> {
    prop_oneof![
        (1u64..2_000_000).prop_map(|ns| Work::Busy { ns }),
        (1u32..300, 1u64..200_000).prop_map(|(n, child_ns)| Work::FanOut { n, child_ns }),
        (1u32..8, 1u64..100_000).prop_map(|(depth, leaf_ns)| Work::Fib { depth, leaf_ns }),
        (1u32..40, 1u64..100_000).prop_map(|(rounds, work_ns)| Work::PingPong {
            tx: 0,
            rx: 0,
            rounds,
            work_ns
        }),
        (1u32..20, 1u64..200_000).prop_map(|(rounds, work_ns)| Work::Yielder { rounds, work_ns }),
        (1u32..10, 1u64..100_000, 1u64..500_000).prop_map(|(rounds, work_ns, sleep_ns)| {
            Work::Sleeper {
                rounds,
                work_ns,
                sleep_ns,
            }
        }),
    ]
}

fn scenario() -> impl Strategy<Value = (Params, Vec<(Work, Affinity)>)> {
    (1usize..=6).prop_flat_map(|nprocs| {
        let params = (
            prop_oneof![Just(2usize), Just(4), Just(16), Just(256)],
            prop_oneof![Just(0u32), Just(1), Just(3), Just(61)],
            1u32..=4,
            prop_oneof![Just(50_000u64), Just(1_000_000), Just(10_000_000)],
            0u64..10_000,
            any::<u64>(),
        )
            .prop_map(
                move |(lrq_cap, global_every, steal_tries, slice_ns, grace, seed)| Params {
                    nprocs,
                    lrq_cap,
                    global_every,
                    steal_tries,
                    slice_ns,
                    min_slice_ns: 20_000,
                    runnext_grace_ns: grace,
                    seed,
                },
            );
        let kids = proptest::collection::vec((work(), affinity(nprocs)), 1..6);
        (params, kids)
    })
}

/// Give each ping-pong pair its own two channels.
fn wire(mut kids: Vec<(Work, Affinity)>) -> Vec<(Work, Affinity)> {
    let mut next = 0;
    for (w, _) in &mut kids {
        if let Work::PingPong { tx, rx, .. } = w {
            (*tx, *rx) = (next, next + 1);
            next += 2;
        }
    }
    kids
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// No task is lost or run twice (each runs exactly the CPU time its
    /// program asks for, and sits in one place at a time), an LRQ never
    /// exceeds its capacity, no task runs outside its affinity, and no P
    /// idles while a busy P's LRQ holds a task it could steal (when the
    /// spinning cap let it look).
    #[test]
    fn policy_invariants_hold((params, kids) in scenario()) {
        let cap = params.lrq_cap;
        let mut cfg = Config::new(params);
        cfg.check = true;
        let mut sim = Sim::new(cfg);
        sim.spawn_root(Work::Spawner { children: wire(kids) });
        let r = sim.run();
        prop_assert!(r.lost.is_empty(), "lost {:?}", r.lost);
        prop_assert!(r.cpu_mismatch.is_empty(), "CPU time off for {:?}", r.cpu_mismatch);
        prop_assert!(r.max_lrq <= cap);
        prop_assert_eq!(r.affinity_violations, 0);
        prop_assert_eq!(r.conservation_violations, 0, "{}", r.summary());
    }

    /// Same seed, same run.
    #[test]
    fn simulation_is_deterministic((params, kids) in scenario()) {
        let once = || {
            let mut sim = Sim::new(Config::new(params.clone()));
            sim.spawn_root(Work::Spawner { children: wire(kids.clone()) });
            let r = sim.run();
            (r.makespan_ns, r.busy_ns, r.metrics)
        };
        prop_assert_eq!(once(), once());
    }
}
