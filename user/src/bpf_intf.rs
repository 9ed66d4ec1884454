// The bindgen output of scx_rustland_core's intf.h (see build.rs).
#![allow(warnings)]

include!(concat!(env!("OUT_DIR"), "/bpf_intf.rs"));
