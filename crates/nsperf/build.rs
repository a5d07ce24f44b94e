//! Records what `nsperf --version` tells besides the version: the commit the binary was
//! built from (when built from a git checkout) and the target it was built for.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])
        .map(|c| format!("commit {c}"))
        .unwrap_or_else(|| "commit unknown".to_string());
    println!("cargo:rustc-env=NSPERF_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown target".into());
    println!("cargo:rustc-env=NSPERF_TARGET={target}");
    // Rebuild when HEAD moves (the files git reads for it), not on every build.
    if let Some(p) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={p}");
    }
    if let Some(p) = git(&["rev-parse", "--git-path", "packed-refs"])
        && PathBuf::from(&p).exists()
    {
        println!("cargo:rerun-if-changed={p}");
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &r])
        && PathBuf::from(&p).exists()
    {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
