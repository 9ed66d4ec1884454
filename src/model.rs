//! The Go scheduling policy as a pure model: Ps with a ring-buffer local run
//! queue and a `runnext` slot, the global run queue, `schedtick`, spinning
//! and idle Ps. No kernel dependency; time is whatever the caller says.
//!
//! Each rule is one method named after its function in Go's
//! `src/runtime/proc.go`; the BPF scheduler (`bpf/main.bpf.c`) has a function
//! of the same name for each. Counters go to a [`Metrics`], the record every
//! mode reports.

use std::collections::VecDeque;

use crate::bpf_intf::*;
use crate::stats::Metrics;

/// Microseconds to nanoseconds: every knob is given in us and used in ns.
pub const fn us_to_ns(us: u64) -> u64 {
    us * gmp_consts_GMP_NSEC_PER_USEC as u64
}

/// A task (Go's G): an index into the model's task table.
pub type G = u32;

// ---- Go's rules as pure functions: the model below and the trace checker
// (src/check.rs) both use them, so that each exists once on the Rust side.

/// proc.go findRunnable: on every `every`-th schedtick (Go: 61st) a P takes
/// from the global queue before its own. `every` 0: never.
pub fn global_tick_due(schedtick: u64, every: u32) -> bool {
    every != 0 && schedtick.is_multiple_of(every as u64)
}

/// proc.go globrunqgetbatch: a batch from a global queue of `len` takes
/// min(len, len/nprocs + 1, cap/2).
pub fn batch_size(len: usize, nprocs: usize, lrq_cap: usize) -> usize {
    len.min(len / nprocs.max(1) + 1).min(lrq_cap / 2)
}

/// proc.go runqgrab: a steal takes ceil(n/2) of a victim's `n` LRQ tasks.
pub fn steal_count(n: usize) -> usize {
    n - n / 2
}

/// proc.go runqputslow: a full LRQ of `n` sends n/2, from its head, to the
/// global queue with the task that did not fit.
pub fn overflow_count(n: usize) -> usize {
    n / 2
}

/// proc.go runqgrab's usleep(3): a victim's runnext that waited `age_ns`
/// may be stolen once it is at least the grace old.
pub fn runnext_ripe(age_ns: i64, grace_ns: u64) -> bool {
    age_ns >= 0 && age_ns as u64 >= grace_ns
}

/// Go's constants, each a knob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Number of Ps (GOMAXPROCS, the managed CPUs).
    pub nprocs: usize,
    /// Capacity of each local run queue (`len(p.runq)`, 256).
    pub lrq_cap: usize,
    /// Every Nth schedtick takes one task from the global queue first (61);
    /// 0 disables the check.
    pub global_every: u32,
    /// Rounds of stealing before a P idles (`stealTries`, 4).
    pub steal_tries: u32,
    /// Time slice in ns (`forcePreemptNS`, 10 ms).
    pub slice_ns: u64,
    /// A runnext task that would inherit less than this (ns) is preempted
    /// to the global queue instead: sysmon's 20 us resolution.
    pub min_slice_ns: u64,
    /// A victim's runnext is stealable after waiting this long (3 us).
    pub runnext_grace_ns: u64,
    /// Seed of the random victim order.
    pub seed: u64,
}

impl Params {
    /// Go's defaults (`bpf/intf.h`) for `nprocs` Ps.
    pub fn go(nprocs: usize) -> Self {
        Self {
            nprocs,
            lrq_cap: gmp_defaults_GMP_LRQ_CAP_DFL as usize,
            global_every: gmp_defaults_GMP_GLOBAL_EVERY_DFL,
            steal_tries: gmp_defaults_GMP_STEAL_TRIES_DFL,
            slice_ns: us_to_ns(gmp_defaults_GMP_SLICE_US_DFL as u64),
            min_slice_ns: us_to_ns(gmp_defaults_GMP_MIN_SLICE_US_DFL as u64),
            runnext_grace_ns: us_to_ns(gmp_defaults_GMP_RUNNEXT_GRACE_US_DFL as u64),
            seed: 1,
        }
    }
}

/// The start-up line both agents log: every knob, in microseconds.
impl std::fmt::Display for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let us = |ns: u64| ns / us_to_ns(1);
        write!(
            f,
            "slice {} us, LRQ {}, global queue every {} schedticks, {} steal rounds, \
             runnext grace {} us, min slice {} us",
            us(self.slice_ns),
            self.lrq_cap,
            self.global_every,
            self.steal_tries,
            us(self.runnext_grace_ns),
            us(self.min_slice_ns)
        )
    }
}

/// Where a task may run (a CPU affinity mask).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Affinity {
    /// Every P.
    All,
    /// A bit per P.
    Set(Vec<u64>),
}

impl Affinity {
    /// Only the Ps in `ps`.
    pub fn only(ps: &[usize]) -> Self {
        let words = ps.iter().max().map_or(0, |&m| m / 64 + 1);
        let mut v = vec![0u64; words];
        for &p in ps {
            v[p / 64] |= 1 << (p % 64);
        }
        Affinity::Set(v)
    }

    /// Exactly one P: the task is pinned (Go's G locked to its M).
    pub fn single(&self) -> bool {
        match self {
            Affinity::All => false,
            Affinity::Set(v) => v.iter().map(|w| w.count_ones()).sum::<u32>() == 1,
        }
    }

    pub fn allows(&self, p: usize) -> bool {
        match self {
            Affinity::All => true,
            Affinity::Set(v) => v.get(p / 64).is_some_and(|w| w & (1 << (p % 64)) != 0),
        }
    }
}

