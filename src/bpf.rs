//! The kernel-facing side of the BPF mode: open, configure, load and attach
//! bpf/main.bpf.c, serve its counters through scx_stats, and detach on exit.

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod bpf_intf {
    include!(concat!(env!("OUT_DIR"), "/gmp_intf.rs"));
}
#[allow(
    clippy::all,
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod bpf_skel {
    include!(concat!(env!("OUT_DIR"), "/gmp_skel.rs"));
}

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::{OpenObject, ProgramInput};
use scx_gmp::stats::server_data;
use scx_stats::prelude::*;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};
use scx_utils::{UserExitInfo, NR_CPU_IDS};

use bpf_intf::*;
use bpf_skel::*;
use scx_gmp::model::coprimes;
use scx_gmp::stats::Metrics;

use scx_gmp::cli::PolicyOpts;

struct Scheduler<'a> {
    skel: GmpSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    stats_server: StatsServer<(), Metrics>,
    nr_cpus: usize,
    started: Instant,
}

impl<'a> Scheduler<'a> {
    fn init(
        policy: &PolicyOpts,
        exit_dump_len: u32,
        verbose: bool,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        let nr_cpus = *NR_CPU_IDS;
        if nr_cpus > gmp_consts_GMP_MAX_CPUS as usize {
            bail!(
                "{nr_cpus} CPU ids, but scx_gmp manages at most {}",
                gmp_consts_GMP_MAX_CPUS
            );
        }

        let mut builder = GmpSkelBuilder::default();
        builder.obj_builder.debug(verbose);
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            gmp_ops,
            None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
        )?;
        skel.struct_ops.gmp_ops_mut().exit_dump_len = exit_dump_len;

        let rodata = skel.maps.rodata_data.as_mut().unwrap();
        rodata.slice_ns = policy.slice_us * 1000;
        rodata.min_slice_ns = policy.min_slice_us * 1000;
        rodata.runnext_grace_ns = policy.runnext_grace_us * 1000;
        rodata.lrq_cap = policy.lrq_cap;
        rodata.global_every = policy.global_every;
        rodata.steal_tries = policy.steal_tries;
        rodata.nr_cpus = nr_cpus as u32;
        let cp = coprimes(nr_cpus as u32);
        rodata.nr_coprimes = cp.len() as u32;
        rodata.coprimes[..cp.len()].copy_from_slice(&cp);

        let mut skel = scx_ops_load!(skel, gmp_ops, uei)?;
        let struct_ops = Some(scx_ops_attach!(skel, gmp_ops)?);
        let stats_server = StatsServer::new(server_data()).launch()?;
        log::info!(
            "scx_gmp {} scheduling {nr_cpus} CPUs: slice {} us, LRQ {}, global every {}, {} steal rounds",
            env!("CARGO_PKG_VERSION"),
            policy.slice_us,
            policy.lrq_cap,
            policy.global_every,
            policy.steal_tries
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
        m.runnext_put = sum[gmp_stat_GMP_STAT_RUNNEXT_PUT as usize];
        m.runnext_kick = sum[gmp_stat_GMP_STAT_RUNNEXT_KICK as usize];
        m.runnext_hit = sum[gmp_stat_GMP_STAT_RUNNEXT_HIT as usize];
        m.lrq_put = sum[gmp_stat_GMP_STAT_LRQ_PUT as usize];
        m.lrq_get = sum[gmp_stat_GMP_STAT_LRQ_GET as usize];
        m.overflow = sum[gmp_stat_GMP_STAT_OVERFLOW as usize];
        m.overflow_tasks = sum[gmp_stat_GMP_STAT_OVERFLOW_TASKS as usize];
        m.global_put = sum[gmp_stat_GMP_STAT_GLOBAL_PUT as usize];
        m.global_61 = sum[gmp_stat_GMP_STAT_GLOBAL_61 as usize];
        m.global_batch = sum[gmp_stat_GMP_STAT_GLOBAL_BATCH as usize];
        m.global_batch_tasks = sum[gmp_stat_GMP_STAT_GLOBAL_BATCH_TASKS as usize];
        m.steal_try = sum[gmp_stat_GMP_STAT_STEAL_TRY as usize];
        m.steal_ok = sum[gmp_stat_GMP_STAT_STEAL_OK as usize];
        m.stolen_tasks = sum[gmp_stat_GMP_STAT_STOLEN_TASKS as usize];
        m.stolen_runnext = sum[gmp_stat_GMP_STAT_STOLEN_RUNNEXT as usize];
        m.slice_expired = sum[gmp_stat_GMP_STAT_SLICE_EXPIRED as usize];
        m.yields = sum[gmp_stat_GMP_STAT_YIELD as usize];
        m.idle = sum[gmp_stat_GMP_STAT_IDLE as usize];
        m.kicks = sum[gmp_stat_GMP_STAT_KICK as usize];
        m.spins = sum[gmp_stat_GMP_STAT_SPIN as usize];
        m.locked = sum[gmp_stat_GMP_STAT_LOCKED as usize];
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
            log::info!("final stats:\n{}\n{}", m.schedtrace(), m.counters());
        }
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }
}

/// Schedule until SIGINT/SIGTERM or until the kernel ejects the scheduler;
/// restart when the kernel asks for it (CPU hotplug, for one).
pub fn run(
    policy: &PolicyOpts,
    exit_dump_len: u32,
    verbose: bool,
    shutdown: Arc<AtomicBool>,
) -> Result<()> {
    let mut open_object = MaybeUninit::uninit();
    loop {
        let mut sched = Scheduler::init(policy, exit_dump_len, verbose, &mut open_object)?;
        if !sched.run(&shutdown)?.should_restart() || shutdown.load(Ordering::Relaxed) {
            return Ok(());
        }
        log::info!("the kernel asked for a restart");
    }
}
