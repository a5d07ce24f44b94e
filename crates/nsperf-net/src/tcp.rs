//! TCP bulk data path of one stream on its own thread (see `bulk` for many): blocking `write(2)` (or `sendfile(2)` from a
//! memory file with `--zerocopy`) on the sender, large `read(2)` on the receiver. Buffers are
//! allocated once per stream; the loops do no allocation.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::meter::StreamMeter;

/// How often a blocked data thread looks at the abort flag.
pub const POLL: Duration = Duration::from_millis(200);

/// Flags one end raises to its data threads (the end's control loop turns Ctrl-C into
/// them, so an in-process server keeps serving its client's stop), and where they run.
#[derive(Debug, Default)]
pub struct Control {
    /// Senders stop at the next write and close their side.
    pub stop: AtomicBool,
    /// Everything ends now (peer gone, Ctrl-C).
    pub abort: AtomicBool,
    /// The CPU every data thread of this end is pinned to (`-A`), `None` = anywhere.
    pub cpu: Option<u32>,
}

impl Control {
    /// Flags for data threads pinned to `cpu` (`-A`), or free to run anywhere.
    pub fn on_cpu(cpu: Option<u32>) -> Control {
        Control {
            cpu,
            ..Control::default()
        }
    }

    fn halted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// A memory file of `len` bytes to `sendfile(2)` from.
pub(crate) fn memfd(len: usize) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and no flags that need anything.
    let fd = unsafe { libc::memfd_create(c"nsperf-zerocopy".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(fd);
    let chunk = vec![0x5au8; len.min(1 << 20)];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len());
        f.write_all(&chunk[..n])?;
        left -= n;
    }
    Ok(OwnedFd::from(f))
}

/// Sends on one stream until `ctl.stop`, or `quota` bytes when non-zero; then closes the
/// write side so the receiver sees the end.
pub fn send(
    meter: &StreamMeter,
    sock: &TcpStream,
    len: usize,
    quota: u64,
    zerocopy: bool,
    ctl: &Control,
) {
    let _ = sock.set_write_timeout(Some(POLL));
    let result = if zerocopy {
        send_file(meter, sock, len, quota, ctl)
    } else {
        send_write(meter, sock, len, quota, ctl)
    };
    let _ = sock.shutdown(Shutdown::Write);
    meter.finish(result.err().map(|e| e.to_string()));
}

