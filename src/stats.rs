//! The stats record every mode reports, rendered in Go's `schedtrace` format,
//! and the `--monitor` client that prints a running scheduler's.
//!
//! The counters are one table (`counters!` below): each row names the field,
//! its id in `bpf/intf.h`'s `enum gmp_stat`, where it prints and what it
//! means. A new counter is a line there and a line in `intf.h`.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scx_stats::prelude::*;
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};

use crate::bpf_intf::*;

macro_rules! counters {
    ($($field:ident = $id:ident, $section:literal $label:literal, $desc:literal;)*) => {
        /// One snapshot of the scheduler: Go's schedtrace fields plus one
        /// cumulative counter per Go rule.
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
            #[stat(desc = "BPF mode: the longest any task waited from being queued to running, in microseconds, since the start")]
            pub max_wait_us: u64,
            $(#[stat(desc = $desc)] pub $field: u64,)*
        }

        impl Metrics {
            /// Every counter as (section, label, value), in table order.
            pub fn counter_list(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$(($section, $label, self.$field)),*]
            }

            /// Take the counters from the BPF side's sums over CPUs, indexed
            /// by `enum gmp_stat`.
            pub fn set_bpf_counters(&mut self, sum: &[u64; gmp_stat_GMP_NR_STATS as usize]) {
                $(self.$field = sum[$id as usize];)*
            }
        }
    };
}

