//! `gmp-load`: Go-shaped workloads for the VM tests and the benchmarks.
//!
//! Every workload prints one line of `key=value` results, including `share=`,
//! the fraction of busy samples each CPU took, so a test can see where the
//! threads ran.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "gmp-load",
    about = "Go-shaped workloads for testing and benchmarking scx_gmp"
)]
struct Opts {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// One thread spawns THREADS threads that each spin BUSY_MS, then joins
    /// them (Go: a loop of `go f()`). Prints the makespan.
    Fanout {
        #[arg(long, default_value_t = 1000)]
        threads: usize,
        #[arg(long, default_value_t = 20)]
        busy_ms: u64,
        /// Park every thread on a futex first, then wake them all with one
        /// FUTEX_WAKE from the spawning thread: a burst as dense as Go's
        /// `go f()` loop, which a kernel clone() per thread is not.
        #[arg(long)]
        gate: bool,
    },
    /// THREADS CPU-bound threads each spin for SECS seconds of CPU time.
    Spin {
        #[arg(long, default_value_t = 8)]
        threads: usize,
        #[arg(long, default_value_t = 2.0)]
        secs: f64,
    },
    /// Two threads pass a token ROUNDS times; prints the round-trip p50/p99.
    Pingpong {
        #[arg(long, default_value_t = 20_000)]
        rounds: usize,
    },
    /// A recursive spawn/join tree of depth DEPTH (fib-shaped, as in
    /// "Concurrency in Go"); each leaf spins LEAF_US. Prints the makespan.
    Forkjoin {
        #[arg(long, default_value_t = 10)]
        depth: u32,
        #[arg(long, default_value_t = 200)]
        leaf_us: u64,
    },
    /// THREADS threads of one process each map 64 KiB, write to each of
    /// its pages, drop them (madvise), write them again and unmap it, in a
    /// loop, for SECS seconds. Every map and unmap takes the process's
    /// memory-map lock for writing and every madvise for reading, so the
    /// threads queue for it and wake from an uninterruptible sleep, as a
    /// program's threads do around glibc's thread stacks. Prints the loops
    /// done per second.
    Maplock {
        #[arg(long, default_value_t = 8)]
        threads: usize,
        #[arg(long, default_value_t = 5.0)]
        secs: f64,
    },
    /// A server: a dispatcher thread hands requests to WORKERS worker
    /// threads (Go: a goroutine per request, or a worker pool). Requests
    /// arrive at LOAD times the CPUs' capacity (LOAD 0.3 is light, 1.5 is
    /// overloaded) for SECS seconds; each costs THINK_US of CPU. The
    /// dispatcher wakes an idle worker for each; busy workers take the
    /// backlog. Prints the wakeup latency (the dispatcher's wake to the
    /// worker running), the request latency (arrival to done),
    /// requests/s (done over the time to the last one done) and the
    /// dispatcher's sent/s (over its SECS: below the offered rate when the
    /// dispatcher, not the workers, is what cannot keep up).
    Request {
        #[arg(long, default_value_t = 16)]
        workers: usize,
        #[arg(long, default_value_t = 500)]
        think_us: u64,
        #[arg(long, default_value_t = 0.3)]
        load: f64,
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
}

/// CPU time this thread has used.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Busy samples per CPU, shared by all threads of a workload.
struct Samples(Vec<AtomicU64>);

impl Samples {
    fn new() -> Arc<Self> {
        let n = thread::available_parallelism()
            .map_or(1, |n| n.get())
            .max(1);
        Arc::new(Self((0..n.max(64)).map(|_| AtomicU64::new(0)).collect()))
    }

    /// Spin until this thread has used `d` of CPU time, sampling the CPU
    /// it runs on every few microseconds.
    fn spin(&self, d: Duration) {
        let end = thread_cpu_time() + d;
        while thread_cpu_time() < end {
            let cpu = unsafe { libc::sched_getcpu() };
            if let Some(c) = self.0.get(cpu.max(0) as usize) {
                c.fetch_add(1, Ordering::Relaxed);
            }
            for _ in 0..200 {
                std::hint::spin_loop();
            }
        }
    }

    /// `cpus_used=N share=a,b,c,...` over the online CPUs (all of them,
    /// also those this process may not use).
    fn report(&self) -> String {
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let ncpu = (online.max(1) as usize).min(self.0.len());
        let v: Vec<u64> = self.0[..ncpu]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total = v.iter().sum::<u64>().max(1) as f64;
        let share: Vec<String> = v
            .iter()
            .map(|&x| format!("{:.3}", x as f64 / total))
            .collect();
        format!(
            "cpus_used={} share={}",
            v.iter().filter(|&&x| x > 0).count(),
            share.join(",")
        )
    }
}

/// A one-shot start gate: threads sleep on a futex until `open`.
struct Gate(AtomicU32);

impl Gate {
    fn wait(&self) {
        while self.0.load(Ordering::Acquire) == 0 {
            unsafe {
                libc::syscall(libc::SYS_futex, self.0.as_ptr(), libc::FUTEX_WAIT, 0, 0);
            }
        }
    }

