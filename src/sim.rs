//! A deterministic discrete-event simulator that drives the model
//! ([`crate::model::Sched`]) the way a kernel would: CPUs run tasks for CPU
//! bursts, a slice that runs out preempts (sysmon's retake), tasks spawn,
//! join, pass items over channels, sleep and yield, and an idle CPU runs
//! only when `wakep` (or work queued for it alone) wakes it.
//!
//! Same inputs, same seed: same run, event for event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use anyhow::{bail, Result};

use crate::cli::PolicyOpts;
use crate::model::{runnext_ripe, Affinity, Params, Sched, G};
use crate::stats::Metrics;

/// What a task does (each is a small program).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// Use `ns` of CPU, then exit.
    Busy { ns: u64 },
    /// Spawn `n` tasks that each use `child_ns` of CPU, then join them
    /// (a loop of `go f()`).
    FanOut { n: u32, child_ns: u64 },
    /// The recursive fib of "Concurrency in Go": spawn fib(d-1) and
    /// fib(d-2) and join; below depth 2, use `leaf_ns` of CPU.
    Fib { depth: u32, leaf_ns: u64 },
    /// `items` times: use `work_ns`, then send on channel `ch`.
    Producer { ch: usize, items: u32, work_ns: u64 },
    /// `items` times: receive from channel `ch`, then use `work_ns`.
    Consumer { ch: usize, items: u32, work_ns: u64 },
    /// Spawn a [`Work::Ponger`], then `rounds` times: use `work_ns`, send on
    /// `tx`, wait on `rx`; then join. With the ponger, a pair that hands the
    /// CPU back and forth through runnext.
    PingPong {
        tx: usize,
        rx: usize,
        rounds: u32,
        work_ns: u64,
    },
    /// `rounds` times: wait on `rx`, use `work_ns`, send on `tx`.
    Ponger {
        tx: usize,
        rx: usize,
        rounds: u32,
        work_ns: u64,
    },
    /// `rounds` times: use `work_ns`, then yield (Gosched).
    Yielder { rounds: u32, work_ns: u64 },
    /// `rounds` times: use `work_ns`, then block for `sleep_ns`.
    Sleeper {
        rounds: u32,
        work_ns: u64,
        sleep_ns: u64,
    },
    /// Spawn each of `children` (with its affinity), then join them all.
    Spawner { children: Vec<(Work, Affinity)> },
}

enum Action {
    Run(u64),
    Spawn(Work, Affinity),
    Join,
    Send(usize),
    Recv(usize),
    Yield,
    Sleep(u64),
    Exit,
}

/// A program read phase by phase: each `then(n, f)` is `n` steps whose
/// actions `f(i)` gives (`i` counts from 0 within them); past the last step
/// the task exits.
struct Program {
    phase: u32,
    action: Option<Action>,
}

impl Program {
    fn at(phase: u32) -> Self {
        Self {
            phase,
            action: None,
        }
    }

    fn then(mut self, n: u32, f: impl FnOnce(u32) -> Action) -> Self {
        if self.action.is_none() {
            if self.phase < n {
                self.action = Some(f(self.phase));
            } else {
                self.phase -= n;
            }
        }
        self
    }

    fn once(self, f: impl FnOnce() -> Action) -> Self {
        self.then(1, |_| f())
    }

    /// `rounds` times the steps of `round`, in order.
    fn rounds<const N: usize>(self, rounds: u32, round: [Action; N]) -> Self {
        let n = rounds.saturating_mul(N as u32);
        self.then(n, |i| round.into_iter().nth(i as usize % N).unwrap())
    }

    fn end(self) -> Action {
        self.action.unwrap_or(Action::Exit)
    }
}