fn send_write(
    meter: &StreamMeter,
    mut sock: &TcpStream,
    len: usize,
    quota: u64,
    ctl: &Control,
) -> io::Result<()> {
    let buf = vec![0x5au8; len];
    let mut total = 0u64;
    loop {
        if ctl.stop.load(Ordering::Relaxed) || ctl.halted() {
            return Ok(());
        }
        let want = if quota > 0 {
            let left = quota - total;
            if left == 0 {
                return Ok(());
            }
            (left as usize).min(len)
        } else {
            len
        };
        match sock.write(&buf[..want]) {
            Ok(n) => {
                total += n as u64;
                meter.bytes.store(total, Ordering::Relaxed);
            }
            Err(e) if would_block(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

fn send_file(
    meter: &StreamMeter,
    sock: &TcpStream,
    len: usize,
    quota: u64,
    ctl: &Control,
) -> io::Result<()> {
    let file = memfd(len)?;
    let mut total = 0u64;
    let mut off: libc::off_t = 0;
    loop {
        if ctl.stop.load(Ordering::Relaxed) || ctl.halted() {
            return Ok(());
        }
        let mut want = len - off as usize;
        if quota > 0 {
            let left = quota - total;
            if left == 0 {
                return Ok(());
            }
            want = want.min(left as usize);
        }
        // SAFETY: both descriptors are open for the call; `off` is a valid offset pointer.
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, want) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if would_block(&e) {
                continue;
            }
            return Err(e);
        }
        total += n as u64;
        if off as usize >= len {
            off = 0;
        }
        meter.bytes.store(total, Ordering::Relaxed);
    }
}

/// Size of the receiver's reads: large, whatever the sender's message size, so the receiver
/// is not the bottleneck with small messages (as netperf does).
pub fn receive_buffer_len(len: usize) -> usize {
    len.clamp(256 * 1024, 4 << 20)
}

/// How long the receiver lets data pile up before it wants to be woken: the low-water mark
/// is the bytes that arrive in this time at the measured rate.
const WAKE_EVERY: Duration = Duration::from_millis(1);
/// How often the receiver re-measures its rate and moves the low-water mark.
const RETUNE: Duration = Duration::from_millis(50);

/// The highest low-water mark for a test with `streams` streams each way. One fast stream
/// gains most from rare wake-ups (measured on loopback in two side-by-side runs: 1 KiB
/// messages +8-15 %, 128 KiB +5-15 %, sendfile 1.9-2.3×). With several streams the
/// receivers already share the cores with the senders and are woken late by the scheduler;
/// a large mark there only lets data go cold in the queue (2, 4 and 8 streams lost about 14 %
/// with 256 KiB, nothing with 16 KiB; docs/performance.md).
pub(crate) fn mark_cap(streams: u32, read_len: usize) -> usize {
    let cap = if streams <= 1 { 256 * 1024 } else { 16 * 1024 };
    cap.min(read_len)
}

/// Moves `SO_RCVLOWAT` so the receiver is woken about once per [`WAKE_EVERY`] of data instead
/// of once per arriving segment: on a fast link every wake-up is work done on the sending
/// core (loopback) or in the receiving softirq, and a reader that copies 1 ms of data at once
/// costs a fraction of one that copies each segment. The mark stays below a quarter of the
/// granted receive buffer, so the kernel never grows the buffer or clamps the window for it
/// (`tcp_set_rcvlowat` does both when the mark nears the buffer), and every read returns
/// within [`POLL`] whatever the mark (`recv` returns what it has when the timeout fires).
pub(crate) struct LowWater {
    fd: RawFd,
    cap: usize,
    mark: usize,
    since: Instant,
    bytes: u64,
}

impl LowWater {
    pub(crate) fn new(fd: RawFd, cap: usize) -> LowWater {
        LowWater {
            fd,
            cap,
            mark: 1,
            since: Instant::now(),
            bytes: 0,
        }
    }

    /// The mark for `rate` bytes/s with a receive buffer of `rcvbuf` bytes.
    fn mark_for(rate: f64, rcvbuf: usize, cap: usize) -> usize {
        let want = (rate * WAKE_EVERY.as_secs_f64()) as usize;
        want.min(rcvbuf / 4).min(cap).max(1)
    }

    /// Counts `n` bytes read; re-measures every [`RETUNE`].
    pub(crate) fn read(&mut self, n: usize) {
        self.bytes += n as u64;
        let dt = self.since.elapsed();
        if dt < RETUNE {
            return;
        }
        let rcvbuf = crate::sock::get_int(self.fd, libc::SOL_SOCKET, libc::SO_RCVBUF)
            .map_or(0, |v| v.max(0) as usize);
        let mark = Self::mark_for(self.bytes as f64 / dt.as_secs_f64(), rcvbuf, self.cap);
        // Only move for a real change: a setsockopt per retune at most, usually none.
        if mark.abs_diff(self.mark) * 4 > self.mark
            && crate::sock::set_int(self.fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, mark as i32)
                .is_ok()
        {
            self.mark = mark;
        }
        self.since = Instant::now();
        self.bytes = 0;
    }
}

/// Receives on one of `streams` streams until the sender closes it (or `ctl.abort`).
pub fn receive(meter: &StreamMeter, mut sock: &TcpStream, len: usize, streams: u32, ctl: &Control) {
    let _ = sock.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; receive_buffer_len(len)];
    let mut low = LowWater::new(sock.as_raw_fd(), mark_cap(streams, buf.len()));
    let mut total = 0u64;
    let err = loop {
        match sock.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                total += n as u64;
                meter.bytes.store(total, Ordering::Relaxed);
                low.read(n);
            }
            Err(e) if would_block(&e) => {
                low.read(0);
                if ctl.halted() {
                    break None;
                }
            }
            Err(e) => break Some(e.to_string()),
        }
    };
    meter.finish(err);
}