/// A P's local run queue: Go's fixed ring (`runqhead`, `runqtail`, `runq`).
#[derive(Clone, Debug)]
pub struct Lrq {
    buf: Box<[G]>,
    head: u32,
    tail: u32,
}

impl Lrq {
    fn new(cap: usize) -> Self {
        Self {
            buf: vec![0; cap].into_boxed_slice(),
            head: 0,
            tail: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.tail.wrapping_sub(self.head) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    pub fn is_full(&self) -> bool {
        self.len() >= self.buf.len()
    }

    fn slot(&self, i: u32) -> usize {
        i as usize % self.buf.len()
    }

    fn push_back(&mut self, g: G) {
        debug_assert!(!self.is_full());
        let s = self.slot(self.tail);
        self.buf[s] = g;
        self.tail = self.tail.wrapping_add(1);
    }

    fn pop_front(&mut self) -> Option<G> {
        if self.is_empty() {
            return None;
        }
        let g = self.buf[self.slot(self.head)];
        self.head = self.head.wrapping_add(1);
        Some(g)
    }

    /// Take the tail task (proc.go (*p).destroy: `runqtail--`).
    fn pop_back(&mut self) -> Option<G> {
        if self.is_empty() {
            return None;
        }
        self.tail = self.tail.wrapping_sub(1);
        Some(self.buf[self.slot(self.tail)])
    }

    /// The tasks, head first.
    pub fn iter(&self) -> impl Iterator<Item = G> + '_ {
        (0..self.len() as u32).map(move |i| self.buf[self.slot(self.head.wrapping_add(i))])
    }

    /// Remove up to `n` tasks for which `take` holds, from the head, into
    /// `out`; the others stay in order.
    fn take_where(&mut self, n: usize, out: &mut Vec<G>, mut take: impl FnMut(G) -> bool) {
        let len = self.len() as u32;
        let mut kept = 0u32;
        let mut got = 0;
        for i in 0..len {
            let g = self.buf[self.slot(self.head.wrapping_add(i))];
            if got < n && take(g) {
                out.push(g);
                got += 1;
            } else {
                let s = self.slot(self.head.wrapping_add(kept));
                self.buf[s] = g;
                kept += 1;
            }
        }
        self.tail = self.head.wrapping_add(kept);
    }
}

/// A processor: a CPU the scheduler manages.
#[derive(Clone, Debug)]
pub struct P {
    pub runq: Lrq,
    pub runnext: Option<G>,
    /// When `runnext` was last filled (ns).
    pub runnext_at: u64,
    /// Tasks started that did not inherit a slice.
    pub schedtick: u64,
    /// When the current (possibly shared) slice began (ns).
    pub tick_start: u64,
    pub spinning: bool,
    pub idle: bool,
    /// When sysmon retakes this P's spent slice (0: not spent yet).
    pub retake_at: u64,
}

/// What `schedule` decided for a P: run `g` for `slice_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub g: G,
    pub slice_ns: u64,
    /// `g` came from runnext and shares the slice of the task before it.
    pub inherit: bool,
}

/// The scheduler state (Go's `sched` plus `allp`).
#[derive(Clone, Debug)]
pub struct Sched {
    pub params: Params,
    pub ps: Vec<P>,
    /// The global run queue (`sched.runq`).
    pub runq: VecDeque<G>,
    pub nmspinning: usize,
    pub npidle: usize,
    /// Idle Ps, the most recently idled last (Go's `sched.pidle` list).
    pidle: Vec<usize>,
    /// Cumulative counters, one per rule.
    pub stats: Metrics,
    affinity: Vec<Affinity>,
    /// Task ids given back, for reuse (Go's `sched.gFree`).
    gfree: Vec<G>,
    coprimes: Vec<u32>,
    rng: u64,
    grab: Vec<G>,
}

/// proc.go randomOrder.reset: the strides coprime with `count`, so a walk
/// `pos = (pos + inc) % count` visits every P once.
pub fn coprimes(count: u32) -> Vec<u32> {
    fn gcd(mut a: u32, mut b: u32) -> u32 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    (1..=count.max(1)).filter(|&i| gcd(i, count) == 1).collect()
}

impl Sched {
    /// A scheduler whose Ps all start idle.
    pub fn new(params: Params) -> Self {
        assert!(params.nprocs > 0, "at least one P");
        assert!(params.lrq_cap >= 2, "an LRQ holds at least 2 tasks");
        let ps = (0..params.nprocs)
            .map(|_| P {
                runq: Lrq::new(params.lrq_cap),
                runnext: None,
                runnext_at: 0,
                schedtick: 0,
                tick_start: 0,
                spinning: false,
                idle: true,
                retake_at: 0,
            })
            .collect();
        Self {
            coprimes: coprimes(params.nprocs as u32),
            rng: params.seed ^ 0x9e37_79b9_7f4a_7c15,
            npidle: params.nprocs,
            pidle: (0..params.nprocs).rev().collect(),
            stats: Metrics {
                gomaxprocs: params.nprocs as u64,
                ..Default::default()
            },
            params,
            ps,
            runq: VecDeque::new(),
            nmspinning: 0,
            affinity: Vec::new(),
            gfree: Vec::new(),
            grab: Vec::new(),
        }
    }

    /// Register a task (Go's `newproc` allocating a G), reusing the id of
    /// one that `free_g` gave back (Go's `gfget`).
    pub fn new_g(&mut self, aff: Affinity) -> G {
        if let Some(g) = self.gfree.pop() {
            self.affinity[g as usize] = aff;
            return g;
        }
        self.affinity.push(aff);
        (self.affinity.len() - 1) as G
    }