counters! {
    runnext_put = gmp_stat_GMP_STAT_RUNNEXT_PUT, "runnext" "put", "runqput into runnext (wakeup, fork)";
    runnext_kick = gmp_stat_GMP_STAT_RUNNEXT_KICK, "runnext" "kick", "Older runnext tasks kicked to the LRQ tail";
    runnext_hit = gmp_stat_GMP_STAT_RUNNEXT_HIT, "runnext" "hit", "runqget took runnext (slice inherited)";
    lrq_put = gmp_stat_GMP_STAT_LRQ_PUT, "lrq" "put", "runqput to an LRQ tail";
    lrq_get = gmp_stat_GMP_STAT_LRQ_GET, "lrq" "get", "runqget took an LRQ head";
    overflow = gmp_stat_GMP_STAT_OVERFLOW, "overflow" "overflow", "runqputslow: puts into a full LRQ";
    overflow_tasks = gmp_stat_GMP_STAT_OVERFLOW_TASKS, "overflow" "tasks", "Tasks runqputslow moved to the global queue";
    global_put = gmp_stat_GMP_STAT_GLOBAL_PUT, "global" "put", "globrunqput: tasks put on the global queue";
    global_tick = gmp_stat_GMP_STAT_GLOBAL_TICK, "global" "tick", "Takes from the global queue on every --global-every-th schedtick (Go: 61st)";
    global_batch = gmp_stat_GMP_STAT_GLOBAL_BATCH, "global" "batch", "globrunqgetbatch calls that got work";
    global_batch_tasks = gmp_stat_GMP_STAT_GLOBAL_BATCH_TASKS, "global" "tasks", "Tasks taken by global batches";
    steal_try = gmp_stat_GMP_STAT_STEAL_TRY, "steal" "try", "runqsteal calls (victims probed)";
    steal_ok = gmp_stat_GMP_STAT_STEAL_OK, "steal" "ok", "runqsteal calls that got work";
    stolen_tasks = gmp_stat_GMP_STAT_STOLEN_TASKS, "steal" "tasks", "Tasks stolen";
    stolen_runnext = gmp_stat_GMP_STAT_STOLEN_RUNNEXT, "steal" "runnext", "Of those, taken from a victim's runnext";
    slice_expired = gmp_stat_GMP_STAT_SLICE_EXPIRED, "" "slice-expired", "Slices that ran out (preempted to the global queue)";
    yields = gmp_stat_GMP_STAT_YIELD, "" "yield", "Yields (Gosched, to the global queue)";
    idle = gmp_stat_GMP_STAT_IDLE, "" "idle", "find_runnable found nothing";
    kicks = gmp_stat_GMP_STAT_KICK, "" "kick", "wakep kicks of idle CPUs";
    spins = gmp_stat_GMP_STAT_SPIN, "" "spin", "CPUs that started spinning";
    kthread = gmp_stat_GMP_STAT_KTHREAD, "" "kthread", "Woken kernel threads run on their CPU, outside the Go queues";
    trace_dropped = gmp_stat_GMP_STAT_TRACE_DROPPED, "" "trace-dropped", "Trace events lost to a full ring buffer (--trace)";
    handoffs = gmp_stat_GMP_STAT_HANDOFF, "" "handoff", "Sync wakeups run next on the waker's CPU directly (not --go-handoff)";
    syscalls = gmp_stat_GMP_STAT_SYSCALL, "" "syscall", "A real-time or deadline task took a CPU (Go: its P entered a syscall)";
    retakes = gmp_stat_GMP_STAT_RETAKE, "retake" "cpus", "Times a CPU held by a real-time task had its queues handed to the global queue (handoffp)";
    retake_tasks = gmp_stat_GMP_STAT_RETAKE_TASKS, "retake" "tasks", "Tasks those handoffs moved";
    global_aged = gmp_stat_GMP_STAT_GLOBAL_AGED, "" "aged", "Global queue heads taken first after waiting --global-max-wait-ms";
    idle_wakes = gmp_stat_GMP_STAT_IDLE_WAKE, "" "idle-wake", "Wakeups an idle CPU ran itself, with no wakep() kick (not --go-wakep)";
    procresize = gmp_stat_GMP_STAT_PROCRESIZE, "" "procresize", "CPUs that went offline or came online (procresize; the BPF mode keeps running)";
    released = gmp_stat_GMP_STAT_RELEASED, "" "released", "Tasks a CPU on its way offline could not run, given to the other CPUs (procresize, early): in the BPF mode to the global queue; in user mode out of its own DSQ (also after a pull that lost a race)";
    idle_places = gmp_stat_GMP_STAT_IDLE_PLACE, "" "idle-place", "Wakeups run at once on an idle CPU: user mode, without the agent (not --go-ready); BPF mode, a wakeup into another process (not --go-cross-process) and, with --ready-idle, any other that is not sync";
    wakeup_preempts = gmp_stat_GMP_STAT_WAKEUP_PREEMPT, "" "wakeup-preempt", "Wakeups that preempted the task running on their CPU: one of another process (--cross-process-preempt-us), any (--wakeup-preempt-us), or a SCHED_IDLE task";
    wakep_lates = gmp_stat_GMP_STAT_WAKEP_LATE, "" "wakep-late", "Delayed wakep()s that found the woken task still waiting and woke an idle CPU (--wakep-delay-us)";
    lock_handoffs = gmp_stat_GMP_STAT_LOCK_HANDOFF, "lock" "handoff", "User mode: wakeups from a kernel lock run next on the waker's CPU without the agent (not --go-handoff)";
    lock_refusals = gmp_stat_GMP_STAT_LOCK_REFUSED, "lock" "refused", "User mode: wakeups from a kernel lock sent to the agent instead, because their CPU had taken 61 such hand-offs since it last asked the agent for work";
    kicks_answered = gmp_stat_GMP_STAT_KICK_ANSWERED, "kick" "answered", "BPF mode: wakep kicks whose CPU has dispatched since";
    kick_wait_us = gmp_stat_GMP_STAT_KICK_WAIT_US, "kick" "wait-us", "BPF mode: their total time from the kick to that dispatch, in microseconds (divided by answered: the mean)";
    kicks_slow = gmp_stat_GMP_STAT_KICK_SLOW, "kick" "slow", "BPF mode: of those, answered after more than 1 ms: the woken CPU's vCPU waited for a host core (an overcommitted VM), where --wakep-delay-us or --ready-idle may serve better than Go's wakep()";
    before_idle = gmp_stat_GMP_STAT_BEFORE_IDLE, "" "before-idle", "BPF mode: tasks run before the SCHED_IDLE task that the CPU's own queues would run next: the first other task of its LRQ, else the global queue's head (not with --idle-slice-us 0)";
    preempt_laters = gmp_stat_GMP_STAT_PREEMPT_LATER, "" "preempt-later", "BPF mode: wakeups that would have preempted the task running on their CPU (wakeup-preempt) had it run long enough since it started, and set a timer to preempt it once it has";
    lrq_aged = gmp_stat_GMP_STAT_LRQ_AGED, "" "lrq-aged", "BPF mode: LRQ heads run before the CPU's runnext task after waiting --lrq-max-wait-us";
    grq_kicks = gmp_stat_GMP_STAT_GRQ_KICK, "" "grq-kick", "BPF mode: tasks put on the global queue while wakep() woke no CPU, after which the other CPUs that spun or were not idle were kicked, for one that had looked there before the task arrived";
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

    /// The rule counters on one line, grouped by section:
    /// `  runnext put=.. kick=.. hit=.. | lrq put=.. get=.. | ...`.
    pub fn counters(&self) -> String {
        let mut s = String::from(" ");
        let mut section = None;
        for (sec, label, v) in self.counter_list() {
            if section != Some(sec) {
                if section.is_some() {
                    s += " |";
                }
                if !sec.is_empty() {
                    let _ = write!(s, " {sec}");
                }
                section = Some(sec);
            }
            let _ = write!(s, " {label}={v}");
        }
        if self.max_wait_us > 0 {
            let _ = write!(s, " | max-wait-us={}", self.max_wait_us);
        }
        s
    }

    /// The agents' last word on exit: both lines, logged.
    pub fn log_final(&self) {
        log::info!("final stats:\n{}\n{}", self.schedtrace(), self.counters());
    }

    /// Both lines, as `--stats` and `--monitor` print them.
    pub fn format<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        writeln!(w, "{}", self.schedtrace())?;
        writeln!(w, "{}", self.counters())
    }
}

