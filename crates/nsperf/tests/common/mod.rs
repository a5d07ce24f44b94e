//! A tiny harness for integration tests that run the real `nsperf` binary (the ripgrep way):
//! build a command, run it with a time limit, and read its stdout, stderr and exit code.
//! Tests that need root call [`require_root`] and skip with a printed reason otherwise.
#![allow(dead_code)]

pub mod fleet;
pub mod lab;
pub mod procs;
pub mod scratch;
pub mod servers;
mod skip;

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Path of the `nsperf` binary built for these tests.
pub fn nsperf_bin() -> &'static str {
    env!("CARGO_BIN_EXE_nsperf")
}

/// A `Command` for `nsperf` with these arguments.
pub fn nsperf<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut c = Command::new(nsperf_bin());
    c.args(args);
    c
}

/// What a finished command printed and returned.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics with the full output unless the command exited 0.
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code,
            Some(0),
            "command failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// The stdout parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Runs a command to completion, killing it after `limit` (then the test fails).
pub fn run_with_limit(mut cmd: Command, limit: Duration) -> Run {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn nsperf");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let o = String::from_utf8_lossy(&to.join().unwrap()).into_owned();
            let e = String::from_utf8_lossy(&te.join().unwrap()).into_owned();
            panic!("command ran past {limit:?} and was killed\nstdout:\n{o}\nstderr:\n{e}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&to.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&te.join().unwrap()).into_owned(),
    }
}

/// Runs `nsperf ARGS` with a 120 s limit.
pub fn run(args: &[&str]) -> Run {
    run_with_limit(nsperf(args), Duration::from_secs(120))
}

/// A child process that is killed when dropped (a server under test, say), so a failing
/// test leaves nothing running.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// True when running as root. Tests that need root return early after printing why.
/// The median of `v` (sorted in place; the upper one of an even count).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

pub use skip::skip;

/// Returns false (and prints why) when not root: `if !require_root("veth test") { return; }`.
pub fn require_root(what: &str) -> bool {
    if is_root() {
        true
    } else {
        skip(&format!(
            "{what}: needs root (network namespaces / cache control)"
        ));
        false
    }
}

/// True when the kernel offers TUN devices (the lab's emulated link); otherwise prints a
/// skip line.
pub fn require_tun(what: &str) -> bool {
    let ok = std::path::Path::new("/dev/net/tun").exists();
    if !ok {
        skip(&format!("{what}: /dev/net/tun is missing (no TUN support)"));
    }
    ok
}

/// True when a lab can be built here: root, `ip` and TUN; otherwise prints a skip line.
pub fn require_lab(what: &str) -> bool {
    require_root(what) && require_program("ip", what) && require_tun(what)
}

/// True when `prog` is on PATH; otherwise prints a skip line.
pub fn require_program(prog: &str, what: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false);
    if !found {
        skip(&format!("{what}: `{prog}` is not installed"));
    }
    found
}

/// The port in an `nsperf server` log's "listening on ADDR" line.
pub fn listening_port(log: &str) -> Option<u16> {
    let rest = log.split("listening on ").nth(1)?;
    let addr = rest.split_whitespace().next()?;
    addr.parse::<std::net::SocketAddr>().ok().map(|a| a.port())
}

/// Waits (at most 10 s) until `child` has written its "listening on ADDR" line to `log`,
/// and returns that port. Panics with the log when the child exits first.
pub fn wait_listening_in(child: &mut KillOnDrop, log: &std::path::Path) -> u16 {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(port) = listening_port(&text) {
            return port;
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("server exited ({status}) before listening:\n{text}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "server did not start:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `nsperf server -p 0 ARGS` with its stderr (the log) in `log`. The kernel picks the port and
/// the server's log names it, so two tests can never race for one port (a free port probed
/// and released first can be taken by another test's server before this one binds it).
pub fn spawn_server(args: &[&str], log: &std::path::Path) -> (KillOnDrop, u16) {
    let mut child = KillOnDrop(
        nsperf(["server", "-p", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("server log"))
            .spawn()
            .expect("spawn server"),
    );
    let port = wait_listening_in(&mut child, log);
    (child, port)
}

/// [`spawn_server`] with its log in a temporary file that is gone once the server listens.
pub fn spawn_server_quiet(args: &[&str]) -> (KillOnDrop, u16) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = std::env::temp_dir().join(format!("nsperf-srv-{}-{n}.log", std::process::id()));
    let r = spawn_server(args, &log);
    let _ = std::fs::remove_file(&log);
    r
}