    /// Give back the id of a task that exited (Go's `gfput`), for `new_g`
    /// to reuse. The caller makes sure the task is in no queue.
    pub fn free_g(&mut self, g: G) {
        self.affinity[g as usize] = Affinity::All;
        self.gfree.push(g);
    }

    /// Task ids in use: registered and not given back.
    pub fn live_gs(&self) -> usize {
        self.affinity.len() - self.gfree.len()
    }

    /// `g`'s CPU affinity changed (`sched_setaffinity`, a cpuset).
    pub fn set_affinity(&mut self, g: G, aff: Affinity) {
        self.affinity[g as usize] = aff;
    }

    /// A P that `g` may run on: `p` if allowed, else the first allowed.
    pub fn home(&self, g: G, p: usize) -> usize {
        if self.may_run(g, p) {
            return p;
        }
        (0..self.params.nprocs)
            .find(|&q| self.may_run(g, q))
            .unwrap_or(p)
    }

    /// `g` was queued where only some Ps may take it (its affinity is
    /// narrower than all). If none of those is awake, take one off the idle
    /// list and return it: `wakep` may wake a P that cannot run `g`. The BPF
    /// side's `globrunqput` does the same with an idle-CPU kick.
    pub fn wake_allowed(&mut self, g: G) -> Option<usize> {
        self.wake_allowed_but(g, None)
    }

    /// `g` was queued on `q`'s queues, and its affinity is narrower than
    /// all: only some Ps may steal it, and `wakep` may wake one that cannot.
    /// If no P other than `q` that may run `g` is awake, take one off the
    /// idle list and return it, so that a thief that can take `g` looks.
    /// Go needs no such rule: any P may run any G.
    pub fn wake_thief(&mut self, g: G, q: usize) -> Option<usize> {
        self.wake_allowed_but(g, Some(q))
    }

    /// `wake_allowed` and `wake_thief`: the Ps that may run `g`, `but` one.
    fn wake_allowed_but(&mut self, g: G, but: Option<usize>) -> Option<usize> {
        if self.affinity[g as usize] == Affinity::All {
            return None;
        }
        let mut allowed = (0..self.params.nprocs).filter(|&p| Some(p) != but && self.may_run(g, p));
        if allowed.clone().any(|p| !self.ps[p].idle) {
            return None;
        }
        let p = allowed.find(|p| self.pidle.contains(p))?;
        self.pidleremove(p);
        Some(p)
    }

    pub fn may_run(&self, g: G, p: usize) -> bool {
        self.affinity[g as usize].allows(p)
    }

    /// proc.go cheaprand: a seedable xorshift64*.
    fn cheaprand(&mut self) -> u32 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    /// proc.go runqput: put `g` in `p`'s runnext (`next`, displacing the old
    /// runnext to the LRQ tail) or at the LRQ tail; a full LRQ overflows.
    pub fn runqput(&mut self, p: usize, mut g: G, next: bool, now: u64) {
        let pp = &mut self.ps[p];
        if next {
            pp.runnext_at = now;
            self.stats.runnext_put += 1;
            match pp.runnext.replace(g) {
                None => return,
                Some(old) => {
                    self.stats.runnext_kick += 1;
                    g = old;
                }
            }
        }
        if pp.runq.is_full() {
            self.runqputslow(p, g);
        } else {
            pp.runq.push_back(g);
            self.stats.lrq_put += 1;
        }
    }

    /// proc.go runqputslow: move half of `p`'s full LRQ, from its head, and
    /// `g` to the global queue tail as one batch.
    pub fn runqputslow(&mut self, p: usize, g: G) {
        let pp = &mut self.ps[p];
        let n = overflow_count(pp.runq.len());
        for _ in 0..n {
            let x = pp.runq.pop_front().expect("half of a full LRQ");
            self.runq.push_back(x);
        }
        self.runq.push_back(g);
        self.stats.overflow += 1;
        self.stats.overflow_tasks += n as u64;
        self.stats.global_put += n as u64 + 1;
    }

    /// proc.go globrunqput: put `g` at the global queue tail (a slice that
    /// ran out, a yield, a task with nowhere else to go).
    pub fn globrunqput(&mut self, g: G) {
        self.runq.push_back(g);
        self.stats.global_put += 1;
    }

    /// proc.go globrunqputhead: put `g` at the global queue head (a
    /// destroyed P's queue, `procresize`).
    fn globrunqputhead(&mut self, g: G) {
        self.runq.push_front(g);
        self.stats.global_put += 1;
    }

    /// proc.go runqget: runnext first (the task inherits the slice), then
    /// the LRQ head.
    pub fn runqget(&mut self, p: usize) -> Option<(G, bool)> {
        let pp = &mut self.ps[p];
        if let Some(g) = pp.runnext.take() {
            self.stats.runnext_hit += 1;
            return Some((g, true));
        }
        let g = pp.runq.pop_front()?;
        self.stats.lrq_get += 1;
        Some((g, false))
    }

    /// proc.go globrunqget: take one task from the global queue head (the
    /// first that may run on `p`).
    pub fn globrunqget(&mut self, p: usize) -> Option<G> {
        let i = self.runq.iter().position(|&g| self.may_run(g, p))?;
        self.runq.remove(i)
    }

