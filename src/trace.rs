//! The decision trace (`scx_gmp --trace FILE`): one line of text per policy
//! decision the BPF side made, as `bpf/intf.h`'s `struct gmp_event` records
//! it, with a header that names the policy's parameters. `scx_gmp check FILE`
//! (src/check.rs) replays it against Go's rules.
//!
//! ```text
//! # scx_gmp trace 1 nprocs=2 lrq_cap=256 global_every=61 steal_tries=4 runnext_grace_ns=3000 slice_ns=10000000
//! 1833610020 put.runnext why=wake cpu=1 pid=412 other=-1 n=0 ...
//! 1833612200 pick.runnext why=- cpu=1 pid=412 other=-1 n=1 want=1 ...
//! # end dropped=0
//! ```

// The bindgen names of bpf/intf.h's enums are matched on as they are.
#![allow(non_upper_case_globals)]

use std::fmt;

use anyhow::{anyhow, bail, Context, Result};

use crate::bpf_intf::*;
use crate::model::Params;

/// The first word of a trace file's header; the version follows.
pub const HEADER: &str = "# scx_gmp trace";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// A line the agent writes when the kernel restarted the scheduler (CPU
/// hotplug): the queues start empty again.
pub const RESTART: &str = "# restart";
/// The last line: `# end dropped=N`, the events the ring buffer lost.
pub const END: &str = "# end";

/// The names of `enum gmp_ev`, `gmp_put`, `gmp_pick`, `gmp_move` and
/// `gmp_why`, in enum order.
const KINDS: [&str; gmp_ev_GMP_NR_EV as usize] = [
    "put", "pick", "run", "sleep", "idle", "spin", "kick", "move",
];
const PUTS: [&str; gmp_put_GMP_NR_PUT as usize] =
    ["runnext", "lrq", "grq", "overflow", "kthread", "idle"];
const PICKS: [&str; gmp_pick_GMP_NR_PICK as usize] = [
    "tick",
    "runnext",
    "lrq",
    "batch",
    "steal",
    "steal-runnext",
    "keep",
    "handoff",
    "aged",
    "lrq-before-idle",
    "grq-before-idle",
    "lrq-aged",
    "preempt",
];
const MOVES: [&str; gmp_move_GMP_NR_MOVE as usize] = ["kicked", "overflow", "pending"];
const WHYS: [&str; gmp_why_GMP_NR_WHY as usize] = [
    "wake",
    "expire",
    "yield",
    "requeue",
    "retake",
    "wakep",
    "owner",
    "affinity",
    "recheck",
    "handoff",
    "preempt",
    "procresize",
    "oncpu",
    "grq",
];

/// One decision, as `struct gmp_event` in `bpf/intf.h` describes each field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub ts: u64,
    pub kind: u32,
    pub sub: u32,
    pub why: u32,
    pub round: u32,
    pub cpu: i32,
    pub pid: i32,
    pub other: i32,
    pub n: i32,
    pub want: i32,
    pub len: i32,
    pub seen_runnext: i32,
    pub seen_lrq: i32,
    pub seen_grq: i32,
    pub tick_grq: i32,
    pub schedtick: u32,
    pub nmspinning: u32,
    pub age: i64,
    pub allowed: i32,
}

impl Event {
    /// Decode one ring-buffer record.
    pub fn from_bytes(data: &[u8]) -> Option<Self> {
        if data.len() < std::mem::size_of::<gmp_event>() {
            return None;
        }
        // SAFETY: gmp_event is plain old data, and the length is checked.
        let e: gmp_event = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const gmp_event) };
        Some(Self {
            ts: e.ts,
            kind: e.kind as u32,
            sub: e.sub as u32,
            why: e.why as u32,
            round: e.round as u32,
            cpu: e.cpu,
            pid: e.pid,
            other: e.other,
            n: e.n,
            want: e.want,
            len: e.len,
            seen_runnext: e.seen_runnext,
            seen_lrq: e.seen_lrq,
            seen_grq: e.seen_grq,
            tick_grq: e.tick_grq,
            schedtick: e.schedtick,
            nmspinning: e.nmspinning,
            age: e.age,
            allowed: e.allowed,
        })
    }

    fn sub_names(&self) -> &'static [&'static str] {
        match self.kind {
            gmp_ev_GMP_EV_PUT => &PUTS,
            gmp_ev_GMP_EV_PICK => &PICKS,
            gmp_ev_GMP_EV_MOVE => &MOVES,
            gmp_ev_GMP_EV_KICK => &WHYS,
            _ => &[],
        }
    }

    /// The event's name: `put.runnext`, `pick.steal`, `spin.1`...
    pub fn name(&self) -> String {
        let kind = KINDS.get(self.kind as usize).copied().unwrap_or("?");
        match self.sub_names().get(self.sub as usize) {
            Some(sub) => format!("{kind}.{sub}"),
            None => format!("{kind}.{}", self.sub),
        }
    }

    /// Parse one line that `Display` wrote.
    pub fn parse(line: &str) -> Result<Self> {
        let mut words = line.split_whitespace();
        let ts = words.next().ok_or_else(|| anyhow!("empty line"))?;
        let name = words.next().ok_or_else(|| anyhow!("no event name"))?;
        let mut e = Event {
            ts: ts.parse().context("bad timestamp")?,
            ..Default::default()
        };
        let (kind, sub) = name
            .split_once('.')
            .ok_or_else(|| anyhow!("bad event name {name:?}"))?;
        e.kind = position(&KINDS, kind).ok_or_else(|| anyhow!("unknown event {kind:?}"))?;
        e.sub = match position(e.sub_names(), sub) {
            Some(i) => i,
            None => sub
                .parse()
                .with_context(|| format!("unknown {kind} {sub:?}"))?,
        };
        for word in words {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| anyhow!("bad field {word:?}"))?;
            match k {
                "why" => e.why = position(&WHYS, v).unwrap_or(0),
                _ => e.set_field(k, v)?,
            }
        }
        Ok(e)
    }
}