/// Spawns a data thread with a small stack (hundreds of streams stay cheap), pinned to `cpu`
/// when given (`-A`): the spawner pins it (`pthread_setaffinity_np`), so a CPU the thread may
/// not use is an error here, never a thread silently running elsewhere.
pub fn spawn<T: Send + 'static>(
    name: String,
    cpu: Option<u32>,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<std::thread::JoinHandle<T>> {
    let h = std::thread::Builder::new()
        .name(name)
        .stack_size(256 * 1024)
        .spawn(f)?;
    if let Some(cpu) = cpu {
        use std::os::unix::thread::JoinHandleExt;
        let set = cpu_set(cpu)?;
        // SAFETY: the thread is alive (joined only by the caller, later), `set` is a valid
        // cpu_set_t of the size passed.
        // std's raw pthread is an integer; libc's `pthread_t` is one on glibc and a pointer
        // on musl (the static builds).
        #[allow(clippy::unnecessary_cast)]
        let thread = h.as_pthread_t() as libc::pthread_t;
        let rc = unsafe {
            libc::pthread_setaffinity_np(thread, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        // ESRCH: the thread already ended (a stream that failed at once): nothing to pin.
        if rc != 0 && rc != libc::ESRCH {
            return Err(io::Error::other(format!(
                "cannot pin a data thread to CPU {cpu}: {}",
                io::Error::from_raw_os_error(rc)
            )));
        }
    }
    Ok(h)
}

fn cpu_set(cpu: u32) -> io::Result<libc::cpu_set_t> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::other(format!("CPU {cpu} is out of range")));
    }
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    Ok(set)
}

/// The CPUs this process may run on (`sched_getaffinity`), in order.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain bits; the kernel fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; `set` is valid for the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as u32)
        // SAFETY: every index is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect()
}

/// Checks that this host lets the process run on `cpu` (`-A`); the message names the CPUs
/// it may use. `end` says whose CPU it is (`client`, `server`).
pub fn check_cpu(cpu: u32, end: &str) -> Result<(), String> {
    let allowed = allowed_cpus();
    if allowed.contains(&cpu) {
        return Ok(());
    }
    Err(format!(
        "-A: CPU {cpu} is not available on the {end} (it may use {})",
        cpu_list(&allowed)
    ))
}

/// `0-3,6` for a sorted CPU list.
fn cpu_list(cpus: &[u32]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_threads_run_where_asked_and_bad_cpus_are_named() {
        let allowed = allowed_cpus();
        let cpu = *allowed.last().expect("this process runs somewhere");
        let h = spawn("pin-test".into(), Some(cpu), move || {
            // The spawner pins after the start: wait until it shows.
            let t0 = Instant::now();
            loop {
                let now = allowed_cpus();
                if now == [cpu] || t0.elapsed() > Duration::from_secs(5) {
                    return now;
                }
                std::thread::yield_now();
            }
        })
        .unwrap();
        assert_eq!(h.join().unwrap(), [cpu]);
        let bad = (0..1024).find(|c| !allowed.contains(c)).unwrap();
        assert!(
            check_cpu(bad, "client")
                .unwrap_err()
                .contains(&format!("CPU {bad} is not"))
        );
        assert!(spawn("pin-bad".into(), Some(bad), || ()).is_err());
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(cpu_list(&[1]), "1");
    }

    #[test]
    fn low_water_mark_follows_rate_and_stays_under_the_buffer() {
        // 10 Mbit/s: 1 ms is 1250 bytes.
        assert_eq!(LowWater::mark_for(1.25e6, 131_072, 256 << 10), 1250);
        // 50 Gbit/s would want 6.25 MB: a quarter of the buffer at most, and the read size.
        assert_eq!(LowWater::mark_for(6.25e9, 131_072, 256 << 10), 32_768);
        assert_eq!(LowWater::mark_for(6.25e9, 64 << 20, 256 << 10), 256 << 10);
        // Idle or unknown buffer: wake on every byte, as by default.
        assert_eq!(LowWater::mark_for(0.0, 131_072, 256 << 10), 1);
        assert_eq!(LowWater::mark_for(1e9, 0, 256 << 10), 1);
        assert_eq!(mark_cap(1, 256 << 10), 256 << 10);
        assert_eq!(mark_cap(4, 256 << 10), 16 << 10);
        assert_eq!(mark_cap(1, 8 << 10), 8 << 10);
    }
}
