//! `scx_gmp check FILE`: replay a decision trace (src/trace.rs) and check
//! every decision against Go's rules, with the model's own rule functions
//! (`global_tick_due`, `batch_size`, `steal_count`, `overflow_count`,
//! `runnext_ripe`), so that each rule exists once.
//!
//! Each event carries what its CPU saw when it decided (the queue lengths on
//! entry to find_runnable, the length a batch or a steal was computed from),
//! so each decision is checked against its own view, not against a replayed
//! state that concurrent CPUs would make approximate. The rules that span
//! events (nothing lost, spinning, idling beside work) follow tasks and CPUs
//! through the trace in its order, which is the ring buffer's: the order the
//! decisions were made in.

// The bindgen names of bpf/intf.h's enums are matched on as they are.
#![allow(non_upper_case_globals)]

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

use anyhow::{bail, Context, Result};

use crate::bpf_intf::*;
use crate::model::{
    batch_size, global_tick_due, overflow_count, runnext_ripe, steal_count, Params,
};
use crate::trace::{self, Event};

/// A task still queued at the end of the trace is lost if a CPU that could
/// have taken it went idle this long after it was queued.
pub const LOST_NS: u64 = 1_000_000_000;

/// A CPU idling while work it could steal is queued elsewhere is a violation
/// past this long (the worst case is always reported).
pub const IDLE_BESIDE_WORK_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The event's index in the trace (0: the first event after the header).
    pub index: usize,
    pub cpu: i32,
    pub rule: &'static str,
    pub detail: String,
}

#[derive(Debug, Default)]
pub struct Report {
    pub events: usize,
    pub picks: usize,
    pub violations: Vec<Violation>,
    pub dropped: u64,
    /// Restarts of the scheduler seen in the trace (CPU hotplug).
    pub restarts: usize,
    /// Tasks queued at the end of the trace (not lost: the trace ended).
    pub still_queued: usize,
    /// The longest time a CPU idled while work was queued on another CPU,
    /// and the event where that began.
    pub worst_idle_beside_work_ns: u64,
    pub worst_idle_beside_work_at: usize,
    /// The longest a task waited from its put to its run, with the put it
    /// waited from and the pick that ended it.
    pub worst_wait: Option<WorstWait>,
    /// How long each task that a CPU going offline gave to the global
    /// queue (`procresize`) waited from that put to its run.
    pub released_waits_ns: Vec<u64>,
    /// Where the BPF side differs from Go on purpose (README, "Where Linux
    /// differs from Go"): counted, not hidden.
    pub kthread_puts: usize,
    /// Wakeups put straight on an idle CPU (`--ready-idle`).
    pub idle_puts: usize,
    pub kept_prev: usize,
    pub handoffs: usize,
    /// GRQ heads taken first for their wait (`--global-max-wait-ms`; not Go's).
    pub aged: usize,
    /// LRQ heads run before runnext for their wait (`--lrq-max-wait-us`;
    /// not Go's).
    pub lrq_aged: usize,
    /// Wakeups run at once on their CPU, preempting the task running there
    /// (`--cross-process-preempt-us`, `--wakeup-preempt-us`,
    /// `--idle-slice-us`; not Go's).
    pub preempts: usize,
    /// LRQ tasks and GRQ heads run before the SCHED_IDLE task a CPU's own
    /// queues would run next (`--idle-slice-us`; not Go's).
    pub before_idle: usize,
    pub late_moves: usize,
    /// Overflow half-moves that stopped short of half because other CPUs
    /// took from that LRQ during the walk (Go's swap would have failed).
    pub short_overflows: usize,
    pub recheck_kicks: usize,
    /// Kicks of the other CPUs after a GRQ put whose wakep() woke none
    /// (grq_put_kick(); not with `--go-grq-put`).
    pub grq_kicks: usize,
    /// wakep() kicks while the trace had some CPU idle, and how many of them
    /// went to the most recently idled one (proc.go pidleget). Counted, not
    /// a violation: a CPU's idle event reaches the trace before the kernel
    /// marks it idle, so a CPU that has just idled may not be claimable yet.
    pub wakeps: usize,
    pub wakeps_newest: usize,
}

/// The longest wait from a put to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorstWait {
    pub ns: u64,
    pub pid: i32,
    /// The put it waited from.
    pub put: Event,
    /// The pick on the CPU that ran it, since that CPU's run before (None:
    /// none seen).
    pub pick: Option<Event>,
    /// The run's event index, for reading the trace around it.
    pub run_index: usize,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        for v in &self.violations {
            writeln!(
                f,
                "violation: event {} cpu {}: {}: {}",
                v.index, v.cpu, v.rule, v.detail
            )?;
        }
        writeln!(
            f,
            "checked {} events ({} picks, {} restarts): {} violations, {} events dropped",
            self.events,
            self.picks,
            self.restarts,
            self.violations.len(),
            self.dropped
        )?;
        writeln!(
            f,
            "worst idle beside queued work: {:.3} ms (from event {}); worst wait from put to run: {:.3} ms; still queued at the end: {}",
            self.worst_idle_beside_work_ns as f64 / 1e6,
            self.worst_idle_beside_work_at,
            self.worst_wait.map_or(0, |w| w.ns) as f64 / 1e6,
            self.still_queued
        )?;
        if let Some(w) = &self.worst_wait {
            writeln!(
                f,
                "worst wait: pid {} put by {}, run after {} at event {}",
                w.pid,
                w.put.put_summary(),
                w.pick.map_or("-".to_string(), |p| p.name()),
                w.run_index
            )?;
        }
        if !self.released_waits_ns.is_empty() {
            let mut w = self.released_waits_ns.clone();
            w.sort_unstable();
            writeln!(
                f,
                "released by a CPU going offline (procresize): {} ran, wait from that put to the run: median {:.3} ms, worst {:.3} ms",
                w.len(),
                w[w.len() / 2] as f64 / 1e6,
                w[w.len() - 1] as f64 / 1e6
            )?;
        }
        writeln!(
            f,
            "pidleget: {} of {} wakeps woke the most recently idled CPU",
            self.wakeps_newest, self.wakeps
        )?;
        write!(
            f,
            "differs from Go on purpose: {} kernel threads run directly, {} wakeups run directly on an idle CPU, {} runs kept by a task with nothing queued, {} sync hand-offs run directly, {} late queue moves ({} overflows short of half, others took the rest), {} re-checks of a young runnext, {} kicks after a GRQ put, {} global queue heads run for their wait, {} LRQ heads run before runnext for their wait, {} run before a SCHED_IDLE task, {} wakeups run at once, preempting the running task",
            self.kthread_puts, self.idle_puts, self.kept_prev, self.handoffs, self.late_moves, self.short_overflows, self.recheck_kicks, self.grq_kicks, self.aged, self.lrq_aged, self.before_idle, self.preempts
        )
    }
}

