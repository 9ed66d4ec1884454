//! scx_gmp: the Go runtime's G-M-P scheduling policy for every Linux thread.
//!
//! The library holds everything both agents share and nothing that loads a
//! BPF program: the options, the pre-load checks, the stats record and its Go
//! `schedtrace` rendering, the pure policy model and the deterministic
//! simulator that drives it, and the decision trace with its checker.
//! docs/go-policy.md states the rules.

pub mod bpf_intf;
pub mod check;
pub mod cli;
pub mod load;
pub mod model;
pub mod sim;
pub mod stats;
pub mod trace;