    fn open(&self) {
        self.0.store(1, Ordering::Release);
        unsafe {
            libc::syscall(libc::SYS_futex, self.0.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
        }
    }
}

fn fanout(threads: usize, busy: Duration, gate: bool) -> String {
    let s = Samples::new();
    let g = Arc::new(Gate(AtomicU32::new(u32::from(!gate))));
    let mut t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (s, g) = (s.clone(), g.clone());
            thread::spawn(move || {
                g.wait();
                s.spin(busy)
            })
        })
        .collect();
    if gate {
        t0 = Instant::now();
        g.open();
    }
    for h in hs {
        h.join().unwrap();
    }
    format!(
        "workload=fanout threads={threads} makespan_ms={} {}",
        t0.elapsed().as_millis(),
        s.report()
    )
}

fn spin(threads: usize, secs: f64) -> String {
    let s = Samples::new();
    let d = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || s.spin(d))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    format!(
        "workload=spin threads={threads} makespan_ms={} {}",
        t0.elapsed().as_millis(),
        s.report()
    )
}

fn pingpong(rounds: usize) -> String {
    let (to_b, b_rx) = mpsc::sync_channel::<Instant>(0);
    let (to_a, a_rx) = mpsc::sync_channel::<Instant>(0);
    let b = thread::spawn(move || {
        while let Ok(t) = b_rx.recv() {
            if to_a.send(t).is_err() {
                break;
            }
        }
    });
    let mut rtt: Vec<u64> = Vec::with_capacity(rounds);
    let t0 = Instant::now();
    for _ in 0..rounds {
        to_b.send(Instant::now()).unwrap();
        let sent = a_rx.recv().unwrap();
        rtt.push(sent.elapsed().as_nanos() as u64);
    }
    drop(to_b);
    b.join().unwrap();
    rtt.sort_unstable();
    format!(
        "workload=pingpong rounds={rounds} total_ms={} rtt_p50_us={} rtt_p99_us={}",
        t0.elapsed().as_millis(),
        pct_us(&rtt, 0.50),
        pct_us(&rtt, 0.99)
    )
}

fn forkjoin_node(depth: u32, leaf: Duration, s: &Arc<Samples>) {
    if depth == 0 {
        s.spin(leaf);
        return;
    }
    let s2 = s.clone();
    let h = thread::spawn(move || forkjoin_node(depth - 1, leaf, &s2));
    forkjoin_node(depth - 1, leaf, s);
    h.join().unwrap();
}

fn forkjoin(depth: u32, leaf: Duration) -> String {
    let s = Samples::new();
    let t0 = Instant::now();
    forkjoin_node(depth, leaf, &s);
    format!(
        "workload=forkjoin depth={depth} leaves={} makespan_ms={} {}",
        1u64 << depth,
        t0.elapsed().as_millis(),
        s.report()
    )
}

/// The p-th percentile of sorted nanoseconds, in microseconds to one
/// decimal, or `-` when there is no sample (an overloaded request load can
/// keep every worker busy and wake none): a 0 would read as a latency.
fn pct_us(sorted: &[u64], p: f64) -> String {
    match sorted.len() {
        0 => "-".into(),
        n => format!(
            "{:.1}",
            sorted[((n as f64 - 1.0) * p) as usize] as f64 / 1000.0
        ),
    }
}

/// What the dispatcher leaves in a worker's mailbox.
enum Mail {
    Empty,
    /// A request: when it arrived, and when the dispatcher woke the worker.
    Request(Instant, Instant),
    /// No more requests.
    Close,
}

type Mailbox = (Mutex<Mail>, Condvar);

/// The dispatcher's view: idle workers and requests no worker has taken.
struct Pool {
    idle: Vec<usize>,
    backlog: VecDeque<Instant>,
    open: bool,
}