/// Where a task stands in the replay.
#[derive(Clone, Copy)]
struct Queued {
    ts: u64,
    index: usize,
    /// The CPU whose queue holds it; -1: the global queue.
    cpu: i32,
    /// Another CPU may take it (it is not pinned to one CPU).
    stealable: bool,
    /// The put that queued it, for a violation's detail.
    put: Event,
}

#[derive(Default, Clone, Copy)]
struct Cpu {
    /// The last spin_seq applied: odd while spinning.
    spin_seq: i32,
    /// Overflows whose half-move is due (runqputslow): one, or two when a
    /// put overflowed again while a CPU made the first one's move.
    overflow_due: u32,
    /// A runnext task was retaken to the GRQ since this CPU's last pick.
    retook: bool,
    /// Idle since (ts, event index) while work was queued elsewhere.
    idle_beside_work: Option<(u64, usize)>,
    /// The last time this CPU went idle.
    last_idle: Option<u64>,
    /// Idle since then: nothing ran or was picked here, and no wakep() took it.
    idle_now: bool,
    /// The task that last started running here (0: none seen yet).
    running: i32,
    /// This CPU's last pick event, if any since its last run.
    last_pick: Option<Event>,
}

struct Checker {
    p: Params,
    /// The knobs that are not Go's, each in ns (0: off).
    knobs: trace::Knobs,
    report: Report,
    queued: HashMap<i32, Queued>,
    /// Tasks that another CPU may take, queued on each CPU's queues and on
    /// the GRQ (the last slot).
    count: Vec<usize>,
    cpus: Vec<Cpu>,
    /// Each CPU's spin changes that reached the ring buffer before an
    /// earlier one (by spin_seq), with their event index.
    spins_ahead: Vec<BTreeMap<i32, usize>>,
}

/// Spin changes one CPU may have waiting for an earlier one before the
/// earlier one counts as missing.
const SPINS_AHEAD_MAX: usize = 64;

impl Checker {
    fn new(h: trace::Header) -> Self {
        let trace::Header { params: p, knobs } = h;
        Self {
            knobs,
            cpus: vec![Cpu::default(); p.nprocs],
            spins_ahead: vec![BTreeMap::new(); p.nprocs],
            count: vec![0; p.nprocs + 1],
            p,
            report: Report::default(),
            queued: HashMap::new(),
        }
    }

    fn violation(&mut self, index: usize, cpu: i32, rule: &'static str, detail: String) {
        self.report.violations.push(Violation {
            index,
            cpu,
            rule,
            detail,
        });
    }

    fn cpu(&mut self, cpu: i32) -> Option<&mut Cpu> {
        usize::try_from(cpu).ok().and_then(|c| self.cpus.get_mut(c))
    }

    /// The scheduler restarted: every queue starts empty.
    fn restart(&mut self) {
        self.report.restarts += 1;
        self.queued.clear();
        self.count = vec![0; self.p.nprocs + 1];
        self.cpus = vec![Cpu::default(); self.p.nprocs];
        self.spins_ahead = vec![BTreeMap::new(); self.p.nprocs];
    }

    fn event(&mut self, i: usize, e: &Event) {
        self.report.events += 1;
        if e.cpu >= 0 && e.cpu as usize >= self.p.nprocs {
            self.violation(
                i,
                e.cpu,
                "cpu",
                format!("CPU {} of {}", e.cpu, self.p.nprocs),
            );
            return;
        }
        match e.kind {
            gmp_ev_GMP_EV_PUT => self.put(i, e),
            gmp_ev_GMP_EV_PICK => self.pick(i, e),
            gmp_ev_GMP_EV_RUN => self.ran(i, e),
            gmp_ev_GMP_EV_SLEEP => {
                self.dequeue(e.pid, e.ts);
            }
            gmp_ev_GMP_EV_IDLE => self.idle(i, e),
            gmp_ev_GMP_EV_SPIN => self.spin(i, e),
            gmp_ev_GMP_EV_KICK => {
                if e.sub == gmp_why_GMP_WHY_RECHECK {
                    self.report.recheck_kicks += 1;
                } else if e.sub == gmp_why_GMP_WHY_WAKEP {
                    self.wakep(e);
                } else if e.sub == gmp_why_GMP_WHY_GRQ {
                    self.grq_kick(i, e);
                }
            }
            gmp_ev_GMP_EV_MOVE => self.moved(i, e),
            _ => self.violation(i, e.cpu, "event", format!("unknown kind {}", e.kind)),
        }
    }

    /// runqput / globrunqput / runqputslow: where a task went, and the LRQ
    /// never over its cap. A task woken while the trace has it queued was
    /// queued twice.
    fn put(&mut self, i: usize, e: &Event) {
        let cap = self.p.lrq_cap as i32;
        match e.sub {
            gmp_put_GMP_PUT_LRQ if e.n > cap => self.violation(
                i,
                e.cpu,
                "lrq-cap",
                format!("LRQ length {} after a put, over its cap {cap}", e.n),
            ),
            gmp_put_GMP_PUT_OVERFLOW if e.n < cap => self.violation(
                i,
                e.cpu,
                "overflow-only-when-full",
                format!("runqputslow with an LRQ of {} < cap {cap}", e.n),
            ),
            gmp_put_GMP_PUT_KTHREAD => self.report.kthread_puts += 1,
            gmp_put_GMP_PUT_IDLE => self.report.idle_puts += 1,
            _ => {}
        }
        if e.sub == gmp_put_GMP_PUT_GRQ && e.why == gmp_why_GMP_WHY_RETAKE {
            if let Some(c) = self.cpu(e.other) {
                c.retook = true;
            }
        }
        let woken = e.why == gmp_why_GMP_WHY_WAKE || e.why == gmp_why_GMP_WHY_ONCPU;
        if woken && self.queued.contains_key(&e.pid) {
            let q = self.queued[&e.pid];
            self.violation(
                i,
                e.cpu,
                "nothing-duplicated",
                format!(
                    "task {} woken ({}) while still queued since event {} ({})",
                    e.pid,
                    e.put_summary(),
                    q.index,
                    q.put.put_summary()
                ),
            );
        }
        let cpu = match e.sub {
            gmp_put_GMP_PUT_GRQ | gmp_put_GMP_PUT_OVERFLOW => -1,
            _ => e.cpu,
        };
        self.dequeue(e.pid, e.ts);
        // A kernel thread's wakeup and one put on an idle CPU go to that
        // CPU's local queue, which no other CPU can steal from.
        let local = matches!(e.sub, gmp_put_GMP_PUT_KTHREAD | gmp_put_GMP_PUT_IDLE);
        let stealable = e.allowed != 1 && !local;
        if stealable {
            self.slot_add(cpu, 1);
        }
        self.queued.insert(
            e.pid,
            Queued {
                ts: e.ts,
                index: i,
                cpu,
                stealable,
                put: *e,
            },
        );
    }