impl Work {
    /// The action at step `phase` of this program.
    fn action(&self, phase: u32) -> Action {
        use Action::*;
        let p = Program::at(phase);
        match *self {
            Work::Busy { ns } => p.once(|| Run(ns)),
            Work::FanOut { n, child_ns } => p
                .then(n, |_| Spawn(Work::Busy { ns: child_ns }, Affinity::All))
                .once(|| Join),
            Work::Fib { depth, leaf_ns } if depth < 2 => p.once(|| Run(leaf_ns)),
            Work::Fib { depth, leaf_ns } => p
                .then(2, |i| {
                    let depth = depth - 1 - i;
                    Spawn(Work::Fib { depth, leaf_ns }, Affinity::All)
                })
                .once(|| Join),
            Work::Producer { ch, items, work_ns } => p.rounds(items, [Run(work_ns), Send(ch)]),
            Work::Consumer { ch, items, work_ns } => p.rounds(items, [Recv(ch), Run(work_ns)]),
            Work::PingPong {
                tx,
                rx,
                rounds,
                work_ns,
            } => p
                .once(|| {
                    let (tx, rx) = (rx, tx);
                    Spawn(
                        Work::Ponger {
                            tx,
                            rx,
                            rounds,
                            work_ns,
                        },
                        Affinity::All,
                    )
                })
                .rounds(rounds, [Run(work_ns), Send(tx), Recv(rx)])
                .once(|| Join),
            Work::Ponger {
                tx,
                rx,
                rounds,
                work_ns,
            } => p.rounds(rounds, [Recv(rx), Run(work_ns), Send(tx)]),
            Work::Yielder { rounds, work_ns } => p.rounds(rounds, [Run(work_ns), Yield]),
            Work::Sleeper {
                rounds,
                work_ns,
                sleep_ns,
            } => p.rounds(rounds, [Run(work_ns), Sleep(sleep_ns)]),
            Work::Spawner { ref children } => p
                .then(children.len() as u32, |i| {
                    let (w, a) = children[i as usize].clone();
                    Spawn(w, a)
                })
                .once(|| Join),
        }
        .end()
    }
}

/// Simulation settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub params: Params,
    /// CPU cost of a spawn or a send (Go's `newproc` is about 1 us).
    pub op_ns: u64,
    /// Delay before a woken idle CPU starts looking for work.
    pub wake_ns: u64,
    /// Record a schedtrace line every this many ns (None: never).
    pub trace_ns: Option<u64>,
    /// Stop here even if tasks are left (they are reported as lost).
    pub max_ns: u64,
    /// Check the invariants after every event (slow; for tests).
    pub check: bool,
}

impl Config {
    pub fn new(params: Params) -> Self {
        Self {
            params,
            op_ns: 1_000,
            wake_ns: 5_000,
            trace_ns: None,
            max_ns: 3_600_000_000_000,
            check: false,
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// When the last task exited (ns).
    pub makespan_ns: u64,
    /// CPU time each P spent running tasks (ns).
    pub busy_ns: Vec<u64>,
    /// Tasks that first ran on each P.
    pub started_on: Vec<u64>,
    /// When each task first ran (ns), by task id.
    pub started_at: Vec<u64>,
    pub tasks: u64,
    /// Tasks that did not finish (should be none).
    pub lost: Vec<G>,
    /// CPU time each task used, against what its program asked for.
    pub cpu_mismatch: Vec<G>,
    /// Times a P went idle while another P's LRQ held a task it could steal.
    pub conservation_violations: u64,
    /// Times a task ran on a P outside its affinity.
    pub affinity_violations: u64,
    /// Largest LRQ length seen.
    pub max_lrq: usize,
    /// The final counters.
    pub metrics: Metrics,
    /// Schedtrace lines, if asked for.
    pub trace: Vec<String>,
}

impl Report {
    /// A few lines of summary: makespan, per-P busy share, steals, 61-tick.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "makespan_ms={:.3} tasks={} lost={}\n",
            self.makespan_ns as f64 / 1e6,
            self.tasks,
            self.lost.len()
        );
        for (p, (&busy, &ran)) in self.busy_ns.iter().zip(&self.started_on).enumerate() {
            let share = busy as f64 / self.makespan_ns.max(1) as f64 * 100.0;
            s += &format!("P{p}: busy={share:.1}% started={ran}\n");
        }
        let m = &self.metrics;
        s += &format!(
            "steals: tried={} ok={} tasks={} runnext={}; global-tick takes={}; global batches={}; overflows={}\n",
            m.steal_try, m.steal_ok, m.stolen_tasks, m.stolen_runnext, m.global_tick, m.global_batch, m.overflow
        );
        s + &m.counters()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The task on P ends its burst or its slice (stale if `gen` moved on).
    Cpu {
        p: usize,
        gen: u64,
    },
    /// A woken idle P starts looking for work.
    Kick {
        p: usize,
    },
    /// A sleeping task's timer fires.
    Wake {
        g: G,
    },
    Trace,
}

#[derive(Clone, Debug)]
struct Task {
    work: Work,
    phase: u32,
    burst_left: u64,
    /// CPU time asked for (Run bursts plus spawn/send costs), and used.
    asked_ns: u64,
    used_ns: u64,
    parent: Option<G>,
    live_children: u32,
    joining: bool,
    sleeping: bool,
    last_p: usize,
    first_p: Option<usize>,
    done: bool,
}

#[derive(Clone, Debug, Default)]
struct Cpu {
    cur: Option<G>,
    slice_end: u64,
    since: u64,
    gen: u64,
}

#[derive(Clone, Debug, Default)]
struct Chan {
    items: u32,
    waiting: Option<G>,
}

/// How a task's turn on a CPU ended.
enum Step {
    /// It is running a burst; an event is posted.
    Posted,
    /// It left the CPU (blocked, yielded or exited).
    Left,
}

pub struct Sim {
    cfg: Config,
    pub sched: Sched,
    tasks: Vec<Task>,
    cpus: Vec<Cpu>,
    chans: Vec<Chan>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    now: u64,
    done: usize,
    report: Report,
    /// Where schedtrace lines go as they are made (None: into the report).
    trace_out: Option<Box<dyn FnMut(String)>>,
}

impl Sim {
    pub fn new(cfg: Config) -> Self {
        let n = cfg.params.nprocs;
        Self {
            sched: Sched::new(cfg.params.clone()),
            tasks: Vec::new(),
            cpus: vec![Cpu::default(); n],
            chans: Vec::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            done: 0,
            report: Report {
                busy_ns: vec![0; n],
                started_on: vec![0; n],
                ..Default::default()
            },
            cfg,
            trace_out: None,
        }
    }

