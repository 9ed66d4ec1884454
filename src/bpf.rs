//! The kernel-facing side of the BPF mode: open, configure, load and attach
//! bpf/main.bpf.c, serve its counters through scx_stats, and detach on exit.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::{OpenObject, ProgramInput, RingBufferBuilder};
use scx_stats::prelude::*;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};
use scx_utils::{UserExitInfo, NR_CPU_IDS};

use crate::bpf_skel::*;
use scx_gmp::bpf_intf::*;
use scx_gmp::cli::{AgentOpts, PolicyOpts};
use scx_gmp::load::await_hotplug;
use scx_gmp::model::{coprimes, us_to_ns, Params};
use scx_gmp::stats::{server_data, Metrics};
use scx_gmp::trace::{self, Event};

/// The decision trace's file (`--trace`): one line per ring-buffer record.
struct TraceFile {
    out: BufWriter<File>,
    /// Events the ring buffer dropped, over every restart.
    dropped: u64,
    error: Option<std::io::Error>,
}

impl TraceFile {
    fn create(path: &Path, header: &trace::Header) -> Result<Self> {
        let file = File::create(path)
            .with_context(|| format!("cannot create the trace file {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        writeln!(out, "{}", trace::header(header))?;
        Ok(Self {
            out,
            dropped: 0,
            error: None,
        })
    }

    fn record(&mut self, data: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let Some(e) = Event::from_bytes(data) {
            if let Err(err) = writeln!(self.out, "{e}") {
                self.error = Some(err);
            }
        }
    }

    fn line(&mut self, line: &str) -> Result<()> {
        writeln!(self.out, "{line}")?;
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        let end = format!("{} dropped={}", trace::END, self.dropped);
        self.line(&end)?;
        self.out.flush()?;
        if let Some(err) = self.error {
            return Err(err).context("cannot write the trace file");
        }
        if self.dropped > 0 {
            log::warn!(
                "the trace dropped {} events (the ring buffer was full): it has holes",
                self.dropped
            );
        }
        Ok(())
    }
}

struct Scheduler<'a> {
    skel: GmpSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    stats_server: StatsServer<(), Metrics>,
    nr_cpus: usize,
    started: Instant,
}

/// A percentage of kicks, as the BPF side's slow-kick share counts it (parts
/// of GMP_KICK_SHARE_ONE): --ready-idle-slow-pct and --wakep-delay-slow-pct.
fn kick_share(pct: u32) -> u32 {
    pct * gmp_consts_GMP_KICK_SHARE_ONE / 100
}

impl<'a> Scheduler<'a> {
    fn init(
        params: &Params,
        agent: &AgentOpts,
        policy: &PolicyOpts,
        tracing: bool,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        let nr_cpus = params.nprocs;
        if nr_cpus > gmp_consts_GMP_MAX_CPUS as usize {
            bail!(
                "{nr_cpus} CPU ids, but scx_gmp manages at most {}",
                gmp_consts_GMP_MAX_CPUS
            );
        }

        let mut builder = GmpSkelBuilder::default();
        builder.obj_builder.debug(agent.verbose);
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            gmp_ops,
            None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
        )?;
        skel.struct_ops.gmp_ops_mut().exit_dump_len = agent.exit_dump_len;
        if !tracing {
            // ops.quiescent only traces: without --trace the kernel need not
            // call it on every sleep.
            skel.struct_ops.gmp_ops_mut().quiescent = std::ptr::null_mut();
            skel.progs.gmp_quiescent.set_autoload(false);
        }

