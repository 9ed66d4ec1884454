//! scx_gmp-user's command line on the host (no sched_ext needed). Being an
//! integration test, it also makes `cargo test` build the binary, which the
//! user-mode VM tests run (as `scx_gmp --mode user` does, from beside
//! scx_gmp).

use std::process::Command;

fn user(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_scx_gmp-user"))
        .args(args)
        .output()
        .expect("cannot run scx_gmp-user");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_names_the_mode_and_every_policy_knob() {
    let (code, out, _) = user(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("scx_gmp-user: the Go runtime's G-M-P policy applied from user space"),
        "{out}"
    );
    for knob in [
        "--slice-us",
        "--lrq-cap",
        "--global-every",
        "--steal-tries",
        "--stats",
        "--exit-dump-len",
    ] {
        assert!(out.contains(knob), "--help lacks {knob}");
    }
    assert!(
        !out.contains("--debug-stall-comm"),
        "a testing option is shown"
    );
}

#[test]
fn it_refuses_what_only_scx_gmp_takes() {
    for args in [&["--mode", "user"][..], &["--monitor", "1"], &["sim"]] {
        let (code, _, err) = user(args);
        assert_eq!(code, 2, "{args:?} accepted: {err}");
    }
}

#[test]
fn without_sched_ext_it_says_so_in_one_line() {
    if std::path::Path::new("/sys/kernel/sched_ext").exists() {
        return; // this host has sched_ext: the VM tests cover loading
    }
    let (code, _, err) = user(&[]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("scx_gmp: error: this kernel has no sched_ext"),
        "{err}"
    );
}
