// The bindgen output of bpf/intf.h (see build.rs): the DSQ ids, the counter
// ids and every Go default, shared by the BPF side and all Rust code.
#![allow(warnings)]

include!(concat!(env!("OUT_DIR"), "/gmp_intf.rs"));