        let rodata = skel.maps.rodata_data.as_mut().unwrap();
        rodata.slice_ns = params.slice_ns;
        rodata.min_slice_ns = params.min_slice_ns;
        rodata.runnext_grace_ns = params.runnext_grace_ns;
        rodata.lrq_cap = params.lrq_cap as u32;
        rodata.global_every = params.global_every;
        rodata.steal_tries = params.steal_tries;
        rodata.trace_on = tracing;
        rodata.go_handoff = policy.go_handoff;
        rodata.go_wakep = policy.go_wakep;
        rodata.go_pidle = policy.go_pidle;
        rodata.ready_idle = policy.ready_idle;
        rodata.ready_idle_slow = kick_share(policy.ready_idle_slow_pct);
        rodata.cross_process_idle = !policy.go_cross_process;
        rodata.global_max_wait_ns = policy.global_max_wait_ms * 1_000_000;
        let knobs = policy.knobs();
        rodata.lrq_max_wait_ns = knobs.lrq_max_wait_ns;
        rodata.wakeup_preempt_ns = knobs.wakeup_preempt_ns;
        rodata.cross_preempt_ns = knobs.cross_preempt_ns;
        rodata.idle_slice_ns = knobs.idle_slice_ns;
        rodata.grq_kick = knobs.grq_kick != 0;
        rodata.wakep_delay_ns = us_to_ns(policy.wakep_delay_us);
        rodata.wakep_delay_slow = kick_share(policy.wakep_delay_slow_pct);
        rodata.nr_cpus = nr_cpus as u32;
        let cp = coprimes(nr_cpus as u32);
        rodata.nr_coprimes = cp.len() as u32;
        rodata.coprimes[..cp.len()].copy_from_slice(&cp);
        for (dst, src) in rodata.stall_comm.iter_mut().zip(agent.stall_comm()) {
            *dst = src as _;
        }

        let mut skel = scx_ops_load!(skel, gmp_ops, uei)?;
        let struct_ops = Some(scx_ops_attach!(skel, gmp_ops)?);
        let stats_server = StatsServer::new(server_data()).launch()?;
        let go = [
            (policy.go_handoff, ", Go's hand-off"),
            (policy.go_wakep, ", Go's wakep"),
            (policy.go_pidle, ", Go's idle stack"),
            (policy.go_grq_put, ", Go's globrunqput"),
            (policy.ready_idle, ", wakeups on idle CPUs"),
            (policy.go_cross_process, ", Go's ready() across processes"),
        ];
        let mut timed = scx_gmp::cli::timed_not_go(&[
            (policy.wakeup_preempt_us, "wakeup preemption after"),
            (
                policy.cross_process_preempt_us,
                "wakeup preemption across processes after",
            ),
            (policy.wakep_delay_us, "wakep after"),
            (policy.lrq_max_wait_us, "LRQ heads before runnext after"),
            (policy.idle_slice_us, "SCHED_IDLE slice"),
        ]);
        if policy.ready_idle_slow_pct != 0 {
            let pct = policy.ready_idle_slow_pct;
            timed += &format!(", wakeups on idle CPUs while over {pct}% of kicks are slow");
        }
        if policy.wakep_delay_us != 0 && policy.wakep_delay_slow_pct != 0 {
            let pct = policy.wakep_delay_slow_pct;
            timed += &format!(" (wakep delayed only while over {pct}% of kicks are slow)");
        }
        log::info!(
            "scx_gmp {} scheduling {nr_cpus} CPUs: {params}{}{timed}",
            scx_gmp::cli::version(),
            go.iter().filter(|g| g.0).map(|g| g.1).collect::<String>()
        );
        Ok(Self {
            skel,
            struct_ops,
            stats_server,
            nr_cpus,
            started: Instant::now(),
        })
    }