    /// The count slot of a queue: a CPU's, or the GRQ's (-1).
    fn slot_add(&mut self, cpu: i32, add: isize) {
        let slot = usize::try_from(cpu).unwrap_or(self.p.nprocs);
        if let Some(n) = self.count.get_mut(slot) {
            *n = n.saturating_add_signed(add);
        }
    }

    /// `pid` left the queues (it ran, slept, or was queued again). An idle
    /// CPU that has no more work elsewhere stops idling beside it.
    fn dequeue(&mut self, pid: i32, ts: u64) -> Option<Queued> {
        let q = self.queued.remove(&pid)?;
        if q.stealable {
            self.slot_add(q.cpu, -1);
        }
        let total: usize = self.count.iter().sum();
        for c in 0..self.cpus.len() {
            if self.cpus[c].idle_beside_work.is_some() && total == self.count[c] {
                self.end_idle(c as i32, ts);
            }
        }
        Some(q)
    }

    fn ran(&mut self, i: usize, e: &Event) {
        let pick = self.cpu(e.cpu).and_then(|c| c.last_pick.take());
        if let Some(q) = self.dequeue(e.pid, e.ts) {
            let wait = e.ts.saturating_sub(q.ts);
            if self.report.worst_wait.is_none_or(|w| wait > w.ns) {
                self.report.worst_wait = Some(WorstWait {
                    ns: wait,
                    pid: e.pid,
                    put: q.put,
                    pick,
                    run_index: i,
                });
            }
            if q.put.sub == gmp_put_GMP_PUT_GRQ && q.put.why == gmp_why_GMP_WHY_PROCRESIZE {
                self.report.released_waits_ns.push(wait);
            }
        }
        self.end_idle(e.cpu, e.ts);
        if let Some(c) = self.cpu(e.cpu) {
            c.idle_now = false;
            c.running = e.pid;
        }
    }

    /// proc.go pidleget: wakep() wakes the most recently idled P.
    fn wakep(&mut self, e: &Event) {
        let newest = (0..self.cpus.len())
            .filter(|&c| self.cpus[c].idle_now)
            .max_by_key(|&c| self.cpus[c].last_idle);
        if let Some(n) = newest {
            self.report.wakeps += 1;
            if n as i32 == e.cpu {
                self.report.wakeps_newest += 1;
            }
        }
        if let Some(c) = self.cpu(e.cpu) {
            c.idle_now = false;
        }
    }

    /// grq_put_kick(): a CPU kicked the others for task `pid`, which it
    /// had just put on the GRQ. Not Go's step, so only while the header
    /// turns it on; and the kernel inserts the task only after that
    /// enqueue, so no CPU can have taken it in between: the trace must
    /// still have it on the GRQ.
    fn grq_kick(&mut self, i: usize, e: &Event) {
        self.report.grq_kicks += 1;
        let on_grq = self
            .queued
            .get(&e.pid)
            .is_some_and(|q| q.put.sub == gmp_put_GMP_PUT_GRQ);
        if self.knobs.grq_kick == 0 {
            let detail = format!("a kick for task {} put on the GRQ, with grq_kick=0", e.pid);
            self.violation(i, e.other, "grq-kick", detail);
        } else if !on_grq {
            let detail = format!(
                "a kick for task {}, which the trace has not on the GRQ",
                e.pid
            );
            self.violation(i, e.other, "grq-kick", detail);
        }
    }

    fn end_idle(&mut self, cpu: i32, ts: u64) {
        let Some(c) = self.cpu(cpu) else { return };
        if let Some((since, at)) = c.idle_beside_work.take() {
            let d = ts.saturating_sub(since);
            if d > self.report.worst_idle_beside_work_ns {
                self.report.worst_idle_beside_work_ns = d;
                self.report.worst_idle_beside_work_at = at;
            }
        }
    }

