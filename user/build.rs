include!("../bpf/clang.rs");

fn main() {
    use_bpf_clang();
    scx_rustland_core::RustLandBuilder::new()
        .unwrap()
        .build()
        .unwrap();
}
