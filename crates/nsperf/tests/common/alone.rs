//! A test that must be alone in its process: it measures the process (its resident memory,
//! its descriptors, its heap through a counting allocator). The tests of one binary share a
//! process and run at once, so such a test runs its body in a child: this same test binary
//! re-executed for that one test. Included with `#[path]` by the crates whose tests need it.

/// The variable that tells the re-executed binary to run the body.
const VAR: &str = "NSPERF_TEST_ALONE";

/// The name libtest knows a test by (for `--exact`): `module_path!()` of the test's module
/// without the crate, then the function's name.
pub fn test_name(module_path: &str, function: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{function}"),
        None => function.to_string(),
    }
}

/// Runs `body` alone in a process: in the child, the test binary re-executed for exactly the
/// test `name` ([`test_name`]) with one thread; the parent prints the child's output and
/// fails unless that one test ran and passed.
pub fn alone(name: &str, body: impl FnOnce()) {
    if std::env::var_os(VAR).is_some_and(|v| v == name) {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(VAR, name)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("re-run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name}, alone in a process: {}\n{stdout}\n{stderr}",
        out.status
    );
}
