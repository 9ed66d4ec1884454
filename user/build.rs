// Build user/bpf (scx_rustland_core's BPF layer, taking CPU hotplug in
// place) into its skeleton and interface, with a clang that can.
include!("../bpf/clang.rs");

fn main() {
    use_bpf_clang();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("bpf/intf.h", "bpf_intf.rs")
        .enable_skel("bpf/main.bpf.c", "bpf")
        .build()
        .unwrap();
}