    /// findRunnable's order, each source's size rule, and the 61st tick.
    fn pick(&mut self, i: usize, e: &Event) {
        self.report.picks += 1;
        self.end_idle(e.cpu, e.ts);
        if let Some(c) = self.cpu(e.cpu) {
            c.idle_now = false;
            c.last_pick = Some(*e);
        }
        let retook = self.cpu(e.cpu).map(|c| std::mem::take(&mut c.retook)) == Some(true);
        let p = self.p.clone();
        let tick_due = global_tick_due(e.schedtick as u64, p.global_every);
        let from = e.sub;
        if from == gmp_pick_GMP_PICK_TICK && !tick_due {
            self.violation(
                i,
                e.cpu,
                "global-tick",
                format!(
                    "a tick take at schedtick {}, not a multiple of {}",
                    e.schedtick, p.global_every
                ),
            );
        }
        // tick_grq: the GRQ as the tick check saw it (< 0: none may run here).
        let from_grq = matches!(
            from,
            gmp_pick_GMP_PICK_TICK | gmp_pick_GMP_PICK_AGED | gmp_pick_GMP_PICK_GRQ_BEFORE_IDLE
        );
        if !from_grq && tick_due && e.tick_grq > 0 {
            self.violation(
                i,
                e.cpu,
                "global-tick",
                format!(
                    "schedtick {} with {} tasks on the GRQ: the GRQ goes first, but the pick came from {}",
                    e.schedtick,
                    e.tick_grq,
                    e.name()
                ),
            );
        }
        let runnext_seen = e.seen_runnext > 0 && !retook;
        let order = |what: &str| {
            format!(
                "{what} (saw runnext {}, LRQ {}, GRQ {})",
                e.seen_runnext, e.seen_lrq, e.seen_grq
            )
        };
        match from {
            gmp_pick_GMP_PICK_LRQ if runnext_seen => self.violation(
                i,
                e.cpu,
                "runnext-first",
                order("an LRQ pick with a runnext"),
            ),
            gmp_pick_GMP_PICK_BATCH => {
                if runnext_seen || e.seen_lrq > 0 {
                    self.violation(
                        i,
                        e.cpu,
                        "local-first",
                        order("a GRQ batch with local work"),
                    );
                }
                let want = batch_size(e.len.max(0) as usize, p.nprocs, p.lrq_cap) as i32;
                if e.want != want || e.n < 1 || e.n > e.want {
                    self.violation(
                        i,
                        e.cpu,
                        "batch-size",
                        format!(
                            "a batch from a GRQ of {} took {} of {}; Go takes min(len, len/{} + 1, {}) = {want}",
                            e.len, e.n, e.want, p.nprocs, p.lrq_cap / 2
                        ),
                    );
                }
            }
            gmp_pick_GMP_PICK_STEAL => {
                // seen_grq < 0: the batch found a GRQ none of which may run here.
                if runnext_seen || e.seen_lrq > 0 || e.seen_grq > 0 {
                    self.violation(
                        i,
                        e.cpu,
                        "steal-last",
                        order("a steal with work of its own or on the GRQ"),
                    );
                }
                let want = steal_count(e.len.max(0) as usize) as i32;
                if e.want != want || e.n < 1 || e.n > e.want {
                    self.violation(
                        i,
                        e.cpu,
                        "steal-half",
                        format!(
                            "a steal from an LRQ of {} took {} of {}; Go takes ceil({}/2) = {want}",
                            e.len, e.n, e.want, e.len
                        ),
                    );
                }
            }
            gmp_pick_GMP_PICK_STEAL_RUNNEXT => {
                if runnext_seen || e.seen_lrq > 0 || e.seen_grq > 0 {
                    self.violation(
                        i,
                        e.cpu,
                        "steal-last",
                        order("a steal with work of its own or on the GRQ"),
                    );
                }
                if e.round + 1 != p.steal_tries {
                    self.violation(
                        i,
                        e.cpu,
                        "runnext-last-round",
                        format!(
                            "took CPU {}'s runnext in round {} of {}; Go only in the last",
                            e.other,
                            e.round + 1,
                            p.steal_tries
                        ),
                    );
                }
                if !runnext_ripe(e.age, p.runnext_grace_ns) {
                    self.violation(
                        i,
                        e.cpu,
                        "runnext-grace",
                        format!(
                            "took CPU {}'s runnext after {} ns; the grace is {} ns",
                            e.other, e.age, p.runnext_grace_ns
                        ),
                    );
                }
            }
            gmp_pick_GMP_PICK_KEEP => self.report.kept_prev += 1,
            gmp_pick_GMP_PICK_HANDOFF => self.report.handoffs += 1,
            gmp_pick_GMP_PICK_AGED => self.report.aged += 1,
            gmp_pick_GMP_PICK_LRQ_AGED => {
                self.report.lrq_aged += 1;
                // age: how long the LRQ head had waited.
                let max = self.knobs.lrq_max_wait_ns;
                let ripe = max > 0 && e.age > max as i64;
                if !runnext_seen || e.seen_lrq <= 0 || !ripe {
                    self.violation(
                        i,
                        e.cpu,
                        "lrq-aged",
                        order(&format!(
                            "an LRQ head run before runnext after waiting {} ns; it may go first only with a runnext behind it and after lrq_max_wait_ns {max} (0: never)",
                            e.age
                        )),
                    );
                }
            }
            gmp_pick_GMP_PICK_PREEMPT => self.preempt(i, e),
            gmp_pick_GMP_PICK_LRQ_BEFORE_IDLE | gmp_pick_GMP_PICK_GRQ_BEFORE_IDLE => {
                self.report.before_idle += 1;
                // other: the SCHED_IDLE task passed over, on this CPU's
                // queues; len: the length of the queue the pick came from.
                let from_lrq = from == gmp_pick_GMP_PICK_LRQ_BEFORE_IDLE;
                let local = if from_lrq {
                    e.seen_lrq > 0
                } else {
                    e.seen_runnext > 0 || e.seen_lrq > 0
                };
                if !local || e.len < 1 || e.other <= 0 {
                    self.violation(
                        i,
                        e.cpu,
                        "before-idle",
                        order(&format!(
                            "{} from a queue of {} ahead of SCHED_IDLE task {}, with no such task queued here",
                            e.name(),
                            e.len,
                            e.other
                        )),
                    );
                }
            }
            _ => {}
        }
    }

    /// A wakeup run at once, preempting the task running on its CPU
    /// (bpf/main.bpf.c preempt_at_once): not Go's, which never preempts for
    /// a wakeup, so only by a rule the header turns on (`round`, enum
    /// gmp_preempt), only once the preempted task has run as long as that
    /// rule asks (`age`), and only the task that runs there (`other`).
    fn preempt(&mut self, i: usize, e: &Event) {
        self.report.preempts += 1;
        let k = &self.knobs;
        let (on, need, rule) = match e.round {
            gmp_preempt_GMP_PREEMPT_IDLE => (k.idle_slice_ns > 0, 0, "idle_slice_ns"),
            gmp_preempt_GMP_PREEMPT_CROSS => (
                k.cross_preempt_ns > 0,
                k.cross_preempt_ns,
                "cross_preempt_ns",
            ),
            gmp_preempt_GMP_PREEMPT_ANY => (
                k.wakeup_preempt_ns > 0,
                k.wakeup_preempt_ns,
                "wakeup_preempt_ns",
            ),
            _ => (false, 0, "no rule"),
        };
        if !on || e.age < need as i64 {
            let set = if on { "" } else { " (0: off in the header)" };
            self.violation(
                i,
                e.cpu,
                "preempt-after",
                format!(
                    "a wakeup preempted task {} after it ran {} ns, by {rule} {need}{set}",
                    e.other, e.age
                ),
            );
        }
        let running = self.cpu(e.cpu).map_or(0, |c| c.running);
        if e.other <= 0 || (running > 0 && running != e.other) {
            self.violation(
                i,
                e.cpu,
                "preempt-running",
                format!(
                    "a wakeup preempted task {}, but task {running} runs there",
                    e.other
                ),
            );
        }
    }

    /// Going idle: remember when, and whether work was queued elsewhere.
    /// The BPF side counts all the work queued elsewhere; the replay knows
    /// which of it another CPU may take.
    fn idle(&mut self, i: usize, e: &Event) {
        let total: usize = self.count.iter().sum();
        let own = usize::try_from(e.cpu)
            .ok()
            .and_then(|c| self.count.get(c))
            .copied();
        let elsewhere = total - own.unwrap_or(0);
        if let Some(c) = self.cpu(e.cpu) {
            c.last_idle = Some(e.ts);
            c.idle_now = true;
            if e.n > 0 && elsewhere > 0 && c.idle_beside_work.is_none() {
                c.idle_beside_work = Some((e.ts, i));
            }
        }
    }

    /// The spinning flag and nmspinning change together, one start and one
    /// stop at a time. Each change carries the CPU's spin_seq after it (odd:
    /// spinning); changes made on two CPUs may reach the ring buffer in the
    /// other order, so they apply in spin_seq order.
    fn spin(&mut self, i: usize, e: &Event) {
        let nprocs = self.p.nprocs;
        if e.nmspinning as usize > nprocs {
            self.violation(
                i,
                e.cpu,
                "nmspinning",
                format!("nmspinning {} with {nprocs} CPUs", e.nmspinning),
            );
        }
        let Ok(cpu) = usize::try_from(e.cpu) else {
            return;
        };
        let start = e.sub == 1;
        let seq = self.cpus[cpu].spin_seq;
        if e.n <= seq || start != (e.n & 1 == 1) {
            let what = if start {
                "started spinning while spinning: nmspinning counts it twice"
            } else {
                "stopped spinning while not spinning"
            };
            let detail = format!("{what} (spin_seq {} after {seq})", e.n);
            self.violation(i, e.cpu, "nmspinning", detail);
            return;
        }
        let (c, ahead) = (&mut self.cpus[cpu], &mut self.spins_ahead[cpu]);
        ahead.insert(e.n, i);
        while ahead.remove(&(c.spin_seq + 1)).is_some() {
            c.spin_seq += 1;
        }
        if ahead.len() > SPINS_AHEAD_MAX {
            self.spins_missing(cpu);
        }
    }