    /// Read the counters, and the queue lengths through the snapshot program.
    fn metrics(&self) -> Result<Metrics> {
        self.skel
            .progs
            .snapshot
            .test_run(ProgramInput::default())
            .context("snapshot program failed")?;
        let bss = self.skel.maps.bss_data.as_ref().unwrap();
        let mut m = Metrics {
            uptime_ms: self.started.elapsed().as_millis() as u64,
            gomaxprocs: self.nr_cpus as u64,
            idleprocs: bss.snap_idle.max(0) as u64,
            threads: bss.nr_tasks,
            spinningthreads: bss.nmspinning,
            runqueue: bss.snap_grq.max(0) as u64,
            ..Default::default()
        };
        let mut sum = [0u64; gmp_stat_GMP_NR_STATS as usize];
        for c in &bss.cpus[..self.nr_cpus] {
            let kicked = (c.snap_runnext - 1).max(0);
            m.lrq.push((c.snap_lrq.max(0) + kicked) as u64);
            m.max_wait_us = m.max_wait_us.max(c.max_wait_ns / 1000);
            for (s, v) in sum.iter_mut().zip(c.stats.iter()) {
                *s += v;
            }
        }
        m.set_bpf_counters(&sum);
        Ok(m)
    }

    fn run(
        &mut self,
        shutdown: &AtomicBool,
        trace: Option<&Rc<RefCell<TraceFile>>>,
    ) -> Result<UserExitInfo> {
        let (res_ch, req_ch) = self.stats_server.channels();
        let rb = match trace {
            Some(t) => {
                let t = t.clone();
                let mut b = RingBufferBuilder::new();
                b.add(&self.skel.maps.trace_rb, move |data: &[u8]| {
                    t.borrow_mut().record(data);
                    0
                })?;
                Some(b.build()?)
            }
            None => None,
        };
        // Tracing: drain the ring buffer every GMP_TRACE_POLL_MS (no record
        // wakes the agent, intf.h), and answer stats requests between.
        // Otherwise wake once a second, as scx_bpfland does, to notice a
        // signal or an ejection: at 4 wakes a second the agent used 3 to
        // 4 ms of CPU a second on an idle 2-vCPU TCG guest, at 1 about 1 ms.
        let wait = match rb {
            Some(_) => Duration::from_millis(gmp_consts_GMP_TRACE_POLL_MS as u64),
            None => Duration::from_secs(1),
        };
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            if let Some(rb) = &rb {
                rb.consume()?;
            }
            match req_ch.recv_timeout(wait) {
                Ok(()) => res_ch.send(self.metrics()?)?,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(e) => Err(e)?,
            }
        }
        let last = self.metrics();
        if let Ok(m) = &last {
            m.log_final();
        }
        if let Some(rb) = rb {
            rb.consume()?;
            if let (Some(t), Ok(m)) = (trace, &last) {
                t.borrow_mut().dropped += m.trace_dropped;
            }
        }
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }
}

/// Schedule until SIGINT/SIGTERM or until the kernel ejects the scheduler;
/// restart when the kernel asks for it (it handles CPU hotplug itself).
pub fn run(
    policy: &PolicyOpts,
    agent: &AgentOpts,
    trace_path: Option<&Path>,
    shutdown: Arc<AtomicBool>,
) -> Result<()> {
    let params = policy.params(*NR_CPU_IDS, 1);
    let trace = match trace_path {
        Some(path) => {
            let header = trace::Header {
                params: params.clone(),
                knobs: policy.knobs(),
            };
            Some(Rc::new(RefCell::new(TraceFile::create(path, &header)?)))
        }
        None => None,
    };
    let mut open_object = MaybeUninit::uninit();
    let result = loop {
        let mut sched = Scheduler::init(&params, agent, policy, trace.is_some(), &mut open_object)?;
        let exit = sched.run(&shutdown, trace.as_ref());
        drop(sched);
        match exit {
            Ok(uei) if uei.should_restart() && !shutdown.load(Ordering::Relaxed) => {
                log::info!("the kernel asked for a restart");
                await_hotplug();
                if let Some(t) = &trace {
                    t.borrow_mut().line(trace::RESTART)?;
                }
            }
            Ok(_) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    if let Some(t) = trace {
        let t = Rc::try_unwrap(t).map_err(|_| anyhow::anyhow!("the trace file is still in use"))?;
        t.into_inner().finish()?;
    }
    result
}