    /// proc.go globrunqgetbatch: take n = min(len, len/nprocs + 1, cap/2)
    /// tasks from the global queue; run the first, queue the rest on `p`.
    pub fn globrunqgetbatch(&mut self, p: usize) -> Option<G> {
        let len = self.runq.len();
        if len == 0 {
            return None;
        }
        let n = batch_size(len, self.params.nprocs, self.params.lrq_cap);
        let mut first = None;
        let mut got = 0;
        let mut i = 0;
        while got < n && i < self.runq.len() {
            let g = self.runq[i];
            if !self.may_run(g, p) {
                i += 1;
                continue;
            }
            self.runq.remove(i);
            got += 1;
            if first.is_none() {
                first = Some(g);
            } else if self.ps[p].runq.is_full() {
                self.runqputslow(p, g);
            } else {
                self.ps[p].runq.push_back(g);
            }
        }
        if first.is_some() {
            self.stats.global_batch += 1;
            self.stats.global_batch_tasks += got as u64;
        }
        first
    }

    /// proc.go runqgrab: take ceil(n/2) of `victim`'s LRQ (those that may
    /// run on `thief`) into `self.grab`; with an empty LRQ and
    /// `stealnext`, its runnext once that has waited the grace period.
    pub fn runqgrab(&mut self, thief: usize, victim: usize, stealnext: bool, now: u64) -> usize {
        let mut out = std::mem::take(&mut self.grab);
        out.clear();
        let n = self.ps[victim].runq.len();
        if n > 0 {
            let aff = &self.affinity;
            self.ps[victim]
                .runq
                .take_where(steal_count(n), &mut out, |g| aff[g as usize].allows(thief));
        }
        // Go looks at runnext only when the LRQ is empty; here also when
        // none of the LRQ may run on the thief (Go has no affinity).
        if out.is_empty() && stealnext {
            let vp = &self.ps[victim];
            if let Some(g) = vp.runnext {
                if runnext_ripe(
                    now as i64 - vp.runnext_at as i64,
                    self.params.runnext_grace_ns,
                ) && self.may_run(g, thief)
                {
                    self.ps[victim].runnext = None;
                    out.push(g);
                    self.stats.stolen_runnext += 1;
                }
            }
        }
        let got = out.len();
        self.grab = out;
        got
    }

    /// proc.go runqsteal: grab from `victim`, run the first task, queue the
    /// rest on `thief`.
    pub fn runqsteal(
        &mut self,
        thief: usize,
        victim: usize,
        stealnext: bool,
        now: u64,
    ) -> Option<G> {
        self.stats.steal_try += 1;
        let got = self.runqgrab(thief, victim, stealnext, now);
        if got == 0 {
            return None;
        }
        self.stats.steal_ok += 1;
        self.stats.stolen_tasks += got as u64;
        let grab = std::mem::take(&mut self.grab);
        for &g in &grab[1..] {
            self.ps[thief].runq.push_back(g);
        }
        let first = grab[0];
        self.grab = grab;
        Some(first)
    }

    /// proc.go stealWork: `steal_tries` rounds over the other, non-idle Ps
    /// in a random coprime-stride order; runnext only in the last round.
    pub fn steal_work(&mut self, p: usize, now: u64) -> Option<G> {
        let count = self.params.nprocs as u32;
        for round in 0..self.params.steal_tries {
            let last = round + 1 == self.params.steal_tries;
            let r = self.cheaprand();
            let mut pos = r % count;
            let inc = self.coprimes[((r / count) as usize) % self.coprimes.len()];
            for _ in 0..count {
                let victim = pos as usize;
                pos = (pos + inc) % count;
                if victim == p || self.ps[victim].idle {
                    continue;
                }
                if let Some(g) = self.runqsteal(p, victim, last, now) {
                    return Some(g);
                }
            }
        }
        None
    }

    /// proc.go findRunnable: the 61st-tick global check, runnext, the LRQ,
    /// a global batch, then stealing by a spinning P.
    pub fn find_runnable(&mut self, p: usize, now: u64) -> Option<(G, bool)> {
        if global_tick_due(self.ps[p].schedtick, self.params.global_every) && !self.runq.is_empty()
        {
            if let Some(g) = self.globrunqget(p) {
                self.stats.global_tick += 1;
                return Some((g, false));
            }
        }
        if let Some(r) = self.runqget(p) {
            return Some(r);
        }
        if let Some(g) = self.globrunqgetbatch(p) {
            return Some((g, false));
        }
        if !self.ps[p].spinning && self.may_spin() {
            self.ps[p].spinning = true;
            self.nmspinning += 1;
            self.stats.spins += 1;
        }
        if self.ps[p].spinning {
            return self.steal_work(p, now).map(|g| (g, false));
        }
        None
    }

    /// proc.go findRunnable's cap on spinning Ms: a P may start looking for
    /// work only while `2*nmspinning` is below the busy Ps.
    pub fn may_spin(&self) -> bool {
        2 * self.nmspinning < self.params.nprocs - self.npidle
    }

    /// proc.go wakep: if no P is spinning, wake an idle one to spin. Returns
    /// the P to start.
    pub fn wakep(&mut self) -> Option<usize> {
        if self.nmspinning != 0 {
            return None;
        }
        let p = self.pidleget()?;
        self.ps[p].spinning = true;
        self.nmspinning += 1;
        self.stats.kicks += 1;
        Some(p)
    }

    /// proc.go pidleput: `p` found nothing to run and idles. Its runnext
    /// chain ends here: the next task that inherits its slice after it wakes
    /// gets a new `min_slice_ns` grace (`inherit_slice`), as Go's sysmon,
    /// which looks only at running Ps, lets it run before it retakes it.
    /// Executed only by the owner P.
    fn pidleput(&mut self, p: usize) {
        self.ps[p].idle = true;
        self.ps[p].retake_at = 0;
        self.npidle += 1;
        self.pidle.push(p);
        self.stats.idle += 1;
    }

    /// proc.go pidleget: take the most recently idled P.
    fn pidleget(&mut self) -> Option<usize> {
        let p = self.pidle.pop()?;
        self.ps[p].idle = false;
        self.npidle -= 1;
        Some(p)
    }

