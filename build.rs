// Build both BPF objects and their Rust skeletons (BPF_CLANG picks the
// compiler, clang >= 18; .cargo/config.toml defaults it to clang-19):
//
// - bpf/main.bpf.c, the Go policy in BPF: gmp_skel.rs and gmp_intf.rs, for
//   scx_gmp;
// - scx_rustland_core's BPF layer: bpf_skel.rs, bpf_intf.rs and the
//   BpfScheduler wrapper rustland/src/bpf.rs, for scx_gmp-user.
//
// RustLandBuilder writes its sources into the current directory, so it runs
// inside OUT_DIR/rustland. Its cargo:rerun-if-changed lines name those
// relative paths, which cargo would resolve against the package root and
// find missing, rebuilding on every build; so its output is diverted to a
// log (and only its warnings are passed on). Its sources change only with
// the crate's version, which reruns this script anyway.
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

fn main() {
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("bpf/intf.h", "gmp_intf.rs")
        .enable_skel("bpf/main.bpf.c", "gmp")
        .build()
        .unwrap();

    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let dir = out.join("rustland");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let log_path = dir.join("build.log");
    let log = File::create(&log_path).unwrap();
    let here = std::env::current_dir().unwrap();
    std::env::set_current_dir(&dir).unwrap();
    std::io::stdout().flush().unwrap();
    let saved = unsafe { libc::dup(1) };
    unsafe { libc::dup2(log.as_raw_fd(), 1) };
    let built = scx_rustland_core::RustLandBuilder::new().and_then(|mut b| b.build());
    std::io::stdout().flush().unwrap();
    unsafe {
        libc::dup2(saved, 1);
        libc::close(saved);
    }
    std::env::set_current_dir(here).unwrap();
    for line in std::fs::read_to_string(&log_path).unwrap().lines() {
        if line.starts_with("cargo:warning") {
            println!("{line}");
        }
    }
    built.unwrap();
    println!("cargo:rerun-if-changed=build.rs");
}
