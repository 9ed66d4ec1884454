//! The stats record every mode reports, rendered in Go's `schedtrace` format.

use std::fmt::Write;

use scx_stats::prelude::*;

use scx_stats_derive::stat_doc;
use scx_stats_derive::Stats;
use serde::Deserialize;
use serde::Serialize;

/// One snapshot of the scheduler: Go's schedtrace fields plus one cumulative
/// counter per Go rule.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Stats)]
#[stat(top)]
pub struct Metrics {
    #[stat(desc = "Milliseconds since the scheduler started")]
    pub uptime_ms: u64,
    #[stat(desc = "Managed CPUs (Go's Ps, GOMAXPROCS)")]
    pub gomaxprocs: u64,
    #[stat(desc = "Idle CPUs")]
    pub idleprocs: u64,
    #[stat(desc = "Tasks under the scheduler (Go prints its Ms)")]
    pub threads: u64,
    #[stat(desc = "CPUs looking for work (spinning Ms)")]
    pub spinningthreads: u64,
    #[stat(desc = "Global run queue length")]
    pub runqueue: u64,
    #[stat(desc = "Local run queue length of each CPU")]
    pub lrq: Vec<u64>,
    #[stat(desc = "runqput into runnext (wakeup, fork)")]
    pub runnext_put: u64,
    #[stat(desc = "Older runnext tasks kicked to the LRQ tail")]
    pub runnext_kick: u64,
    #[stat(desc = "runqget took runnext (slice inherited)")]
    pub runnext_hit: u64,
    #[stat(desc = "runqput to an LRQ tail")]
    pub lrq_put: u64,
    #[stat(desc = "runqget took an LRQ head")]
    pub lrq_get: u64,
    #[stat(desc = "runqputslow: puts into a full LRQ")]
    pub overflow: u64,
    #[stat(desc = "Tasks runqputslow moved to the global queue")]
    pub overflow_tasks: u64,
    #[stat(desc = "globrunqput: tasks put on the global queue")]
    pub global_put: u64,
    #[stat(desc = "Every-61st-schedtick takes from the global queue")]
    pub global_61: u64,
    #[stat(desc = "globrunqgetbatch calls that got work")]
    pub global_batch: u64,
    #[stat(desc = "Tasks taken by global batches")]
    pub global_batch_tasks: u64,
    #[stat(desc = "runqsteal calls (victims probed)")]
    pub steal_try: u64,
    #[stat(desc = "runqsteal calls that got work")]
    pub steal_ok: u64,
    #[stat(desc = "Tasks stolen")]
    pub stolen_tasks: u64,
    #[stat(desc = "Of those, taken from a victim's runnext")]
    pub stolen_runnext: u64,
    #[stat(desc = "Slices that ran out (preempted to the global queue)")]
    pub slice_expired: u64,
    #[stat(desc = "Yields (Gosched, to the global queue)")]
    pub yields: u64,
    #[stat(desc = "find_runnable found nothing")]
    pub idle: u64,
    #[stat(desc = "wakep kicks of idle CPUs")]
    pub kicks: u64,
    #[stat(desc = "CPUs that started spinning")]
    pub spins: u64,
    #[stat(desc = "Locked tasks (per-CPU kthreads) run on their CPU")]
    pub locked: u64,
}

impl Metrics {
    /// Go's `GODEBUG=schedtrace` line.
    pub fn schedtrace(&self) -> String {
        let mut s = format!(
            "SCHED {}ms: gomaxprocs={} idleprocs={} threads={} spinningthreads={} runqueue={} [",
            self.uptime_ms,
            self.gomaxprocs,
            self.idleprocs,
            self.threads,
            self.spinningthreads,
            self.runqueue
        );
        for (i, n) in self.lrq.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let _ = write!(s, "{sep}{n}");
        }
        s.push(']');
        s
    }

    /// The rule counters, one line, `name=value` pairs.
    pub fn counters(&self) -> String {
        format!(
            "  runnext put={} kick={} hit={} | lrq put={} get={} | overflow={} tasks={} | \
             global put={} 61tick={} batch={} tasks={} | steal try={} ok={} tasks={} runnext={} | \
             slice-expired={} yield={} idle={} kick={} spin={} locked={}",
            self.runnext_put,
            self.runnext_kick,
            self.runnext_hit,
            self.lrq_put,
            self.lrq_get,
            self.overflow,
            self.overflow_tasks,
            self.global_put,
            self.global_61,
            self.global_batch,
            self.global_batch_tasks,
            self.steal_try,
            self.steal_ok,
            self.stolen_tasks,
            self.stolen_runnext,
            self.slice_expired,
            self.yields,
            self.idle,
            self.kicks,
            self.spins,
            self.locked
        )
    }

    /// Both lines, as `--stats` and `--monitor` print them.
    pub fn format<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        writeln!(w, "{}", self.schedtrace())?;
        writeln!(w, "{}", self.counters())
    }
}

/// The stats server: each request is answered with a fresh `Metrics`.
pub fn server_data() -> StatsServerData<(), Metrics> {
    let open: Box<dyn StatsOpener<(), Metrics>> = Box::new(move |(req_ch, res_ch)| {
        let read: Box<dyn StatsReader<(), Metrics>> = Box::new(move |_args, (req_ch, res_ch)| {
            req_ch.send(())?;
            res_ch.recv()?.to_json()
        });
        let _ = (req_ch, res_ch);
        Ok(read)
    });
    StatsServerData::new()
        .add_meta(Metrics::meta())
        .add_ops("top", StatsOps { open, close: None })
}

/// `--help-stats`: describe every field.
pub fn describe() -> anyhow::Result<()> {
    server_data().describe_meta(&mut std::io::stdout(), None)
}

/// Parse one `name=value` counter out of a `counters()` or schedtrace line.
pub fn field(line: &str, section: &str, name: &str) -> Option<u64> {
    let start = if section.is_empty() {
        0
    } else {
        line.find(section)?
    };
    let rest = &line[start..];
    let key = format!("{name}=");
    let at = rest.find(&key)? + key.len();
    let digits: String = rest[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedtrace_matches_go_format() {
        let m = Metrics {
            uptime_ms: 1000,
            gomaxprocs: 4,
            idleprocs: 1,
            threads: 9,
            spinningthreads: 2,
            runqueue: 130,
            lrq: vec![0, 3, 256, 1],
            ..Default::default()
        };
        assert_eq!(
            m.schedtrace(),
            "SCHED 1000ms: gomaxprocs=4 idleprocs=1 threads=9 spinningthreads=2 runqueue=130 [0 3 256 1]"
        );
    }

    #[test]
    fn field_reads_back_counters() {
        let m = Metrics {
            steal_ok: 7,
            stolen_tasks: 11,
            global_61: 3,
            global_batch_tasks: 5,
            ..Default::default()
        };
        let line = m.counters();
        assert_eq!(field(&line, "steal", "ok"), Some(7));
        assert_eq!(field(&line, "steal", "tasks"), Some(11));
        assert_eq!(field(&line, "global", "61tick"), Some(3));
        assert_eq!(field(&line, "global", "tasks"), Some(5));
        assert_eq!(field(&m.schedtrace(), "", "runqueue"), Some(0));
    }
}
