//! What the user-space mode reads of a thread in `/proc/<tid>/status`
//! (proc(5)) to tell blocked and kernel threads apart, and the rules that say
//! when it must not read it. It lives here, in the library, so that its tests
//! run outside the user mode's allocator.
//!
//! The agent schedules every task, so it must never sleep on a lock that a
//! task it has not run yet may hold: that task would wait for the agent and
//! the agent for it, until the kernel ejects the scheduler (an RCU stall).
//! On Linux 7.3, reading `/proc/<tid>/stat` takes such a lock (the target's
//! exec lock, for its ptrace check: held by a task preempted in execve), and
//! `status` does not. Neither may be read for a workqueue worker (see
//! `is_kworker`).

/// The value of the `key:` line of a /proc/<tid>/status text (`State`,
/// `Kthread`, ...), without its leading blanks. A line is one only from
/// its start: the kernel escapes a newline in the thread's name.
pub fn status_value<'a>(status: &'a [u8], key: &str) -> Option<&'a [u8]> {
    status.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(key.as_bytes())?.strip_prefix(b":")?;
        let start = rest.iter().position(|&b| b != b'\t' && b != b' ')?;
        Some(&rest[start..])
    })
}

/// Whether a status text says the thread is not runnable: any state but
/// `R` (running or waiting for a CPU), or no state at all (gone).
pub fn not_runnable(status: Option<&[u8]>) -> bool {
    status
        .and_then(|s| status_value(s, "State"))
        .and_then(|v| v.first())
        != Some(&b'R')
}

/// Whether a status text says the thread is a kernel thread
/// (`Kthread: 1`, since Linux 6.0).
pub fn kthread(status: Option<&[u8]>) -> bool {
    status.and_then(|s| status_value(s, "Kthread")) == Some(b"1")
}

/// Whether a task is a workqueue worker (`kworker/...`, the name the kernel
/// gives every one, rescuers included). The agent never reads such a task's
/// /proc files: the kernel builds a worker's name under
/// `wq_pool_attach_mutex`, which a reader preempted in the same place holds.
pub fn is_kworker(comm: &[u8]) -> bool {
    comm.starts_with(b"kworker/")
}

/// Whether an enqueue with counter `enq_cnt` comes from a new thread under
/// a task id last seen with `seen`. The BPF layer counts each task's
/// enqueues from 1 and the agent sees every one of them in order, so the
/// count only grows while the thread lives; a new thread under a reused id
/// starts again from 1.
pub fn new_thread(seen: u64, enq_cnt: u64) -> bool {
    enq_cnt <= seen
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &[u8] = b"Name:\ta b) c\\nState: R\nUmask:\t0022\nState:\tS (sleeping)\n\
        Tgid:\t4242\nKthread:\t0\nVmRSS:\t  1000 kB\n";

    #[test]
    fn a_value_is_read_from_the_start_of_its_line_only() {
        // An escaped newline in the name is not a line.
        assert_eq!(status_value(STATUS, "State"), Some(&b"S (sleeping)"[..]));
        assert_eq!(status_value(STATUS, "Tgid"), Some(&b"4242"[..]));
        assert_eq!(status_value(STATUS, "VmRSS"), Some(&b"1000 kB"[..]));
        assert_eq!(status_value(STATUS, "Tgi"), None, "a key is a whole word");
        assert_eq!(status_value(STATUS, "Missing"), None);
        assert_eq!(status_value(b"State:", "State"), None, "no value");
        assert_eq!(status_value(b"", "State"), None);
    }

    #[test]
    fn only_a_running_or_waiting_thread_is_runnable() {
        assert!(not_runnable(Some(STATUS)));
        assert!(!not_runnable(Some(b"State:\tR (running)\n")));
        assert!(not_runnable(Some(b"State:\tD (disk sleep)\n")));
        assert!(not_runnable(Some(b"Name:\tx\n")), "cut before the state");
        assert!(not_runnable(None), "gone");
    }

    #[test]
    fn a_kernel_thread_says_so() {
        assert!(kthread(Some(b"Name:\tkthreadd\nKthread:\t1\n")));
        assert!(!kthread(Some(STATUS)));
        assert!(!kthread(Some(b"Name:\told kernel\n")), "no Kthread line");
        assert!(!kthread(None));
    }

    #[test]
    fn only_workqueue_workers_are_kworkers() {
        assert!(is_kworker(b"kworker/u16:3\0\0"));
        assert!(is_kworker(b"kworker/R-rcu_g"));
        assert!(!is_kworker(b"kworkerd"));
        assert!(!is_kworker(b"rcu_preempt"));
        assert!(!is_kworker(b""));
    }

    #[test]
    fn a_count_that_does_not_grow_is_a_new_thread() {
        assert!(!new_thread(0, 1), "first sight");
        assert!(!new_thread(5, 6));
        assert!(new_thread(5, 1), "the id was reused");
        assert!(
            new_thread(5, 5),
            "the same enqueue twice cannot be one thread"
        );
    }
}