fn position(names: &[&str], name: &str) -> Option<u32> {
    names.iter().position(|&n| n == name).map(|i| i as u32)
}

impl Event {
    /// Why a put was made (`wake`, `expire`...); `-` for other events.
    pub fn why_name(&self) -> &'static str {
        match self.kind {
            gmp_ev_GMP_EV_PUT => WHYS.get(self.why as usize).copied().unwrap_or("?"),
            _ => "-",
        }
    }

    /// What a violation names a put by: `put.lrq why=wake cpu=1`.
    pub fn put_summary(&self) -> String {
        format!("{} why={} cpu={}", self.name(), self.why_name(), self.cpu)
    }
}

/// The numeric fields of a line, after `why=`: each key as the line names it
/// and the field it holds, in the order `Display` writes them. One list, so
/// that what is written is what is read back.
macro_rules! numeric_fields {
    ($($key:literal => $field:ident),* $(,)?) => {
        /// Write the numeric fields, each as ` key=value`.
        fn write_fields(&self, f: &mut fmt::Formatter) -> fmt::Result {
            $(write!(f, concat!(" ", $key, "={}"), self.$field)?;)*
            Ok(())
        }

        /// Set the numeric field that a line names `key`.
        fn set_field(&mut self, key: &str, v: &str) -> Result<()> {
            match key {
                $($key => self.$field = v.parse().with_context(|| format!("bad {key}={v}"))?,)*
                _ => bail!("unknown field {key:?}"),
            }
            Ok(())
        }
    };
}

impl Event {
    numeric_fields! {
        "cpu" => cpu, "pid" => pid, "other" => other, "n" => n, "want" => want, "len" => len,
        "rn" => seen_runnext, "lrq" => seen_lrq, "grq" => seen_grq, "tgrq" => tick_grq,
        "tick" => schedtick, "nms" => nmspinning, "round" => round, "age" => age,
        "allowed" => allowed,
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} {} why={}", self.ts, self.name(), self.why_name())?;
        self.write_fields(f)
    }
}

/// The knobs that are not Go's whose decisions the checker holds to a
/// number, each in ns (0: off, Go's rule).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Knobs {
    /// `--lrq-max-wait-us`: an LRQ head runs before runnext after this wait.
    pub lrq_max_wait_ns: u64,
    /// `--wakeup-preempt-us`: a wakeup preempts a task that ran this long.
    pub wakeup_preempt_ns: u64,
    /// `--cross-process-preempt-us`: the same, for a task of another process.
    pub cross_preempt_ns: u64,
    /// `--idle-slice-us`: not 0, a wakeup preempts a SCHED_IDLE task at once.
    pub idle_slice_ns: u64,
    /// Not a time: 1 unless `--go-grq-put`, a GRQ put whose wakep() woke
    /// no CPU kicks the others (grq_put_kick()).
    pub grq_kick: u64,
}

/// What a trace's header carries: Go's parameters, and the knobs that are
/// not Go's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub params: Params,
    pub knobs: Knobs,
}

impl Header {
    /// A header with Go's parameters for `nprocs` CPUs and every knob off.
    pub fn go(nprocs: usize) -> Self {
        Self {
            params: Params::go(nprocs),
            knobs: Knobs::default(),
        }
    }
}

