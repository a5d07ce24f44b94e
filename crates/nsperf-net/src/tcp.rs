//! TCP bulk data path: one thread per stream, blocking `write(2)` (or `sendfile(2)` from a
//! memory file with `--zerocopy`) on the sender, large `read(2)` on the receiver. Buffers are
//! allocated once per stream; the loops do no allocation.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::meter::StreamMeter;

/// How often a blocked data thread looks at the abort flag.
pub const POLL: Duration = Duration::from_millis(200);

/// Flags one end raises to its data threads.
#[derive(Debug, Default)]
pub struct Control {
    /// Senders stop at the next write and close their side.
    pub stop: AtomicBool,
    /// Everything ends now (peer gone, Ctrl-C).
    pub abort: AtomicBool,
}

impl Control {
    fn halted(&self) -> bool {
        self.abort.load(Ordering::Relaxed) || nsperf_core::signal::interrupted()
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// A memory file of `len` bytes to `sendfile(2)` from.
fn memfd(len: usize) -> io::Result<OwnedFd> {
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

/// Receives on one stream until the sender closes it (or `ctl.abort`).
pub fn receive(meter: &StreamMeter, mut sock: &TcpStream, len: usize, ctl: &Control) {
    let _ = sock.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; receive_buffer_len(len)];
    let mut total = 0u64;
    let err = loop {
        match sock.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                total += n as u64;
                meter.bytes.store(total, Ordering::Relaxed);
            }
            Err(e) if would_block(&e) => {
                if ctl.halted() {
                    break None;
                }
            }
            Err(e) => break Some(e.to_string()),
        }
    };
    meter.finish(err);
}

/// Spawns a data thread with a small stack (hundreds of streams stay cheap).
pub fn spawn(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name)
        .stack_size(256 * 1024)
        .spawn(f)
}
