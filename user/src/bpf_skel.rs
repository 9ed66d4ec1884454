// The libbpf skeleton of scx_rustland_core's BPF layer (see build.rs).
#![allow(clippy::all, warnings)]

include!(concat!(env!("OUT_DIR"), "/bpf_skel.rs"));
