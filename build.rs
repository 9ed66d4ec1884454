// Compile the BPF side (bpf/) and generate its Rust skeleton and the shared
// interface bindings. BPF_CLANG selects the compiler (clang >= 18).
fn main() {
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("bpf/intf.h", "bpf_intf.rs")
        .enable_skel("bpf/main.bpf.c", "bpf")
        .build()
        .unwrap();
}