/// The header line: the parameters a checker needs.
pub fn header(h: &Header) -> String {
    let (p, k) = (&h.params, &h.knobs);
    format!(
        "{HEADER} {VERSION} nprocs={} lrq_cap={} global_every={} steal_tries={} runnext_grace_ns={} slice_ns={} min_slice_ns={} lrq_max_wait_ns={} wakeup_preempt_ns={} cross_preempt_ns={} idle_slice_ns={} grq_kick={}",
        p.nprocs, p.lrq_cap, p.global_every, p.steal_tries, p.runnext_grace_ns, p.slice_ns, p.min_slice_ns,
        k.lrq_max_wait_ns, k.wakeup_preempt_ns, k.cross_preempt_ns, k.idle_slice_ns, k.grq_kick
    )
}

/// Read the parameters back from a header line (a knob that a header from
/// before it does not name is off).
pub fn parse_header(line: &str) -> Result<Header> {
    let rest = line
        .strip_prefix(HEADER)
        .ok_or_else(|| anyhow!("not a scx_gmp trace (no {HEADER:?} header)"))?;
    let mut words = rest.split_whitespace();
    let version: u32 = words
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no trace version in the header"))?;
    if version != VERSION {
        bail!("trace version {version}; this scx_gmp reads version {VERSION}");
    }
    let mut h = Header::go(1);
    let (p, k) = (&mut h.params, &mut h.knobs);
    for word in words {
        let (name, v) = word
            .split_once('=')
            .ok_or_else(|| anyhow!("bad header field {word:?}"))?;
        let v: u64 = v
            .parse()
            .with_context(|| format!("bad header {name}={v}"))?;
        match name {
            "nprocs" => p.nprocs = v as usize,
            "lrq_cap" => p.lrq_cap = v as usize,
            "global_every" => p.global_every = v as u32,
            "steal_tries" => p.steal_tries = v as u32,
            "runnext_grace_ns" => p.runnext_grace_ns = v,
            "slice_ns" => p.slice_ns = v,
            "min_slice_ns" => p.min_slice_ns = v,
            "lrq_max_wait_ns" => k.lrq_max_wait_ns = v,
            "wakeup_preempt_ns" => k.wakeup_preempt_ns = v,
            "cross_preempt_ns" => k.cross_preempt_ns = v,
            "idle_slice_ns" => k.idle_slice_ns = v,
            "grq_kick" => k.grq_kick = v,
            _ => bail!("unknown header field {name:?}"),
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_survives_its_text_line() {
        let e = Event {
            ts: 12,
            kind: gmp_ev_GMP_EV_PICK,
            sub: gmp_pick_GMP_PICK_STEAL_RUNNEXT,
            round: 3,
            cpu: 1,
            pid: 77,
            other: 2,
            n: 1,
            want: 1,
            len: 5,
            seen_runnext: 6,
            seen_lrq: 7,
            seen_grq: 4,
            tick_grq: 8,
            schedtick: 61,
            nmspinning: 9,
            age: -5,
            allowed: 10,
            ..Default::default()
        };
        let line = e.to_string();
        assert!(line.starts_with("12 pick.steal-runnext "), "{line}");
        assert_eq!(Event::parse(&line).unwrap(), e);
    }

    #[test]
    fn a_field_out_of_its_range_or_unknown_is_an_error() {
        let line = Event::default().to_string();
        assert!(Event::parse(&line).is_ok());
        assert!(Event::parse(&line.replace("round=0", "round=-1")).is_err());
        assert!(Event::parse(&line.replace("cpu=0", "cpu=4294967296")).is_err());
        assert!(Event::parse(&format!("{line} bogus=1")).is_err());
    }

    #[test]
    fn every_kind_has_a_name_for_each_sub() {
        for kind in 0..gmp_ev_GMP_NR_EV {
            let e = Event {
                kind,
                ..Default::default()
            };
            assert!(!e.name().starts_with('?'));
        }
        assert_eq!(WHYS.len(), gmp_why_GMP_NR_WHY as usize);
    }

    #[test]
    fn the_header_names_the_parameters() {
        let mut h = Header {
            knobs: Knobs {
                lrq_max_wait_ns: 5000,
                wakeup_preempt_ns: 6000,
                cross_preempt_ns: 250_000,
                idle_slice_ns: 1_000_000,
                grq_kick: 1,
            },
            ..Header::go(3)
        };
        h.params.runnext_grace_ns = 7000;
        let back = parse_header(&header(&h)).unwrap();
        assert_eq!(back, h);
        let old = header(&h)
            .split(" lrq_max_wait_ns")
            .next()
            .unwrap()
            .to_string();
        assert_eq!(
            parse_header(&old).unwrap(),
            Header {
                params: h.params.clone(),
                ..Header::go(3)
            }
        );
        assert!(parse_header("# scx_gmp trace 9 nprocs=1").is_err());
        assert!(parse_header("hello").is_err());
    }
}