    /// Take `p` off the idle list to run (the caller has work for it).
    pub fn pidleremove(&mut self, p: usize) {
        if let Some(i) = self.pidle.iter().position(|&x| x == p) {
            self.pidle.remove(i);
            self.ps[p].idle = false;
            self.npidle -= 1;
        }
    }

    /// `p` has no CPU behind it (offline): it idles, and `wakep` never wakes
    /// it. Its queues must be empty (`procresize` empties them). Any P.
    pub fn set_offline(&mut self, p: usize) {
        assert!(
            self.ps[p].runnext.is_none() && self.ps[p].runq.is_empty(),
            "an offline P queues nothing"
        );
        self.stop_spinning(p);
        if !self.ps[p].idle {
            self.ps[p].idle = true;
            self.npidle += 1;
        }
        self.pidle.retain(|&x| x != p);
    }

    /// `p`'s CPU came (back) online: its P joins the idle list, empty, for
    /// `wakep` to wake (proc.go procresize, for a P it creates). Any P.
    pub fn set_online(&mut self, p: usize) {
        assert!(self.ps[p].idle, "an offline P is idle");
        if !self.pidle.contains(&p) {
            self.pidle.push(p);
        }
    }

    /// `p`'s runnext and then its LRQ, in order, to the global queue tail,
    /// but for the tasks that `keep` keeps, which stay in its LRQ.
    fn queues_to_global(&mut self, p: usize, keep: impl Fn(&Self, G) -> bool) {
        let pp = &mut self.ps[p];
        let mut queued: Vec<G> = pp.runnext.take().into_iter().collect();
        while let Some(g) = pp.runq.pop_front() {
            queued.push(g);
        }
        for g in queued {
            if keep(self, g) {
                self.ps[p].runq.push_back(g);
            } else {
                self.globrunqput(g);
            }
        }
    }

    /// proc.go handoffp, as sysmon's `retake` calls it: `p`'s CPU is held by
    /// a real-time task (a P whose M is in a system call), so its queued
    /// work must not wait for it. Go hands the P itself to another M; a CPU
    /// cannot be handed over, so its tasks go to the global queue instead,
    /// except those that may run on `p` only. Executed by any other P.
    pub fn handoffp(&mut self, p: usize) {
        self.queues_to_global(p, |s, g| s.affinity[g as usize].single());
    }

    /// proc.go procresize, for a P it destroys: `p`'s CPU went offline. It
    /// stops spinning, and its runnext and then its LRQ, in order, go to the
    /// global queue's head, ahead of what waited there ((*p).destroy, which
    /// calls globrunqputhead from the LRQ's tail back). Any P.
    pub fn procresize(&mut self, p: usize) {
        self.stop_spinning(p);
        while let Some(g) = self.ps[p].runq.pop_back() {
            self.globrunqputhead(g);
        }
        if let Some(g) = self.ps[p].runnext.take() {
            self.globrunqputhead(g);
        }
    }

    /// proc.go resetspinning: `p` stops spinning.
    fn stop_spinning(&mut self, p: usize) -> bool {
        if !self.ps[p].spinning {
            return false;
        }
        self.ps[p].spinning = false;
        self.nmspinning -= 1;
        true
    }

    /// proc.go schedule + execute: find `p`'s next task and its slice, or
    /// idle `p`. The second value is a P that `wakep` woke, to start too.
    pub fn schedule(&mut self, p: usize, now: u64) -> (Option<Run>, Option<usize>) {
        self.schedule_or(p, now, true)
    }

    /// User mode's look-ahead: `p`'s CPU still runs a task, and `p` picks
    /// the one to run behind it (the agent commits it to the CPU ahead of
    /// time). As `schedule`, but a P that finds nothing does not idle: its
    /// CPU is busy, so `wakep` must not pick it to take new work that a
    /// truly idle P could run at once.
    pub fn schedule_behind(&mut self, p: usize, now: u64) -> (Option<Run>, Option<usize>) {
        self.schedule_or(p, now, false)
    }

    /// `schedule`; with nothing found, `p` idles only if `idle`.
    fn schedule_or(&mut self, p: usize, now: u64, idle: bool) -> (Option<Run>, Option<usize>) {
        debug_assert!(!self.ps[p].idle, "an idle P does not schedule");
        let found = loop {
            match self.find_runnable(p, now) {
                // sysmon's retake: past the shared slice and its 20 us grace,
                // the runnext task that would inherit it is preempted to the
                // global queue.
                Some((g, true)) if self.inherit_slice(p, now) == 0 => self.slice_expired(g),
                found => break found,
            }
        };
        let was_spinning = self.stop_spinning(p);
        let Some((g, inherit)) = found else {
            if !idle {
                return (None, None);
            }
            self.pidleput(p);
            return (None, None);
        };
        // A P that found work while spinning lets another take up the search.
        let woke = if was_spinning { self.wakep() } else { None };
        (Some(self.execute(p, g, inherit, now)), woke)
    }

    /// proc.go execute: a task that did not inherit starts a new schedtick
    /// and a full slice; an inheriting one gets what is left.
    pub fn execute(&mut self, p: usize, g: G, inherit: bool, now: u64) -> Run {
        let slice_ns = if inherit {
            self.inherit_slice(p, now)
        } else {
            let pp = &mut self.ps[p];
            pp.schedtick += 1;
            pp.tick_start = now;
            pp.retake_at = 0;
            self.params.slice_ns
        };
        Run {
            g,
            slice_ns,
            inherit,
        }
    }