    /// Hand each schedtrace line to `out` as it is made, instead of keeping
    /// it in the report: a long run's trace then takes no memory.
    pub fn stream_trace(&mut self, out: impl FnMut(String) + 'static) {
        self.trace_out = Some(Box::new(out));
    }

    fn post(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    fn new_task(&mut self, work: Work, aff: Affinity, parent: Option<G>, p: usize) -> G {
        let ch = match work {
            Work::Producer { ch, .. } | Work::Consumer { ch, .. } => ch,
            Work::PingPong { tx, rx, .. } | Work::Ponger { tx, rx, .. } => tx.max(rx),
            _ => 0,
        };
        if self.chans.len() <= ch {
            self.chans.resize(ch + 1, Chan::default());
        }
        let g = self.sched.new_g(aff);
        self.tasks.push(Task {
            work,
            phase: 0,
            burst_left: 0,
            asked_ns: 0,
            used_ns: 0,
            parent,
            live_children: 0,
            joining: false,
            sleeping: false,
            last_p: p,
            first_p: None,
            done: false,
        });
        g
    }

    /// Start a P that `wakep` (or queued work) took off the idle list.
    fn kick(&mut self, p: usize) {
        self.post(self.now + self.cfg.wake_ns, Ev::Kick { p });
    }

    fn wakep(&mut self) {
        if let Some(p) = self.sched.wakep() {
            self.kick(p);
        }
    }

    /// Queue `g` on `q`'s LRQ, waking `q` if it idles: the task may run
    /// nowhere the waker is.
    fn put_on(&mut self, q: usize, g: G) {
        self.sched.runqput(q, g, false, self.now);
        if self.sched.ps[q].idle {
            self.sched.pidleremove(q);
            self.kick(q);
        }
    }

    /// A P that `g` may run on: its last one if allowed, else the first.
    fn home(&self, g: G) -> usize {
        self.sched.home(g, self.tasks[g as usize].last_p)
    }

    /// proc.go ready: `g` was woken by code running on `by` (or by a timer,
    /// `by` = None): the waker's runnext if `g` may run there.
    fn ready(&mut self, g: G, by: Option<usize>) {
        match by {
            Some(p) if self.sched.may_run(g, p) => self.sched.runqput(p, g, true, self.now),
            _ => {
                let q = self.home(g);
                if by.is_none() && !self.sched.ps[q].idle {
                    self.sched.runqput(q, g, true, self.now);
                } else {
                    self.put_on(q, g);
                }
            }
        }
        self.wakep();
    }

    /// A task leaves for the global queue (slice expiry or yield); one that
    /// may run on few Ps makes sure one of those looks.
    fn after_global_put(&mut self, g: G) {
        if let Some(p) = self.sched.wake_allowed(g) {
            self.kick(p);
        }
        self.wakep();
    }

    /// Add a root task (Go's main goroutine) on P0 and start P0.
    pub fn spawn_root(&mut self, work: Work) -> G {
        let g = self.new_task(work, Affinity::All, None, 0);
        if self.sched.ps[0].idle {
            self.sched.pidleremove(0);
            self.kick(0);
        }
        self.sched.runqput(0, g, false, self.now);
        g
    }

    /// Run `p`: step its task, or schedule the next one, until a burst is
    /// posted or `p` idles.
    fn run_cpu(&mut self, p: usize) {
        loop {
            if self.cpus[p].cur.is_none() {
                let can_spin = self.sched.ps[p].spinning || self.sched.may_spin();
                let (run, woke) = self.sched.schedule(p, self.now);
                if let Some(w) = woke {
                    self.kick(w);
                }
                let Some(run) = run else {
                    if self.work_for(p, can_spin) {
                        self.report.conservation_violations += 1;
                    }
                    return;
                };
                if !self.sched.may_run(run.g, p) {
                    self.report.affinity_violations += 1;
                }
                let t = &mut self.tasks[run.g as usize];
                t.last_p = p;
                if t.first_p.is_none() {
                    t.first_p = Some(p);
                    self.report.started_on[p] += 1;
                    let i = run.g as usize;
                    if self.report.started_at.len() <= i {
                        self.report.started_at.resize(i + 1, u64::MAX);
                    }
                    self.report.started_at[i] = self.now;
                }
                let c = &mut self.cpus[p];
                c.cur = Some(run.g);
                c.slice_end = self.now + run.slice_ns;
                c.since = self.now;
                c.gen += 1;
            }
            if let Step::Posted = self.step(p) {
                return;
            }
            self.cpus[p].cur = None;
        }
    }

    /// Whether another busy P's LRQ holds a task `p` may run.
    /// Is there work `p` should have found before idling? Any global queue
    /// task it may run (the batch takes it, spinning or not); and, for a P
    /// allowed to spin, any task it may run in another running P's LRQ, or in
    /// its runnext once that has waited the grace (runqgrab's last round).
    fn work_for(&self, p: usize, can_spin: bool) -> bool {
        let s = &self.sched;
        if s.runq.iter().any(|&g| s.may_run(g, p)) {
            return true;
        }
        can_spin
            && s.ps.iter().enumerate().any(|(q, qp)| {
                let ripe = runnext_ripe(
                    self.now as i64 - qp.runnext_at as i64,
                    s.params.runnext_grace_ns,
                );
                q != p
                    && !qp.idle
                    && (qp.runq.iter().any(|g| s.may_run(g, p))
                        || qp.runnext.is_some_and(|g| ripe && s.may_run(g, p)))
            })
    }

    /// Post the event that ends the current burst or slice on `p`.
    fn post_burst(&mut self, p: usize) {
        let g = self.cpus[p].cur.unwrap();
        let left = self.tasks[g as usize].burst_left;
        let c = &self.cpus[p];
        let at = (self.now + left).min(c.slice_end.max(self.now));
        let gen = c.gen;
        self.post(at, Ev::Cpu { p, gen });
    }

    /// Execute the current task's actions until it runs a burst or leaves.
    fn step(&mut self, p: usize) -> Step {
        let g = self.cpus[p].cur.unwrap();
        loop {
            if self.tasks[g as usize].burst_left > 0 {
                self.post_burst(p);
                return Step::Posted;
            }
            let t = &mut self.tasks[g as usize];
            let action = t.work.action(t.phase);
            t.phase += 1;
            match action {
                Action::Run(ns) => {
                    t.burst_left = ns;
                    t.asked_ns += ns;
                }
                Action::Spawn(work, aff) => {
                    t.live_children += 1;
                    t.burst_left = self.cfg.op_ns;
                    t.asked_ns += self.cfg.op_ns;
                    let child = self.new_task(work, aff, Some(g), p);
                    self.ready(child, Some(p));
                }
                Action::Join => {
                    if t.live_children > 0 {
                        t.joining = true;
                        return Step::Left;
                    }
                }
                Action::Send(ch) => {
                    t.burst_left = self.cfg.op_ns;
                    t.asked_ns += self.cfg.op_ns;
                    match self.chans[ch].waiting.take() {
                        Some(w) => self.ready(w, Some(p)),
                        None => self.chans[ch].items += 1,
                    }
                }
                Action::Recv(ch) => {
                    let c = &mut self.chans[ch];
                    if c.items > 0 {
                        c.items -= 1;
                    } else {
                        c.waiting = Some(g);
                        return Step::Left;
                    }
                }
                Action::Yield => {
                    self.sched.gosched(g);
                    self.after_global_put(g);
                    return Step::Left;
                }
                Action::Sleep(ns) => {
                    t.sleeping = true;
                    self.post(self.now + ns, Ev::Wake { g });
                    return Step::Left;
                }
                Action::Exit => {
                    t.done = true;
                    self.done += 1;
                    if t.used_ns != t.asked_ns {
                        self.report.cpu_mismatch.push(g);
                    }
                    if let Some(parent) = t.parent {
                        let pt = &mut self.tasks[parent as usize];
                        pt.live_children -= 1;
                        if pt.joining && pt.live_children == 0 {
                            pt.joining = false;
                            self.ready(parent, Some(p));
                        }
                    }
                    self.report.makespan_ns = self.now;
                    return Step::Left;
                }
            }
        }
    }

    fn on_cpu(&mut self, p: usize, gen: u64) {
        if self.cpus[p].gen != gen || self.cpus[p].cur.is_none() {
            return;
        }
        let g = self.cpus[p].cur.unwrap();
        let elapsed = self.now - self.cpus[p].since;
        self.cpus[p].since = self.now;
        self.report.busy_ns[p] += elapsed;
        let t = &mut self.tasks[g as usize];
        let used = elapsed.min(t.burst_left);
        t.burst_left -= used;
        t.used_ns += used;
        if t.burst_left > 0 {
            // The slice ran out first: retake -> gopreempt_m.
            self.cpus[p].cur = None;
            self.sched.slice_expired(g);
            self.after_global_put(g);
        }
        self.run_cpu(p);
    }

    /// Check that every live task is in exactly one place.
    pub fn check_invariants(&self) {
        let mut seen = vec![0u32; self.tasks.len()];
        for g in self.sched.queued() {
            seen[g as usize] += 1;
        }
        for c in &self.cpus {
            if let Some(g) = c.cur {
                seen[g as usize] += 1;
            }
        }
        for ch in &self.chans {
            if let Some(g) = ch.waiting {
                seen[g as usize] += 1;
            }
        }
        for (g, t) in self.tasks.iter().enumerate() {
            let parked = u32::from(t.joining) + u32::from(t.sleeping);
            let want = if t.done { 0 } else { 1 };
            assert_eq!(
                seen[g] + parked,
                want,
                "task {g} is in {} places",
                seen[g] + parked
            );
        }
        for p in &self.sched.ps {
            assert!(p.runq.len() <= self.cfg.params.lrq_cap);
        }
        assert_eq!(
            self.sched.npidle,
            self.sched.ps.iter().filter(|p| p.idle).count()
        );
        assert_eq!(
            self.sched.nmspinning,
            self.sched.ps.iter().filter(|p| p.spinning).count()
        );
    }

    /// Run until every task has exited (or `max_ns`).
    pub fn run(mut self) -> Report {
        if let Some(t) = self.cfg.trace_ns {
            self.post(t, Ev::Trace);
        }
        while let Some(Reverse((at, _, ev))) = self.heap.pop() {
            if at > self.cfg.max_ns {
                break;
            }
            self.now = at;
            match ev {
                Ev::Cpu { p, gen } => self.on_cpu(p, gen),
                Ev::Kick { p } => {
                    if self.cpus[p].cur.is_none() {
                        self.run_cpu(p);
                    }
                }
                Ev::Wake { g } => {
                    self.tasks[g as usize].sleeping = false;
                    self.ready(g, None);
                }
                Ev::Trace => {
                    let live = (self.tasks.len() - self.done) as u64;
                    let m = self.sched.metrics(self.now / 1_000_000, live);
                    match &mut self.trace_out {
                        Some(out) => out(m.schedtrace()),
                        None => self.report.trace.push(m.schedtrace()),
                    }
                    if self.done < self.tasks.len() {
                        self.post(self.now + self.cfg.trace_ns.unwrap(), Ev::Trace);
                    }
                }
            }
            for p in &self.sched.ps {
                self.report.max_lrq = self.report.max_lrq.max(p.runq.len());
            }
            if self.cfg.check {
                self.check_invariants();
            }
        }
        self.report.tasks = self.tasks.len() as u64;
        self.report.lost = (0..self.tasks.len() as G)
            .filter(|&g| !self.tasks[g as usize].done)
            .collect();
        let live = self.report.lost.len() as u64;
        self.report.metrics = self
            .sched
            .metrics(self.report.makespan_ns / 1_000_000, live);
        self.report
    }
}

// ---- `scx_gmp sim`: the simulator on the command line ----------------------

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Workload {
    /// One task spawns --tasks tasks of --task-us each, then joins them.
    Fanout,
    /// A recursive spawn/join tree of --depth, leaves of --task-us.
    Fib,
    /// --pairs ping-pong pairs, --rounds hand-offs of --task-us each.
    Pingpong,
    /// --tasks CPU-bound tasks of --task-us each.
    Spin,
    /// All of the above at once, plus yielding and sleeping tasks.
    Mixed,
}

#[derive(Debug, clap::Args)]
pub struct SimOpts {
    /// The workload to simulate.
    #[arg(long, value_enum, default_value_t = Workload::Fanout)]
    pub workload: Workload,
    /// Simulated CPUs (Go's Ps).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub procs: u32,
    /// Tasks of the fanout and spin workloads.
    #[arg(long, default_value_t = 8000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tasks: u32,
    /// CPU time of each task, leaf or hand-off, in microseconds.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub task_us: u64,
    /// Depth of the fib tree (2^depth leaves, about).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=22))]
    pub depth: u32,
    /// Ping-pong pairs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub pairs: u32,
    /// Hand-offs of each ping-pong pair.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub rounds: u32,
    /// Print a schedtrace line every MS milliseconds of simulated time (at
    /// least 0.01).
    #[arg(long, value_name = "MS")]
    pub trace_ms: Option<f64>,
    /// Seed of the random steal order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `scx_gmp sim`: run the workload, print the schedtrace lines as they come
/// (none are kept), then the summary; an error if a task never finished.
pub fn simulate(policy: &PolicyOpts, o: &SimOpts) -> Result<()> {
    let trace_ns = match o.trace_ms {
        None => None,
        Some(ms) if ms.is_finite() && (0.01..=3_600_000.0).contains(&ms) => Some((ms * 1e6) as u64),
        Some(ms) => bail!("--trace-ms {ms}: must be from 0.01 to 3600000 milliseconds"),
    };
    let params = policy.params(o.procs as usize, o.seed);
    let ns = o.task_us * 1000;
    let fanout = Work::FanOut {
        n: o.tasks,
        child_ns: ns,
    };
    let fib = Work::Fib {
        depth: o.depth,
        leaf_ns: ns,
    };
    let pairs = (0..o.pairs as usize).map(|i| {
        let w = Work::PingPong {
            tx: 2 * i,
            rx: 2 * i + 1,
            rounds: o.rounds,
            work_ns: ns,
        };
        (w, Affinity::All)
    });
    let all = |w: Work| (w, Affinity::All);
    let root = match o.workload {
        Workload::Fanout => fanout,
        Workload::Fib => fib,
        Workload::Pingpong => Work::Spawner {
            children: pairs.collect(),
        },
        Workload::Spin => Work::Spawner {
            children: (0..o.tasks).map(|_| all(Work::Busy { ns })).collect(),
        },
        Workload::Mixed => {
            let mut children: Vec<_> = pairs.collect();
            children.extend([
                all(fanout),
                all(fib),
                all(Work::Yielder {
                    rounds: 100,
                    work_ns: ns,
                }),
                all(Work::Sleeper {
                    rounds: 100,
                    work_ns: ns,
                    sleep_ns: 10 * ns,
                }),
            ]);
            Work::Spawner { children }
        }
    };
    let mut cfg = Config::new(params);
    cfg.trace_ns = trace_ns;
    let mut sim = Sim::new(cfg);
    sim.stream_trace(|line| println!("{line}"));
    sim.spawn_root(root);
    let report = sim.run();
    println!("{}", report.summary());
    if !report.lost.is_empty() {
        bail!("{} tasks never finished", report.lost.len());
    }
    Ok(())
}
