//! scx_gmp: the Go runtime's G-M-P scheduling policy for every Linux thread.
//!
//! The library holds everything that does not touch the kernel: the stats
//! record and its Go `schedtrace` rendering (shared by every mode), the pure
//! policy model and the deterministic simulator that drives it.

pub mod cli;
pub mod model;
pub mod sim;
pub mod stats;
