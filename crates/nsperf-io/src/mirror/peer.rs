//! The receiving side of the mirror (`nsperf io peer DIR`): one thread per connection, each
//! writing one job's copy of its file in `DIR`. Frames are handled in order, so acks leave in
//! the order of the writes: protocols A and B ack a write once its data is in (before it is
//! written), C once it is written, with the time the write took. A flush is an fsync of the
//! copy; a check answers its CRC-32. The copy goes when its writer closes the connection,
//! unless the peer keeps them (`--keep`). Every hello and frame is checked: a bad one ends that
//! connection with a logged line, never the peer.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Protocol;
use super::wire::{Ack, AckKind, Frame, FrameKind, HELLO_LEN, Hello, MSG_LEN};

/// Bytes read per step of a check.
const CHECK_CHUNK: usize = 1 << 20;
/// How often a waiting peer looks at the stop flag (SIGINT, SIGTERM), ms.
const POLL_MS: u16 = 200;

fn stopped() -> bool {
    nsperf_core::signal::interrupted()
}

/// Waits until `l` has a connection to accept or `ms` have passed.
fn wait_readable(l: &TcpListener, ms: u16) {
    let mut p = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(l),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of a descriptor we own.
    unsafe { libc::poll(&mut p, 1, i32::from(ms)) };
}

/// `read_exact` that looks at the stop flag while nothing arrives (the socket has a read
/// timeout): `UnexpectedEof` at a clean end before any byte, `Interrupted` when stopped.
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if stopped() {
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        "stopped by a signal",
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Serves mirror connections on `listener`, each writing into `dir`, until `connections` of
/// them have ended (`None`: for ever). A copy is removed when its writer closes the
/// connection, unless `keep`. `log` gets one line per connection and per failure.
pub fn serve(
    listener: TcpListener,
    dir: &Path,
    connections: Option<u64>,
    keep: bool,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) -> io::Result<()> {
    let mut accepted = 0u64;
    let mut threads = Vec::new();
    listener.set_nonblocking(true)?;
    while connections.is_none_or(|n| accepted < n) {
        let (stream, from) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stopped() {
                    break;
                }
                wait_readable(&listener, POLL_MS);
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_millis(POLL_MS.into())))?;
        accepted += 1;
        let (dir, log) = (dir.to_path_buf(), Arc::clone(&log));
        let t = std::thread::spawn(move || match session(stream, &dir, keep) {
            Ok(s) => log(&format!(
                "{from}: {} writes, {} bytes into {}",
                s.writes,
                s.bytes,
                s.path.display()
            )),
            Err(e) => log(&format!("{from}: {e}")),
        });
        // Served for ever: the threads are left to end on their own.
        if connections.is_some() {
            threads.push(t);
        }
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// What one connection did.
#[derive(Debug)]
struct Served {
    path: PathBuf,
    writes: u64,
    bytes: u64,
}

fn ack(s: &mut TcpStream, kind: AckKind, status: i32, seq: u64, value: u64) -> io::Result<()> {
    s.write_all(
        &Ack {
            kind,
            status,
            seq,
            value,
        }
        .encode(),
    )
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn bad(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// One connection: the hello, then frames until the writer closes.
fn session(mut s: TcpStream, dir: &Path, keep: bool) -> io::Result<Served> {
    s.set_nodelay(true)?;
    let mut head = [0u8; HELLO_LEN];
    read_full(&mut s, &mut head)?;
    let (protocol, file_len, block_max, n) = match Hello::decode_head(&head) {
        Ok(h) => h,
        Err(e) => {
            let _ = ack(&mut s, AckKind::Hello, libc::EPROTO, 0, 0);
            return Err(bad(e));
        }
    };
    let mut name = vec![0u8; n];
    read_full(&mut s, &mut name)?;
    let name = match Hello::decode_name(&name) {
        Ok(n) => n,
        Err(e) => {
            let _ = ack(&mut s, AckKind::Hello, libc::EINVAL, 0, 0);
            return Err(bad(e));
        }
    };
    let path = dir.join(&name);
    let file = match open_copy(&path, file_len) {
        Ok(f) => f,
        Err(e) => {
            let _ = ack(&mut s, AckKind::Hello, errno(&e), 0, 0);
            return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display())));
        }
    };
    ack(&mut s, AckKind::Hello, 0, 0, 0)?;
    let mut served = Served {
        path,
        writes: 0,
        bytes: 0,
    };
    let r = frames(&mut s, &file, protocol, block_max, &mut served);
    if !keep {
        // Another job's connection may still write its region of a shared file: its open
        // descriptor keeps the data until it closes.
        let _ = std::fs::remove_file(&served.path);
    }
    r.map(|()| served)
}

/// The frames of one connection until the writer closes it (Ok) or something fails.
fn frames(
    s: &mut TcpStream,
    file: &File,
    protocol: Protocol,
    block_max: u32,
    served: &mut Served,
) -> io::Result<()> {
    let mut buf = vec![0u8; (block_max as usize).max(CHECK_CHUNK)];
    let mut fh = [0u8; MSG_LEN];
    loop {
        match read_full(s, &mut fh) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let f = Frame::decode(&fh).map_err(bad)?;
        match f.kind {
            FrameKind::Write => {
                if f.len > block_max {
                    return Err(bad(format!(
                        "a write of {} bytes, more than the {block_max} announced",
                        f.len
                    )));
                }
                let data = &mut buf[..f.len as usize];
                read_full(s, data)?;
                if protocol != Protocol::C {
                    ack(s, AckKind::Received, 0, f.seq, 0)?;
                }
                let t = Instant::now();
                let r = file.write_all_at(data, f.offset);
                let ns = t.elapsed().as_nanos() as u64;
                match r {
                    Ok(()) if protocol == Protocol::C => ack(s, AckKind::Written, 0, f.seq, ns)?,
                    Ok(()) => {}
                    Err(e) => {
                        ack(s, AckKind::Written, errno(&e), f.seq, ns)?;
                        return Err(e);
                    }
                }
                served.writes += 1;
                served.bytes += u64::from(f.len);
            }
            FrameKind::Flush => {
                let t = Instant::now();
                let r = file.sync_all();
                let ns = t.elapsed().as_nanos() as u64;
                ack(
                    s,
                    AckKind::Flushed,
                    r.as_ref().err().map_or(0, errno),
                    f.seq,
                    ns,
                )?;
                r?;
            }
            FrameKind::Check => {
                let (st, v) = match crc_of(file, f.offset, &mut buf[..CHECK_CHUNK]) {
                    Ok(c) => (0, u64::from(c)),
                    Err(ref e) => (errno(e), 0),
                };
                ack(s, AckKind::Checked, st, f.seq, v)?;
            }
        }
    }
}

/// The copy: created when missing, at least `len` bytes long.
fn open_copy(path: &Path, len: u64) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if f.metadata()?.len() < len {
        f.set_len(len)?;
    }
    Ok(f)
}

/// CRC-32 of the first `len` bytes of `f` (short files read as if zero-filled to `len`).
pub(crate) fn crc_of(f: &File, len: u64, buf: &mut [u8]) -> io::Result<u32> {
    let mut h = crc32fast::Hasher::new();
    let mut off = 0u64;
    while off < len {
        let want = (len - off).min(buf.len() as u64) as usize;
        let n = f.read_at(&mut buf[..want], off)?;
        if n == 0 {
            buf[..want].fill(0);
            h.update(&buf[..want]);
            off += want as u64;
            continue;
        }
        h.update(&buf[..n]);
        off += n as u64;
    }
    Ok(h.finalize())
}