fn request(workers: usize, think: Duration, load: f64, secs: f64) -> String {
    let ncpu = thread::available_parallelism().map_or(1, |n| n.get());
    let rate = load * ncpu as f64 / think.as_secs_f64().max(1e-6);
    let busy = Samples::new();
    let pool = Arc::new((
        Mutex::new(Pool {
            idle: Vec::new(),
            backlog: VecDeque::new(),
            open: true,
        }),
        (0..workers)
            .map(|_| (Mutex::new(Mail::Empty), Condvar::new()))
            .collect::<Vec<Mailbox>>(),
    ));
    let hs: Vec<_> = (0..workers)
        .map(|w| {
            let (pool, busy) = (pool.clone(), busy.clone());
            thread::spawn(move || {
                let (state, boxes) = &*pool;
                let (mut wake, mut req) = (Vec::new(), Vec::new());
                loop {
                    // Take the backlog first; go idle only when it is empty.
                    // The pool's lock is released before the think time:
                    // held through it (as before 2026-12-02), the workers
                    // queued for it one at a time behind the backlog and the
                    // dispatcher waited for it to send.
                    let mut st = state.lock().unwrap();
                    let arrived = match st.backlog.pop_front() {
                        Some(t) => {
                            drop(st);
                            t
                        }
                        None if !st.open => break,
                        None => {
                            st.idle.push(w);
                            drop(st);
                            let mut m = boxes[w].0.lock().unwrap();
                            while matches!(*m, Mail::Empty) {
                                m = boxes[w].1.wait(m).unwrap();
                            }
                            match std::mem::replace(&mut *m, Mail::Empty) {
                                Mail::Request(arrived, woken) => {
                                    wake.push(woken.elapsed().as_nanos() as u64);
                                    arrived
                                }
                                _ => break,
                            }
                        }
                    };
                    busy.spin(think);
                    req.push(arrived.elapsed().as_nanos() as u64);
                }
                (wake, req)
            })
        })
        .collect();
    // Open loop: arrivals on a fixed clock, whatever the workers manage.
    let (state, boxes) = &*pool;
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        let due = t0 + Duration::from_secs_f64(sent as f64 / rate);
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            thread::sleep(d);
        }
        let now = Instant::now();
        let mut st = state.lock().unwrap();
        match st.idle.pop() {
            Some(w) => {
                drop(st);
                *boxes[w].0.lock().unwrap() = Mail::Request(due.min(now), Instant::now());
                boxes[w].1.notify_one();
            }
            None => st.backlog.push_back(due.min(now)),
        }
        sent += 1;
    }
    // The dispatcher's own rate: below the offered one when it cannot keep
    // up, and then req_per_s measures it, not the workers.
    let sent_per_s = sent as f64 / t0.elapsed().as_secs_f64();
    // Close: busy workers drain the backlog and stop; idle ones are told.
    let idle = {
        let mut st = state.lock().unwrap();
        st.open = false;
        std::mem::take(&mut st.idle)
    };
    for w in idle {
        *boxes[w].0.lock().unwrap() = Mail::Close;
        boxes[w].1.notify_one();
    }
    let (mut wake, mut req) = (Vec::new(), Vec::new());
    for h in hs {
        let (w, r) = h.join().unwrap();
        wake.extend(w);
        req.extend(r);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    wake.sort_unstable();
    req.sort_unstable();
    format!(
        "workload=request workers={workers} load={load} offered_per_s={rate:.0} done={} wakes={} \
         wake_p50_us={} wake_p99_us={} req_p50_us={} req_p99_us={} req_per_s={:.0} \
         sent_per_s={sent_per_s:.0}",
        req.len(),
        wake.len(),
        pct_us(&wake, 0.50),
        pct_us(&wake, 0.99),
        pct_us(&req, 0.50),
        pct_us(&req, 0.99),
        req.len() as f64 / elapsed
    )
}

/// One loop of `maplock`: map 64 KiB and write each page, drop the pages
/// (madvise, under the memory-map lock for reading, as glibc does with a
/// finished thread's stack), write them again, and unmap it.
fn map_touch_unmap() {
    const LEN: usize = 64 << 10;
    const PAGE: usize = 4096;
    // SAFETY: a fresh private anonymous mapping, written only within its
    // LEN bytes and unmapped before anything else can see it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap failed");
        let touch = || {
            for off in (0..LEN).step_by(PAGE) {
                p.cast::<u8>().add(off).write_volatile(1);
            }
        };
        touch();
        libc::madvise(p, LEN, libc::MADV_DONTNEED);
        touch();
        libc::munmap(p, LEN);
    }
}

fn maplock(threads: usize, secs: f64) -> String {
    let d = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            thread::spawn(move || {
                let mut n = 0u64;
                while t0.elapsed() < d {
                    map_touch_unmap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let loops: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    format!(
        "workload=maplock threads={threads} loops={loops} ops_per_s={:.0}",
        loops as f64 / t0.elapsed().as_secs_f64()
    )
}

fn main() {
    let line = match Opts::parse().cmd {
        Cmd::Fanout {
            threads,
            busy_ms,
            gate,
        } => fanout(threads, Duration::from_millis(busy_ms), gate),
        Cmd::Spin { threads, secs } => spin(threads, secs),
        Cmd::Maplock { threads, secs } => maplock(threads.max(1), secs),
        Cmd::Pingpong { rounds } => pingpong(rounds.max(1)),
        Cmd::Forkjoin { depth, leaf_us } => forkjoin(depth.min(16), Duration::from_micros(leaf_us)),
        Cmd::Request {
            workers,
            think_us,
            load,
            secs,
        } => request(
            workers.max(1),
            Duration::from_micros(think_us),
            load.max(0.001),
            secs,
        ),
    };
    println!("{line}");
}
