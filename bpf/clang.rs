// Included by both build scripts (build.rs, user/build.rs): pick the clang
// that compiles the BPF side. It needs clang 18 or newer, and Debian 12's
// plain `clang` is 14. BPF_CLANG, when set, wins; otherwise the newest
// `clang-N` on PATH with N >= 18, or a plain `clang` that new. With none, the
// build stops with one line saying what to install.
fn use_bpf_clang() {
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    if std::env::var_os("BPF_CLANG").is_some() {
        return;
    }
    let major = |cmd: &str| -> Option<u32> {
        let out = std::process::Command::new(cmd).arg("--version").output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let version = text.split("version ").nth(1)?;
        version.split('.').next()?.trim().parse().ok()
    };
    let names = (18..=40).rev().map(|n| format!("clang-{n}"));
    match names.chain(["clang".into()]).find(|c| major(c).is_some_and(|m| m >= 18)) {
        Some(clang) => std::env::set_var("BPF_CLANG", clang),
        None => {
            eprintln!(
                "error: the BPF side needs clang 18 or newer: install clang-19 \
                 (apt-get install clang-19 llvm-19), or set BPF_CLANG"
            );
            std::process::exit(1);
        }
    }
}