/// The stats server: each request is answered with a fresh `Metrics`.
pub fn server_data() -> StatsServerData<(), Metrics> {
    let open: Box<dyn StatsOpener<(), Metrics>> = Box::new(move |_| {
        let read: Box<dyn StatsReader<(), Metrics>> = Box::new(move |_args, (req_ch, res_ch)| {
            req_ch.send(())?;
            res_ch.recv()?.to_json()
        });
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

/// `--monitor`: print the stats of the running scheduler (either mode) every
/// `intv` until `shutdown`, as text or as one JSON record a line.
pub fn monitor(intv: Duration, json: bool, shutdown: Arc<AtomicBool>) -> anyhow::Result<()> {
    scx_utils::monitor_stats::<Metrics>(
        &[],
        intv,
        || shutdown.load(Ordering::Relaxed),
        |m| {
            let mut out = std::io::stdout().lock();
            if json {
                writeln_json(&mut out, &m)
            } else {
                Ok(m.format(&mut out)?)
            }
        },
    )
}

fn writeln_json(out: &mut impl std::io::Write, m: &Metrics) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, m)?;
    Ok(writeln!(out)?)
}

/// `--stats` in the BPF mode: `monitor` from a thread of its own.
pub fn spawn_monitor(intv: Duration, shutdown: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        if let Err(e) = monitor(intv, false, shutdown) {
            log::warn!("stats monitor stopped: {e:#}");
        }
    });
}

/// Parse one `name=value` number out of a line of text (the simulator's
/// summary, or a schedtrace line); `section` is a word the name follows.
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
    fn counters_line_groups_the_table_by_section() {
        let m = Metrics {
            runnext_put: 1,
            runnext_kick: 2,
            steal_ok: 7,
            global_tick: 3,
            kthread: 5,
            ..Default::default()
        };
        let line = m.counters();
        assert!(
            line.starts_with(
                "  runnext put=1 kick=2 hit=0 | lrq put=0 get=0 | overflow overflow=0"
            ),
            "{line}"
        );
        assert!(
            line.contains("| global put=0 tick=3 batch=0 tasks=0 |"),
            "{line}"
        );
        assert!(
            line.contains("| steal try=0 ok=7 tasks=0 runnext=0 | slice-expired=0"),
            "{line}"
        );
        // The counters outside a section follow, name=value (a new counter
        // may come after them: the table and the enum grow together).
        assert!(
            line.contains(" | slice-expired=0 yield=0 idle=0 kick=0 spin=0 kthread=5 "),
            "{line}"
        );
        assert!(line.contains(" trace-dropped=0"), "{line}");
    }

    #[test]
    fn bpf_counters_land_in_their_fields() {
        let mut sum = [0u64; gmp_stat_GMP_NR_STATS as usize];
        for (i, v) in sum.iter_mut().enumerate() {
            *v = 100 + i as u64;
        }
        let mut m = Metrics::default();
        m.set_bpf_counters(&sum);
        // The table's order is the enum's: each field took its own slot.
        let values: Vec<u64> = m.counter_list().iter().map(|c| c.2).collect();
        assert_eq!(values, sum.to_vec());
        assert_eq!(m.global_tick, 100 + gmp_stat_GMP_STAT_GLOBAL_TICK as u64);
    }

    #[test]
    fn metrics_round_trip_through_json() {
        let m = Metrics {
            lrq: vec![1, 2],
            steal_ok: 4,
            ..Default::default()
        };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Metrics>(&text).unwrap(), m);
    }
}
