// The libbpf skeleton of bpf/main.bpf.c (see build.rs).
#![allow(clippy::all, warnings)]

include!(concat!(env!("OUT_DIR"), "/gmp_skel.rs"));