    /// Spin changes of `cpu` never arrived: report them, and go on from the
    /// first one that did.
    fn spins_missing(&mut self, cpu: usize) {
        let Some((first, at)) = self.spins_ahead[cpu].pop_first() else {
            return;
        };
        let seq = std::mem::replace(&mut self.cpus[cpu].spin_seq, first);
        let detail = format!("spin changes {} to {} never arrived", seq + 1, first - 1);
        self.violation(at, cpu as i32, "nmspinning", detail);
    }

    /// runqputslow's late half-move, and the runnext kick's.
    fn moved(&mut self, i: usize, e: &Event) {
        match e.sub {
            gmp_move_GMP_MOVE_PENDING => {
                if let Some(c) = self.cpu(e.cpu) {
                    c.overflow_due += 1;
                }
            }
            gmp_move_GMP_MOVE_OVERFLOW => {
                self.report.late_moves += 1;
                let due = self.cpu(e.cpu).is_some_and(|c| {
                    let due = c.overflow_due > 0;
                    c.overflow_due = c.overflow_due.saturating_sub(1);
                    due
                });
                if !due {
                    self.violation(
                        i,
                        e.cpu,
                        "overflow-once",
                        "a half-move with no overflow due: one overflow moved twice".into(),
                    );
                }
                // A move short of half is Go's failed CAS: other CPUs took
                // from the head meanwhile, and the walk stopped once the LRQ
                // (`lrq=` when it stopped) was down by half.
                let want = overflow_count(e.len.max(0) as usize) as i32;
                let others_took = e.n < want && e.seen_lrq <= e.len - want;
                if e.want == want && others_took {
                    self.report.short_overflows += 1;
                }
                if e.want != want || (e.n != want && !others_took) {
                    self.violation(
                        i,
                        e.cpu,
                        "overflow-half",
                        format!(
                            "an overflow moved {} of an LRQ of {} and left {}; Go moves {}/2 = {want}, \
                             or none when others took them first",
                            e.n, e.len, e.seen_lrq, e.len
                        ),
                    );
                }
                // Those tasks now wait on the GRQ (which ones the trace
                // does not say: the oldest half, in Go).
                let mut left = e.n.max(0) as usize;
                let mut from_cpu: Vec<_> = self
                    .queued
                    .iter_mut()
                    .filter(|(_, q)| q.cpu == e.cpu && q.stealable)
                    .map(|(_, q)| q)
                    .collect();
                from_cpu.sort_by_key(|q| q.index);
                for q in from_cpu {
                    if left == 0 {
                        break;
                    }
                    q.cpu = -1;
                    left -= 1;
                }
                let moved = e.n.max(0) as isize - left as isize;
                self.slot_add(e.cpu, -moved);
                self.slot_add(-1, moved);
            }
            _ => self.report.late_moves += 1,
        }
    }

    /// Tasks still queued: lost if a CPU that could take them idled well
    /// after they were queued.
    fn finish(&mut self, last_ts: u64) {
        self.report.still_queued = self.queued.len();
        let mut lost: Vec<(i32, Queued)> = self
            .queued
            .iter()
            .map(|(&pid, &q)| (pid, q))
            .filter(|(_, q)| {
                let idled_after = |c: &Cpu| c.last_idle.is_some_and(|t| t > q.ts + LOST_NS);
                match usize::try_from(q.cpu) {
                    Ok(c) => self.cpus.get(c).is_some_and(idled_after),
                    Err(_) => self.cpus.iter().any(idled_after),
                }
            })
            .collect();
        lost.sort_by_key(|(_, q)| q.index);
        for (pid, q) in lost {
            self.violation(
                q.index,
                q.cpu,
                "nothing-lost",
                format!(
                    "task {pid} queued {:.1} s before the trace ended and never ran, while its CPUs idled",
                    last_ts.saturating_sub(q.ts) as f64 / 1e9
                ),
            );
        }
        for c in 0..self.cpus.len() {
            self.end_idle(c as i32, last_ts);
            self.spins_missing(c);
        }
        if self.report.worst_idle_beside_work_ns > IDLE_BESIDE_WORK_NS {
            let at = self.report.worst_idle_beside_work_at;
            self.violation(
                at,
                -1,
                "idle-beside-work",
                format!(
                    "a CPU idled {:.1} ms while work it could steal was queued elsewhere",
                    self.report.worst_idle_beside_work_ns as f64 / 1e6
                ),
            );
        }
    }
}

