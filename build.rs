// Build bpf/main.bpf.c into its libbpf skeleton (gmp_skel.rs) and bpf/intf.h
// into Rust (gmp_intf.rs), with a clang that can (bpf/clang.rs); and name the
// git commit for `--version`.
include!("bpf/clang.rs");

fn main() {
    use_bpf_clang();
    git_sha();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("bpf/intf.h", "gmp_intf.rs")
        .enable_skel("bpf/main.bpf.c", "gmp")
        .build()
        .unwrap();
}

/// GMP_GIT_SHA: the commit this is built from ("" outside a git checkout).
fn git_sha() {
    if std::path::Path::new(".git/logs/HEAD").exists() {
        println!("cargo:rerun-if-changed=.git/logs/HEAD");
    }
    let sha = std::process::Command::new("git")
        .args(["rev-parse", "--short=8", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=GMP_GIT_SHA={sha}");
}
