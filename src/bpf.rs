//! The kernel-facing side of the BPF mode: open, configure, load and attach
//! bpf/main.bpf.c, serve its counters through scx_stats, and detach on exit.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::{OpenObject, ProgramInput};
use scx_stats::prelude::*;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};
use scx_utils::{UserExitInfo, NR_CPU_IDS};

use crate::bpf_skel::*;
use scx_gmp::bpf_intf::*;
use scx_gmp::cli::{AgentOpts, PolicyOpts};
use scx_gmp::model::{coprimes, Params};
use scx_gmp::stats::{server_data, Metrics};

struct Scheduler<'a> {
    skel: GmpSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    stats_server: StatsServer<(), Metrics>,
    nr_cpus: usize,
    started: Instant,
}

impl<'a> Scheduler<'a> {
    fn init(
        params: &Params,
        agent: &AgentOpts,
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

        let rodata = skel.maps.rodata_data.as_mut().unwrap();
        rodata.slice_ns = params.slice_ns;
        rodata.min_slice_ns = params.min_slice_ns;
        rodata.runnext_grace_ns = params.runnext_grace_ns;
        rodata.lrq_cap = params.lrq_cap as u32;
        rodata.global_every = params.global_every;
        rodata.steal_tries = params.steal_tries;
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
        log::info!(
            "scx_gmp {} scheduling {nr_cpus} CPUs: {params}",
            scx_gmp::cli::version()
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
    fn metrics(&mut self) -> Result<Metrics> {
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
            for (s, v) in sum.iter_mut().zip(c.stats.iter()) {
                *s += v;
            }
        }
        m.set_bpf_counters(&sum);
        Ok(m)
    }

    fn run(&mut self, shutdown: &AtomicBool) -> Result<UserExitInfo> {
        let (res_ch, req_ch) = self.stats_server.channels();
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            match req_ch.recv_timeout(Duration::from_millis(250)) {
                Ok(()) => res_ch.send(self.metrics()?)?,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(e) => Err(e)?,
            }
        }
        if let Ok(m) = self.metrics() {
            m.log_final();
        }
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }
}

/// Schedule until SIGINT/SIGTERM or until the kernel ejects the scheduler;
/// restart when the kernel asks for it (CPU hotplug, for one).
pub fn run(policy: &PolicyOpts, agent: &AgentOpts, shutdown: Arc<AtomicBool>) -> Result<()> {
    let params = policy.params(*NR_CPU_IDS, 1);
    let mut open_object = MaybeUninit::uninit();
    loop {
        let mut sched = Scheduler::init(&params, agent, &mut open_object)?;
        if !sched.run(&shutdown)?.should_restart() || shutdown.load(Ordering::Relaxed) {
            return Ok(());
        }
        log::info!("the kernel asked for a restart");
    }
}
