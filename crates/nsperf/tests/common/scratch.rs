//! Scratch directories for the `io` tests, on tmpfs or on the disk, removed on drop.

use std::path::{Path, PathBuf};

use super::run;

/// A scratch directory removed on drop, under `base` (tmpfs or disk).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(base: &str, name: &str) -> Scratch {
        let p = Path::new(base).join(format!("nsperf-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
    pub fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".nsperf-"))
            .collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub const TMPFS: &str = "/dev/shm";

pub fn disk_base() -> String {
    // The target directory of cargo is on the disk the tests run from.
    let t = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    std::fs::create_dir_all(&t).unwrap();
    t.to_string_lossy().into_owned()
}

pub fn io_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["io", "run"];
    a.extend_from_slice(args);
    a.push("--json");
    run(&a).ok().json()
}