    /// The slice a runnext task inherits on `p`: what is left of the
    /// current shared slice; once that is spent, what is left of one
    /// `min_slice_ns` grace for the whole chain (sysmon notices a spent
    /// slice within 20 us: a short task still finishes, a ping-pong pair
    /// loses the P). 0: sysmon has retaken it.
    pub fn inherit_slice(&mut self, p: usize, now: u64) -> u64 {
        let pp = &mut self.ps[p];
        let left = self
            .params
            .slice_ns
            .saturating_sub(now.saturating_sub(pp.tick_start));
        if left > 0 {
            return left;
        }
        if pp.retake_at == 0 {
            pp.retake_at = now + self.params.min_slice_ns;
        }
        pp.retake_at.saturating_sub(now)
    }

    /// The retake path (sysmon -> gopreempt_m): `g`'s slice ran out.
    pub fn slice_expired(&mut self, g: G) {
        self.stats.slice_expired += 1;
        self.globrunqput(g);
    }

    /// proc.go goschedImpl: `g` yields to the global queue.
    pub fn gosched(&mut self, g: G) {
        self.stats.yields += 1;
        self.globrunqput(g);
    }

    /// Go's schedtrace fields and the counters, as every mode reports them.
    pub fn metrics(&self, uptime_ms: u64, threads: u64) -> Metrics {
        Metrics {
            uptime_ms,
            gomaxprocs: self.params.nprocs as u64,
            idleprocs: self.npidle as u64,
            threads,
            spinningthreads: self.nmspinning as u64,
            runqueue: self.runq.len() as u64,
            lrq: self.ps.iter().map(|p| p.runq.len() as u64).collect(),
            ..self.stats.clone()
        }
    }

    /// How many tasks are queued, counted per queue (no walk over them).
    pub fn nr_queued(&self) -> usize {
        let local: usize = self
            .ps
            .iter()
            .map(|p| p.runq.len() + usize::from(p.runnext.is_some()))
            .sum();
        local + self.runq.len()
    }