/// Check a whole trace.
pub fn check(input: impl BufRead) -> Result<Report> {
    let mut lines = input.lines();
    let first = lines.next().context("an empty trace")??;
    let header = trace::parse_header(&first)?;
    if header.params.nprocs == 0 {
        bail!("a trace of 0 CPUs");
    }
    let mut checker = Checker::new(header);
    let (mut index, mut last_ts, mut ended) = (0usize, 0u64, false);
    for (n, line) in lines.enumerate() {
        let line = line?;
        if line == trace::RESTART {
            checker.restart();
            continue;
        }
        if let Some(rest) = line.strip_prefix(trace::END) {
            let dropped = rest.trim().strip_prefix("dropped=").unwrap_or("0");
            checker.report.dropped = dropped.parse().context("bad '# end dropped=N' line")?;
            ended = true;
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let e = Event::parse(&line).with_context(|| format!("line {}", n + 2))?;
        last_ts = last_ts.max(e.ts);
        checker.event(index, &e);
        index += 1;
    }
    if !ended {
        bail!("the trace has no '{}' line: it was cut short", trace::END);
    }
    checker.finish(last_ts);
    Ok(checker.report)
}

/// `scx_gmp check FILE`: print the report; an error when a rule was broken
/// or events were dropped (a trace with holes proves nothing).
pub fn run(path: &std::path::Path) -> Result<()> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let report = check(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not a readable scx_gmp trace", path.display()))?;
    println!("{report}");
    if !report.ok() {
        bail!("{} violations of Go's rules", report.violations.len());
    }
    if report.dropped > 0 {
        bail!(
            "{} events were dropped: the ring buffer was full, so the trace has holes",
            report.dropped
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace_of(lines: &[&str]) -> String {
        let mut t = trace::header(&trace::Header {
            knobs: trace::Knobs {
                lrq_max_wait_ns: 1_000_000,
                cross_preempt_ns: 250_000,
                idle_slice_ns: 1_000_000,
                ..Default::default()
            },
            ..trace::Header::go(2)
        });
        t.push('\n');
        for l in lines {
            t.push_str(l);
            t.push('\n');
        }
        t.push_str("# end dropped=0\n");
        t
    }

    fn rules(lines: &[&str]) -> Vec<&'static str> {
        rules_in(&trace_of(lines))
    }

    /// The rules a whole trace breaks.
    fn rules_in(trace: &str) -> Vec<&'static str> {
        let r = check(trace.as_bytes()).unwrap();
        r.violations.iter().map(|v| v.rule).collect()
    }

    #[test]
    fn a_clean_hand_off_passes() {
        let v = rules(&[
            "10 put.runnext why=wake cpu=0 pid=5 n=0",
            "20 pick.runnext cpu=0 pid=5 n=1 want=1 tick=1",
            "30 run.1 cpu=0 pid=5",
        ]);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_released_task_s_wait_is_measured_from_its_global_put() {
        let r = check(
            trace_of(&[
                "10 put.lrq why=wake cpu=1 pid=5 n=1",
                "1000 put.grq why=procresize cpu=-1 pid=5 n=1",
                "1000 put.grq why=expire cpu=-1 pid=6 n=2",
                "4000 run.1 cpu=0 pid=5",
                "9000 run.1 cpu=0 pid=6",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(r.released_waits_ns, vec![3000], "only pid 5 was released");
        assert!(r.to_string().contains("procresize): 1 ran"), "{r}");
    }

    #[test]
    fn the_worst_wait_names_its_put_and_the_pick_that_ended_it() {
        let r = check(
            trace_of(&[
                "10 put.grq why=expire cpu=-1 pid=5 n=1",
                "20 put.lrq why=wake cpu=0 pid=6 n=1",
                "30 pick.lrq cpu=0 pid=6 n=1 want=1 tick=1 lrq=1",
                "40 run.1 cpu=0 pid=6",
                "9000 pick.aged cpu=0 pid=-1 n=1 want=1 tick=2 len=1",
                "9010 run.1 cpu=0 pid=5",
            ])
            .as_bytes(),
        )
        .unwrap();
        let w = r.worst_wait.expect("a worst wait");
        assert_eq!(w.ns, 9000);
        assert_eq!(w.pid, 5, "pid 6 waited 20 ns, pid 5 9000 ns");
        assert_eq!(w.put.put_summary(), "put.grq why=expire cpu=-1");
        assert_eq!(w.pick.map(|p| p.name()).as_deref(), Some("pick.aged"));
        assert_eq!(w.run_index, 5);
        assert!(
            r.to_string()
                .contains("worst wait: pid 5 put by put.grq why=expire cpu=-1, run after pick.aged at event 5"),
            "{r}"
        );
    }

    #[test]
    fn a_sync_hand_off_is_counted_as_a_difference_from_go() {
        let r = check(
            trace_of(&[
                "10 put.runnext why=wake cpu=0 pid=5 n=0",
                "20 pick.handoff cpu=0 pid=5 n=1 want=1 tick=61 rn=1",
                "30 run.1 cpu=0 pid=5",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert!(r.ok(), "{r}");
        assert_eq!(r.handoffs, 1);
        assert!(
            r.to_string().contains("1 sync hand-offs run directly"),
            "{r}"
        );
    }

    #[test]
    fn wakeps_to_the_most_recently_idled_cpu_are_counted() {
        let r = check(
            trace_of(&[
                "10 idle.0 cpu=1",
                "20 idle.0 cpu=0",
                "30 kick.wakep cpu=0 other=1",
                "40 pick.runnext cpu=0 pid=5 n=1 want=1 tick=1",
                "50 idle.0 cpu=0",
                // CPU 1 idled first: Go's idle stack has CPU 0 on top.
                "60 kick.wakep cpu=1 other=0",
                "65 run.1 cpu=0 pid=6",
                // Nothing idle by the trace: not counted either way.
                "70 kick.wakep cpu=0 other=1",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert!(r.ok(), "{r}");
        assert_eq!((r.wakeps_newest, r.wakeps), (1, 2));
        assert!(
            r.to_string()
                .contains("pidleget: 1 of 2 wakeps woke the most recently idled CPU"),
            "{r}"
        );
    }

    #[test]
    fn the_61st_tick_must_take_from_the_grq() {
        assert_eq!(
            rules(&["20 pick.lrq cpu=0 pid=-1 n=1 want=1 tick=61 grq=3 tgrq=3"]),
            ["global-tick"]
        );
        assert_eq!(
            rules(&["20 pick.tick cpu=0 n=1 want=1 tick=60 grq=3"]),
            ["global-tick"]
        );
        assert!(rules(&["20 pick.tick cpu=0 n=1 want=1 tick=122 grq=3"]).is_empty());
    }

    #[test]
    fn batch_and_steal_sizes_are_go_s() {
        // GRQ of 10 on 2 CPUs: min(10, 6, 128) = 6.
        assert!(rules(&["1 pick.batch cpu=0 n=6 want=6 len=10 tick=1"]).is_empty());
        assert_eq!(
            rules(&["1 pick.batch cpu=0 n=5 want=5 len=10 tick=1"]),
            ["batch-size"]
        );
        // A steal from 7 takes 4.
        assert!(rules(&["1 pick.steal cpu=0 other=1 n=4 want=4 len=7 tick=1"]).is_empty());
        assert_eq!(
            rules(&["1 pick.steal cpu=0 other=1 n=3 want=3 len=7 tick=1"]),
            ["steal-half"]
        );
    }

    #[test]
    fn runnext_is_stolen_last_and_only_after_the_grace() {
        let ok = "1 pick.steal-runnext cpu=0 other=1 n=1 want=1 tick=1 round=3 age=3000";
        assert!(rules(&[ok]).is_empty());
        assert_eq!(
            rules(&["1 pick.steal-runnext cpu=0 other=1 n=1 want=1 tick=1 round=2 age=3000"]),
            ["runnext-last-round"]
        );
        assert_eq!(
            rules(&["1 pick.steal-runnext cpu=0 other=1 n=1 want=1 tick=1 round=3 age=-20"]),
            ["runnext-grace"]
        );
    }

    #[test]
    fn findrunnable_order_is_checked() {
        assert_eq!(
            rules(&["1 pick.lrq cpu=0 tick=1 rn=1 lrq=2"]),
            ["runnext-first"]
        );
        // A runnext retaken to the GRQ just before is no longer there.
        assert!(rules(&[
            "1 put.grq why=retake cpu=-1 pid=4 other=0 n=1",
            "2 pick.lrq cpu=0 tick=1 rn=1 lrq=2",
        ])
        .is_empty());
        assert_eq!(
            rules(&["1 pick.steal cpu=0 other=1 n=1 want=1 len=1 tick=1 grq=2"]),
            ["steal-last"]
        );
        assert_eq!(
            rules(&["1 pick.steal cpu=0 other=1 n=1 want=1 len=1 tick=1 lrq=1"]),
            ["steal-last"]
        );
        // An LRQ that held only tasks that may not run here (lrq < 0) is empty to Go.
        assert!(rules(&["1 pick.steal cpu=0 other=1 n=1 want=1 len=1 tick=1 lrq=-1"]).is_empty());
        assert!(rules(&["1 pick.batch cpu=0 n=1 want=1 len=1 tick=1 lrq=-2"]).is_empty());
    }

    #[test]
    fn an_lrq_head_goes_before_runnext_only_once_it_has_waited_long_enough() {
        // trace_of's header: lrq_max_wait_ns=1000000.
        let ok = trace_of(&[
            "1 put.lrq why=wake cpu=0 pid=4 n=1",
            "2 put.runnext why=wake cpu=0 pid=6 n=0",
            "1000003 pick.lrq-aged cpu=0 pid=-1 other=-1 n=1 want=1 len=1 tick=1 rn=1 lrq=1 age=1000002",
            "1000004 run.0 cpu=0 pid=4",
        ]);
        let r = check(ok.as_bytes()).unwrap();
        assert!(r.ok(), "{r}");
        assert_eq!(r.lrq_aged, 1);
        assert!(
            r.to_string().contains("1 LRQ heads run before runnext"),
            "{r}"
        );
        // Too young, no runnext behind it, or the knob off: Go's order.
        let young = ok.replace("age=1000002", "age=999999");
        let alone = ok.replace(" rn=1", "");
        let off = ok.replace("lrq_max_wait_ns=1000000", "lrq_max_wait_ns=0");
        for t in [young, alone, off] {
            assert_eq!(rules_in(&t), ["lrq-aged"], "{t}");
        }
    }

    #[test]
    fn a_wakeup_preempts_at_once_only_by_a_rule_the_header_turns_on() {
        // trace_of's header: cross_preempt_ns=250000, idle_slice_ns=1000000,
        // wakeup_preempt_ns=0. Rule 1 is GMP_PREEMPT_CROSS.
        let ok = trace_of(&[
            "1 run.0 cpu=0 pid=7",
            "250002 put.runnext why=wake cpu=0 pid=5 n=0",
            "250003 pick.preempt cpu=0 pid=5 other=7 n=1 want=1 tick=1 rn=1 round=1 age=250001",
            "250004 run.0 cpu=0 pid=5",
            "250005 put.lrq why=preempt cpu=0 pid=7 n=1",
        ]);
        let r = check(ok.as_bytes()).unwrap();
        assert!(r.ok(), "{r}");
        assert_eq!(r.preempts, 1);
        assert!(
            r.to_string().contains("1 wakeups run at once, preempting"),
            "{r}"
        );
        // A SCHED_IDLE task (rule 0) at once, while --idle-slice-us is on.
        let idle = ok.replace("round=1 age=250001", "round=0 age=3");
        assert!(check(idle.as_bytes()).unwrap().ok());
        // Too soon, by a rule that is off, or not the task that runs there.
        let soon = ok.replace("age=250001", "age=249999");
        let any_off = ok.replace("round=1", "round=2");
        let cross_off = ok.replace("cross_preempt_ns=250000", "cross_preempt_ns=0");
        let idle_off = idle.replace("idle_slice_ns=1000000", "idle_slice_ns=0");
        for t in [soon, any_off, cross_off, idle_off] {
            assert_eq!(rules_in(&t), ["preempt-after"], "{t}");
        }
        let other = ok.replace("other=7", "other=8");
        assert_eq!(rules_in(&other), ["preempt-running"], "{other}");
    }

    #[test]
    fn a_grq_kick_follows_a_grq_put_only_with_the_knob_on() {
        let on = |t: &str| t.replace("grq_kick=0", "grq_kick=1");
        let ok = on(&trace_of(&[
            "10 put.grq why=expire cpu=-1 pid=5 n=1",
            "11 kick.grq cpu=-1 pid=5 other=1",
            "20 pick.batch cpu=0 pid=5 n=1 want=1 len=1 tick=1 grq=1",
        ]));
        let r = check(ok.as_bytes()).unwrap();
        assert!(r.ok(), "{r}");
        assert_eq!(r.grq_kicks, 1);
        assert!(r.to_string().contains("1 kicks after a GRQ put"), "{r}");
        // Go's globrunqput (--go-grq-put) wakes CPUs only through wakep().
        let off = ok.replace("grq_kick=1", "grq_kick=0");
        assert_eq!(rules_in(&off), ["grq-kick"], "{off}");
        // For a task on an LRQ, or one not queued at all.
        let lrq = ok.replace("put.grq why=expire cpu=-1", "put.lrq why=expire cpu=1");
        let other = ok.replace("pid=5 other=1", "pid=6 other=1");
        for t in [lrq, other] {
            assert!(rules_in(&t).contains(&"grq-kick"), "{t}");
        }
    }

    #[test]
    fn a_task_run_before_a_sched_idle_one_needs_one_queued_here() {
        let r = check(
            trace_of(&[
                "1 put.lrq why=preempt cpu=0 pid=4 n=1",
                "2 put.lrq why=wake cpu=0 pid=6 n=2",
                "3 put.grq why=expire cpu=-1 pid=5 n=1",
                "4 pick.lrq-before-idle cpu=0 pid=6 other=4 n=1 want=1 len=2 tick=1 lrq=2 grq=1",
                "5 run.0 cpu=0 pid=6",
                "6 pick.grq-before-idle cpu=0 pid=5 other=4 n=1 want=1 len=1 tick=2 lrq=1 grq=1",
                "7 run.0 cpu=0 pid=5",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert!(r.ok(), "{r}");
        assert_eq!(r.before_idle, 2);
        assert!(
            r.to_string().contains("2 run before a SCHED_IDLE task"),
            "{r}"
        );
        // Nothing local to pass over: Go's order applies, not this rule.
        let bare = "1 pick.grq-before-idle cpu=0 pid=5 other=4 n=1 want=1 len=1 tick=1 grq=1";
        assert_eq!(rules(&[bare]), ["before-idle"]);
        // A runnext SCHED_IDLE task is passed over for the GRQ, not for an empty LRQ.
        assert!(rules(&[&bare.replace("grq=1", "grq=1 rn=1")]).is_empty());
        assert_eq!(
            rules(&["1 pick.lrq-before-idle cpu=0 pid=6 other=4 n=1 want=1 len=1 tick=1 rn=1"]),
            ["before-idle"]
        );
        // A GRQ take counts as the 61st tick's; an LRQ one does not.
        let tick = "n=1 want=1 len=1 tick=61 lrq=1 grq=1 tgrq=1";
        assert!(rules(&[&format!(
            "1 pick.grq-before-idle cpu=0 pid=5 other=4 {tick}"
        )])
        .is_empty());
        assert_eq!(
            rules(&[&format!(
                "1 pick.lrq-before-idle cpu=0 pid=6 other=4 {tick}"
            )]),
            ["global-tick"]
        );
    }

    #[test]
    fn overflow_moves_half_once() {
        let pending = "1 move.pending cpu=0 other=0";
        assert!(rules(&[
            pending,
            "2 move.overflow cpu=0 n=128 want=128 len=256 lrq=128"
        ])
        .is_empty());
        assert_eq!(
            rules(&[
                pending,
                "2 move.overflow cpu=0 n=64 want=64 len=256 lrq=192"
            ]),
            ["overflow-half"]
        );
        assert_eq!(
            rules(&[
                pending,
                "2 move.overflow cpu=0 n=128 want=128 len=256 lrq=128",
                "3 move.overflow cpu=0 n=64 want=64 len=128 lrq=64",
            ]),
            ["overflow-once"]
        );
        // Short of half, because thieves took from the head during the
        // walk: fine once the LRQ is down by half, a violation before.
        let short = [
            pending,
            "2 move.overflow cpu=0 n=3 want=128 len=256 lrq=120",
        ];
        let r = check(trace_of(&short).as_bytes()).unwrap();
        assert!(r.violations.is_empty());
        assert_eq!(r.short_overflows, 1);
        assert_eq!(
            rules(&[
                pending,
                "2 move.overflow cpu=0 n=3 want=128 len=256 lrq=200"
            ]),
            ["overflow-half"]
        );
        // A second overflow due while the first one's move was made: two
        // moves, each after its own pending.
        assert!(rules(&[
            pending,
            "2 move.pending cpu=0 other=1",
            "3 move.overflow cpu=0 n=128 want=128 len=256 lrq=128",
            "4 move.overflow cpu=0 n=64 want=64 len=128 lrq=64",
        ])
        .is_empty());
        assert_eq!(
            rules(&["1 put.lrq why=wake cpu=0 pid=3 n=257"]),
            ["lrq-cap"]
        );
    }

    #[test]
    fn a_double_spin_is_a_leaked_nmspinning() {
        assert!(rules(&["1 spin.1 cpu=1 n=1 nms=1", "2 spin.0 cpu=1 n=2 nms=0"]).is_empty());
        assert_eq!(
            rules(&["1 spin.1 cpu=1 n=1 nms=1", "2 spin.1 cpu=1 n=1 nms=2"]),
            ["nmspinning"]
        );
        assert_eq!(
            rules(&["1 spin.0 cpu=1 n=1 nms=0"]),
            ["nmspinning"],
            "a stop that is odd"
        );
    }

    #[test]
    fn spin_changes_apply_in_spin_seq_order() {
        // wakep on CPU 0 started CPU 1 (seq 1), which stopped (seq 2) and
        // reached the ring buffer first.
        assert!(rules(&["1 spin.0 cpu=1 n=2 nms=0", "2 spin.1 cpu=1 n=1 nms=1"]).is_empty());
        // A change that never arrives is reported at the end.
        assert_eq!(
            rules(&["1 spin.1 cpu=1 n=1 nms=1", "2 spin.1 cpu=1 n=3 nms=1"]),
            ["nmspinning"]
        );
    }

    #[test]
    fn a_task_that_never_runs_while_cpus_idle_is_lost() {
        let v = rules(&[
            "1000 put.lrq why=wake cpu=1 pid=9 n=1",
            "3000000000 idle.0 cpu=1",
        ]);
        assert_eq!(v, ["nothing-lost"]);
        // Another CPU idling says nothing about a task on CPU 1's queue...
        assert!(rules(&[
            "1000 put.lrq why=wake cpu=1 pid=9 n=1",
            "3000000000 idle.0 cpu=0"
        ])
        .is_empty());
        // ...and a task that ran is not lost.
        assert!(rules(&[
            "1000 put.lrq why=wake cpu=1 pid=9 n=1",
            "2000 run.0 cpu=1 pid=9",
            "3000000000 idle.0 cpu=1",
        ])
        .is_empty());
        assert_eq!(
            rules(&[
                "1 put.lrq why=wake cpu=1 pid=9 n=1",
                "2 put.lrq why=wake cpu=1 pid=9 n=2"
            ]),
            ["nothing-duplicated"]
        );
        // Its detail names both puts, to tell which path queued it twice.
        let r = check(
            trace_of(&[
                "1 put.grq why=requeue cpu=-1 pid=9 n=1",
                "2 put.lrq why=wake cpu=1 pid=9 n=1",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            r.violations[0].detail,
            "task 9 woken (put.lrq why=wake cpu=1) while still queued since event 0 (put.grq why=requeue cpu=-1)"
        );
    }

    #[test]
    fn idling_beside_work_lasts_until_the_work_is_taken() {
        let r = check(
            trace_of(&[
                "1000 put.runnext why=wake cpu=0 pid=7 n=0",
                "2000 idle.0 cpu=1 n=1",
                "5000 run.1 cpu=0 pid=7",
                "900000000 run.0 cpu=1 pid=8",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(r.worst_idle_beside_work_ns, 3000);
        // A task pinned to CPU 0 is not work for CPU 1.
        let r = check(
            trace_of(&[
                "1000 put.lrq why=wake cpu=0 pid=7 n=1 allowed=1",
                "2000 idle.0 cpu=1 n=1",
                "900000000 run.0 cpu=1 pid=8",
            ])
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(r.worst_idle_beside_work_ns, 0);
        // Nor is a wakeup put straight in CPU 0's local queue (an idle
        // CPU's, or a kernel thread's).
        for put in ["put.idle", "put.kthread"] {
            let r = check(
                trace_of(&[
                    &format!("1000 {put} why=wake cpu=0 pid=7 n=0"),
                    "2000 idle.0 cpu=1 n=1",
                    "900000000 run.0 cpu=1 pid=8",
                ])
                .as_bytes(),
            )
            .unwrap();
            assert_eq!(r.worst_idle_beside_work_ns, 0, "{put}");
        }
        // Work that nobody takes keeps it going, up to a violation.
        let v = rules(&[
            "1000 put.lrq why=wake cpu=0 pid=7 n=1",
            "2000 idle.0 cpu=1 n=1",
            "2000002000 run.0 cpu=1 pid=8",
        ]);
        assert_eq!(v, ["idle-beside-work"]);
    }

    #[test]
    fn a_trace_without_its_end_is_refused() {
        let t = trace_of(&["1 run.0 cpu=0 pid=1"]).replace("# end dropped=0\n", "");
        assert!(check(t.as_bytes()).is_err());
    }
}
