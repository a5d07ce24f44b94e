//! The one way a test says what it did not test (also included by other crates' tests with
//! `#[path]`, so every skip of the workspace lands in the same file).

/// Prints a skip line on stderr and appends it to `target/tmp/skipped-tests.txt`, so that a
/// run whose output is captured (a passing test's is) still tells what it did not test.
pub fn skip(line: &str) {
    eprintln!("SKIPPED {line}");
    let log = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        use std::io::Write;
        let _ = writeln!(f, "{line}");
    }
}