    /// Every queued task: runnexts, LRQs and the global queue.
    pub fn queued(&self) -> impl Iterator<Item = G> + '_ {
        self.ps
            .iter()
            .flat_map(|p| p.runnext.into_iter().chain(p.runq.iter()))
            .chain(self.runq.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(nprocs: usize) -> Sched {
        let mut s = Sched::new(Params::go(nprocs));
        for p in 0..nprocs {
            s.pidleremove(p);
        }
        s
    }

    #[test]
    fn coprimes_walk_visits_every_p_once() {
        for count in 1..=12u32 {
            for &inc in &coprimes(count) {
                let mut seen = vec![false; count as usize];
                let mut pos = 3 % count;
                for _ in 0..count {
                    assert!(!seen[pos as usize], "count {count} inc {inc}");
                    seen[pos as usize] = true;
                    pos = (pos + inc) % count;
                }
            }
        }
        assert_eq!(coprimes(4), [1, 3]);
    }

    #[test]
    fn runqput_next_displaces_old_runnext_to_lrq_tail() {
        let mut s = busy(1);
        let (a, b, c) = (
            s.new_g(Affinity::All),
            s.new_g(Affinity::All),
            s.new_g(Affinity::All),
        );
        s.runqput(0, a, false, 0);
        s.runqput(0, b, true, 0);
        s.runqput(0, c, true, 0);
        assert_eq!(s.ps[0].runnext, Some(c));
        assert_eq!(s.ps[0].runq.iter().collect::<Vec<_>>(), [a, b]);
        assert_eq!(s.runqget(0), Some((c, true)));
        assert_eq!(s.runqget(0), Some((a, false)));
        assert_eq!(s.stats.runnext_kick, 1);
    }

    #[test]
    fn full_lrq_moves_half_and_the_task_to_global() {
        let mut s = busy(2);
        let gs: Vec<G> = (0..257).map(|_| s.new_g(Affinity::All)).collect();
        for &g in &gs[..256] {
            s.runqput(0, g, false, 0);
        }
        assert!(s.ps[0].runq.is_full());
        s.runqput(0, gs[256], false, 0);
        assert_eq!(s.ps[0].runq.len(), 128);
        let global: Vec<G> = s.runq.iter().copied().collect();
        let mut want: Vec<G> = gs[..128].to_vec();
        want.push(gs[256]);
        assert_eq!(global, want, "the LRQ head half, then the new task");
        assert_eq!(s.stats.overflow, 1);
        assert_eq!(s.stats.overflow_tasks, 128);
    }

    #[test]
    fn steal_takes_ceil_half_seven_leaves_three() {
        let mut s = busy(2);
        let gs: Vec<G> = (0..7).map(|_| s.new_g(Affinity::All)).collect();
        for &g in &gs {
            s.runqput(0, g, false, 0);
        }
        let got = s.runqsteal(1, 0, false, 0);
        assert_eq!(got, Some(gs[0]), "the thief runs the victim's head");
        assert_eq!(s.ps[0].runq.len(), 3);
        assert_eq!(s.ps[1].runq.iter().collect::<Vec<_>>(), gs[1..4]);
        assert_eq!(s.stats.stolen_tasks, 4);
        // One task: ceil(1/2) = 1, so a lone task still moves.
        let mut s = busy(2);
        let g = s.new_g(Affinity::All);
        s.runqput(0, g, false, 0);
        assert_eq!(s.runqsteal(1, 0, false, 0), Some(g));
    }

    #[test]
    fn steal_skips_tasks_that_may_not_run_on_the_thief() {
        let mut s = busy(2);
        let pinned = s.new_g(Affinity::only(&[0]));
        let free = s.new_g(Affinity::All);
        s.runqput(0, pinned, false, 0);
        s.runqput(0, free, false, 0);
        assert_eq!(s.runqsteal(1, 0, false, 0), Some(free));
        assert_eq!(s.ps[0].runq.iter().collect::<Vec<_>>(), [pinned]);
        assert_eq!(s.runqsteal(1, 0, true, 10_000), None);
    }

    #[test]
    fn runnext_is_stolen_only_in_the_last_round_after_the_grace() {
        let mut s = busy(2);
        let g = s.new_g(Affinity::All);
        s.runqput(0, g, true, 1_000);
        assert_eq!(
            s.runqsteal(1, 0, false, 10_000),
            None,
            "not before the last round"
        );
        assert_eq!(s.runqsteal(1, 0, true, 2_000), None, "not within 3 us");
        assert_eq!(s.runqsteal(1, 0, true, 4_000), Some(g));
        assert_eq!(s.stats.stolen_runnext, 1);
    }

    #[test]
    fn every_61st_tick_takes_from_global_even_with_local_work() {
        let mut s = busy(1);
        let local = s.new_g(Affinity::All);
        let global = s.new_g(Affinity::All);
        s.runqput(0, local, false, 0);
        s.globrunqput(global);
        s.ps[0].schedtick = 60;
        assert_eq!(s.find_runnable(0, 0), Some((local, false)));
        s.runqput(0, local, false, 0);
        s.ps[0].schedtick = 61;
        assert_eq!(s.find_runnable(0, 0), Some((global, false)));
        assert_eq!(s.stats.global_tick, 1);
    }

    #[test]
    fn global_batch_is_min_len_share_and_half_cap() {
        let mut s = busy(4);
        for _ in 0..400 {
            let g = s.new_g(Affinity::All);
            s.globrunqput(g);
        }
        s.ps[0].schedtick = 1;
        // min(400, 400/4 + 1, 128) = 101: one runs, 100 queue locally.
        assert!(s.find_runnable(0, 0).is_some());
        assert_eq!(s.ps[0].runq.len(), 100);
        assert_eq!(s.runq.len(), 299);
        assert_eq!(s.stats.global_batch_tasks, 101);
    }

    #[test]
    fn runnext_inherits_what_is_left_of_the_slice() {
        let mut s = busy(1);
        let (a, b) = (s.new_g(Affinity::All), s.new_g(Affinity::All));
        s.runqput(0, a, false, 0);
        let (run, _) = s.schedule(0, 0);
        assert_eq!(run.unwrap().slice_ns, 10_000_000);
        s.runqput(0, b, true, 4_000_000);
        let (run, _) = s.schedule(0, 4_000_000);
        let run = run.unwrap();
        assert_eq!((run.g, run.inherit, run.slice_ns), (b, true, 6_000_000));
        assert_eq!(
            s.ps[0].schedtick, 1,
            "an inherited slice is no new schedtick"
        );
    }

    /// One busy P running the first of `n` new tasks, from time 0.
    fn one_p_running(n: usize) -> (Sched, Vec<G>) {
        let mut s = busy(1);
        let gs: Vec<G> = (0..n).map(|_| s.new_g(Affinity::All)).collect();
        s.runqput(0, gs[0], false, 0);
        s.schedule(0, 0);
        (s, gs)
    }

    #[test]
    fn a_spent_slice_grants_the_runnext_chain_one_20us_grace() {
        let (mut s, gs) = one_p_running(4);
        s.runqput(0, gs[3], false, 0);
        // Past the 10 ms slice: the first runnext task still runs, 20 us.
        s.runqput(0, gs[1], true, 10_500_000);
        let run = s.schedule(0, 10_500_000).0.unwrap();
        assert_eq!((run.g, run.inherit, run.slice_ns), (gs[1], true, 20_000));
        // Its partner, 15 us later, gets what is left of the same grace.
        s.runqput(0, gs[2], true, 10_515_000);
        let run = s.schedule(0, 10_515_000).0.unwrap();
        assert_eq!((run.g, run.slice_ns), (gs[2], 5_000));
        // Past the grace, sysmon has retaken the P: the runnext task goes to
        // the global queue and the LRQ head runs with a fresh slice.
        s.runqput(0, gs[1], true, 10_521_000);
        let run = s.schedule(0, 10_521_000).0.unwrap();
        assert_eq!(
            (run.g, run.inherit, run.slice_ns),
            (gs[3], false, 10_000_000)
        );
        assert_eq!(s.runq.iter().copied().collect::<Vec<_>>(), [gs[1]]);
        assert_eq!(s.stats.slice_expired, 1);
    }

    #[test]
    fn a_p_that_idled_gives_the_next_runnext_task_a_new_grace() {
        let (mut s, gs) = one_p_running(3);
        // Past the slice, a runnext task runs within the 20 us grace, and
        // then the P finds nothing and idles.
        s.runqput(0, gs[1], true, 10_500_000);
        assert_eq!(s.schedule(0, 10_500_000).0.unwrap().slice_ns, 20_000);
        assert_eq!(s.schedule(0, 10_600_000), (None, None));
        assert!(s.ps[0].idle);
        // A wakeup long after the grace: the chain ended when the P idled,
        // so the woken task runs, 20 us, instead of going to the global
        // queue before it ever ran.
        s.pidleremove(0);
        s.runqput(0, gs[2], true, 30_000_000);
        let run = s.schedule(0, 30_000_000).0.unwrap();
        assert_eq!((run.g, run.inherit, run.slice_ns), (gs[2], true, 20_000));
        assert_eq!(s.stats.slice_expired, 0);
        assert_eq!(s.stats.idle, 1);
    }

    #[test]
    fn an_offline_p_is_never_woken() {
        let mut s = Sched::new(Params::go(2));
        s.set_offline(1);
        assert_eq!(s.wakep(), Some(0));
        s.stop_spinning(0);
        assert_eq!(s.wakep(), None, "P1 is offline, P0 is taken");
        assert_eq!(s.npidle, 1, "an offline P counts as idle, not busy");
    }

    #[test]
    fn a_busy_p_goes_offline_and_comes_back_idle() {
        let mut s = busy(2);
        let g = s.new_g(Affinity::All);
        s.runqput(1, g, true, 0);
        s.procresize(1);
        s.set_offline(1);
        assert!(s.ps[1].idle);
        assert_eq!(s.npidle, 1, "an offline P counts as idle");
        let run = s.schedule(0, 0).0.map(|r| r.g);
        assert_eq!(run, Some(g), "P1's task went to the global queue");
        assert_eq!(s.schedule(0, 0).0, None);
        assert_eq!(s.wakep(), Some(0), "P1 is offline");
        s.stop_spinning(0);
        assert_eq!(s.wakep(), None);
        s.set_online(1);
        assert_eq!(s.wakep(), Some(1), "P1 is back on the idle list");
    }

    #[test]
    fn procresize_moves_runnext_then_the_lrq_to_the_global_head() {
        let mut s = busy(2);
        let gs: Vec<G> = (0..4).map(|_| s.new_g(Affinity::All)).collect();
        s.globrunqput(gs[0]);
        s.runqput(1, gs[1], false, 0);
        s.runqput(1, gs[2], false, 0);
        s.runqput(1, gs[3], true, 0);
        s.procresize(1);
        assert_eq!(Vec::from(s.runq.clone()), vec![gs[3], gs[1], gs[2], gs[0]]);
        assert!(s.ps[1].runq.is_empty() && s.ps[1].runnext.is_none());
    }

    #[test]
    fn handoffp_keeps_only_the_tasks_pinned_to_the_held_p() {
        let mut s = busy(2);
        let free = s.new_g(Affinity::All);
        let pinned = s.new_g(Affinity::only(&[1]));
        let pair = s.new_g(Affinity::only(&[0, 1]));
        s.runqput(1, pinned, false, 0);
        s.runqput(1, free, false, 0);
        s.runqput(1, pair, true, 0);
        s.handoffp(1);
        assert_eq!(Vec::from(s.runq.clone()), vec![pair, free]);
        assert_eq!(s.ps[1].runq.iter().collect::<Vec<_>>(), vec![pinned]);
        assert!(s.ps[1].runnext.is_none());
    }

    #[test]
    fn nr_queued_counts_every_queue() {
        let mut s = busy(2);
        let gs: Vec<G> = (0..5).map(|_| s.new_g(Affinity::All)).collect();
        s.runqput(0, gs[0], true, 0);
        s.runqput(0, gs[1], true, 0);
        s.runqput(1, gs[2], false, 0);
        s.globrunqput(gs[3]);
        assert_eq!(s.nr_queued(), 4);
        assert_eq!(s.nr_queued(), s.queued().count());
    }

    #[test]
    fn freed_task_ids_are_reused_with_their_new_affinity() {
        let mut s = busy(2);
        let a = s.new_g(Affinity::All);
        let b = s.new_g(Affinity::only(&[1]));
        s.free_g(b);
        assert_eq!(s.live_gs(), 1);
        let c = s.new_g(Affinity::only(&[0]));
        assert_eq!(c, b, "the freed id comes back");
        assert!(s.may_run(c, 0) && !s.may_run(c, 1));
        assert_eq!(s.new_g(Affinity::All), 2, "then fresh ids again");
        assert_eq!((s.live_gs(), a), (3, 0));
    }

    #[test]
    fn a_task_with_narrow_affinity_gets_a_thief_that_may_run_it() {
        let mut s = Sched::new(Params::go(4));
        s.pidleremove(0);
        let g = s.new_g(Affinity::only(&[0, 3]));
        s.runqput(0, g, true, 0);
        assert_eq!(s.wakep(), Some(1), "wakep wakes a P that may not run g");
        assert_eq!(s.wake_thief(g, 0), Some(3));
        assert!(!s.ps[3].idle);
        assert_eq!(s.wake_thief(g, 0), None, "P3 is awake and may steal it");
        let all = s.new_g(Affinity::All);
        assert_eq!(s.wake_thief(all, 0), None, "any P may take it: wakep's job");
    }

    #[test]
    fn a_busy_p_that_finds_nothing_behind_its_task_stays_busy() {
        let mut s = Sched::new(Params::go(2));
        s.pidleremove(0);
        assert_eq!(s.schedule_behind(0, 0), (None, None));
        assert!(!s.ps[0].idle, "its CPU still runs a task");
        // New work on the global queue: wakep() wakes the idle P 1, which
        // takes it, not the busy P 0.
        let g = s.new_g(Affinity::All);
        s.globrunqput(g);
        assert_eq!(s.wakep(), Some(1));
        assert_eq!(s.schedule(1, 0).0.map(|r| r.g), Some(g));
        // schedule() idles a P that finds nothing.
        assert_eq!(s.schedule(0, 0), (None, None));
        assert!(s.ps[0].idle);
    }

    #[test]
    fn wakep_wakes_one_idle_p_only_while_none_spins() {
        let mut s = Sched::new(Params::go(4));
        s.pidleremove(0);
        let w = s.wakep();
        assert!(w.is_some() && w != Some(0));
        assert_eq!(s.wakep(), None, "one spinning P at a time");
        assert_eq!(s.nmspinning, 1);
        assert_eq!(s.npidle, 2);
    }
}
