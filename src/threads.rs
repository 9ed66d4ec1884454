//! Rules the user-space mode follows about the threads it schedules. They
//! live here, in the library, so that their tests run outside the user
//! mode's allocator.
//!
//! The agent schedules every task, so it must never sleep on a lock that a
//! task it has not run yet may hold: that task would wait for the agent and
//! the agent for it, until the kernel ejects the scheduler (an RCU stall).
//! Reading another task's /proc files can do that on Linux 7.3: `stat`
//! takes the target's exec lock (held by a task preempted in execve),
//! `status` may drop the last reference to an exiting task's memory and
//! free it under a lock shared with its forked relatives, and a workqueue
//! worker's name is built under a mutex. So the agent reads none: it asks
//! the BPF layer's task storage, and `kill(tid, 0)`.

/// Whether a task is a workqueue worker (`kworker/...`, the name the kernel
/// gives every one, rescuers included): the kernel threads the agent runs
/// in place, told by their name alone.
pub fn is_kworker(comm: &[u8]) -> bool {
    comm.starts_with(b"kworker/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_workqueue_workers_are_kworkers() {
        assert!(is_kworker(b"kworker/u16:3\0\0"));
        assert!(is_kworker(b"kworker/R-rcu_g"));
        assert!(!is_kworker(b"kworkerd"));
        assert!(!is_kworker(b"rcu_preempt"));
        assert!(!is_kworker(b""));
    }
}
