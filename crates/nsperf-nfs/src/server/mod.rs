//! A small NFSv3 server over a local directory, for labs (`nsperf lab serve`) and tests:
//! MOUNT v3, NFSv3 and the portmapper (v2 GETPORT, rpcbind GETADDR) answer on one TCP port
//! — and the portmapper also on port 111 when it can bind it — so `nfs://HOST/DIR` works
//! without rpcbind. One thread per connection, calls handled in order.
//!
//! Writes mean what the client asked: `UNSTABLE` is written to the page cache, `DATA_SYNC`
//! and `FILE_SYNC` are synced before the reply, COMMIT syncs the file; the write verifier
//! changes with every server start, so a client can tell unstable data was lost.

mod count;
mod dispatch;
pub mod fs;

use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub use count::{Served, ServedCounters};
pub use dispatch::{Context, MAX_IO, dispatch};
pub use fs::ExportFs;

use crate::proto::{NFS_PROG, NFS_VERS, proc3};
use crate::rpc::{self, RpcError};
use crate::xdr::XdrReader;

/// What to serve and where.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The directory exported.
    pub dir: PathBuf,
    /// Address to listen on (port 0: any free port).
    pub bind: SocketAddr,
    /// Refuse every change (writes answer `NFS3ERR_ROFS`).
    pub read_only: bool,
    /// Also answer the portmapper on port 111 (needs root or CAP_NET_BIND_SERVICE; skipped
    /// quietly when the port cannot be bound).
    pub portmap_111: bool,
}

/// A bound server, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    pmap: Option<TcpListener>,
    cx: Arc<Context>,
}

impl Server {
    /// Binds the listening socket(s) and opens the export.
    pub fn bind(cfg: &ServerConfig) -> io::Result<Server> {
        let instance = nsperf_core::clock::unix_time_ns() ^ ((std::process::id() as u64) << 40);
        let fs = ExportFs::new(&cfg.dir, instance, cfg.read_only)?;
        let listener = TcpListener::bind(cfg.bind)?;
        let port = listener.local_addr()?.port();
        let pmap = if cfg.portmap_111 && port != crate::proto::PMAP_PORT {
            TcpListener::bind(SocketAddr::new(cfg.bind.ip(), crate::proto::PMAP_PORT)).ok()
        } else {
            None
        };
        let export = fs.root().to_string_lossy().into_owned();
        Ok(Server {
            listener,
            pmap,
            cx: Arc::new(Context {
                fs,
                export,
                port,
                verifier: instance,
                served: Arc::default(),
            }),
        })
    }

    /// Where NFS and MOUNT answer.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], self.cx.port)))
    }

    /// The export's path (what MOUNT accepts).
    pub fn export(&self) -> &str {
        &self.cx.export
    }

    /// Its own count of what it served, updated while it serves.
    pub fn served(&self) -> Arc<ServedCounters> {
        self.cx.served.clone()
    }

    /// True when the portmapper also answers on port 111.
    pub fn has_portmap_111(&self) -> bool {
        self.pmap.is_some()
    }

    /// Serves in background threads until the returned handle is stopped or dropped.
    pub fn spawn(self) -> ServerHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let addr = self.local_addr();
        let mut wake = vec![addr];
        let mut threads = Vec::new();
        let listeners: Vec<TcpListener> = std::iter::once(self.listener).chain(self.pmap).collect();
        for l in listeners {
            if let Ok(a) = l.local_addr() {
                if a != addr {
                    wake.push(a);
                }
            }
            let (stop, conns, cx) = (stop.clone(), conns.clone(), self.cx.clone());
            threads.push(std::thread::spawn(move || accept_loop(l, cx, stop, conns)));
        }
        // Housekeeping: files removed behind the server's back are closed within 200 ms.
        let (stop_h, cx) = (stop.clone(), self.cx.clone());
        threads.push(std::thread::spawn(move || {
            while !stop_h.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(200));
                cx.fs.release_unlinked();
            }
        }));
        ServerHandle {
            addr,
            wake,
            stop,
            conns,
            threads,
            served: self.cx.served.clone(),
        }
    }

    /// Serves forever in this thread (and one thread per connection).
    pub fn serve(self) -> io::Result<()> {
        let mut h = self.spawn();
        for t in std::mem::take(&mut h.threads) {
            let _ = t.join();
        }
        Ok(())
    }
}

/// A running server; stops (closing every connection, as a crash would) when dropped.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    wake: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    served: Arc<ServedCounters>,
}

impl ServerHandle {
    /// Where NFS and MOUNT answer.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What crossed the wire by the server's own count: the WRITE data that arrived, and
    /// the READ data its sockets took less what they still hold unacknowledged (sent into a
    /// send queue is not received: through a 50 ms path, 20 clients' queued replies made the
    /// count of a window 8 % larger than what the clients received in it). The queues'
    /// bytes include the replies' RPC headers (about 120 bytes each), so the READ count is
    /// low by at most that much per reply in flight.
    pub fn served(&self) -> Served {
        let mut v = self.served.snapshot();
        let queued: u64 = match self.conns.lock() {
            Ok(c) => c.iter().map(unacknowledged).sum(),
            Err(_) => 0,
        };
        v.read_bytes = v.read_bytes.saturating_sub(queued);
        v
    }

    /// Stops accepting and resets every open connection.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for a in &self.wake {
            let _ = TcpStream::connect(a);
        }
        if let Ok(mut c) = self.conns.lock() {
            for s in c.drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Bytes in `s`'s send queue not yet acknowledged by the peer (`SIOCOUTQ`); 0 when the
/// kernel does not say.
fn unacknowledged(s: &TcpStream) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int through the pointer.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc == 0 { n.max(0) as u64 } else { 0 }
}

fn accept_loop(
    l: TcpListener,
    cx: Arc<Context>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
) {
    for s in l.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(s) = s else { continue };
        let _ = s.set_nodelay(true);
        // A clone of each open connection, for `stop` to reset; removed when the connection
        // ends, or its descriptor would keep the socket open (CLOSE-WAIT) for the server's
        // whole life. The clone's descriptor is its key: unique while it is held.
        let mut key = None;
        if let (Ok(mut c), Ok(clone)) = (conns.lock(), s.try_clone()) {
            key = Some(clone.as_raw_fd());
            c.push(clone);
        }
        let (cx, conns) = (cx.clone(), conns.clone());
        std::thread::spawn(move || {
            let _ = connection(s, &cx);
            if let (Some(k), Ok(mut c)) = (key, conns.lock()) {
                c.retain(|x| x.as_raw_fd() != k);
            }
        });
    }
}

/// Reads one RPC record (every fragment) into `rec`, counting a WRITE's data in `served` as
/// it arrives; returns the record's length.
fn read_record(s: &mut TcpStream, rec: &mut Vec<u8>, served: &ServedCounters) -> io::Result<usize> {
    let mut used = 0usize;
    let mut write = WriteProgress::default();
    loop {
        let mut mark = [0u8; 4];
        s.read_exact(&mut mark)?;
        let (last, len) = rpc::parse_mark(mark);
        if used + len > rpc::MAX_FRAGMENT {
            return Err(io::Error::from(io::ErrorKind::InvalidData));
        }
        if rec.len() < used + len {
            rec.resize(used + len, 0);
        }
        let end = used + len;
        while used < end {
            match s.read(&mut rec[used..end]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(n) => used += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            write.arrived(&rec[..used], served);
        }
        if last {
            return Ok(used);
        }
    }
}

/// How much of a WRITE call's data has arrived and been counted: the server's count of
/// WRITE data grows as the data crosses the wire, not in one step when the call is whole (a
/// 1 MiB WRITE through a shared port takes a while to arrive; counted whole at its end, the
/// count of a window missed the part of every call still arriving at the window's end).
#[derive(Debug, Default)]
struct WriteProgress {
    /// Where the data begins in the record and its length, once the header was read; `None`
    /// also once the call is known not to be a WRITE.
    data: Option<(usize, usize)>,
    /// The header was looked at for good (a WRITE's data found, or not a WRITE).
    settled: bool,
    /// Data bytes counted so far.
    counted: usize,
}

/// The header of a call, its credentials and a WRITE's fixed arguments fit in this many
/// bytes (two 400-byte auth bodies, a 64-byte handle): past it, a call still not parsed is
/// not a WRITE this can read.
const WRITE_HEADER_MAX: usize = 1024;

impl WriteProgress {
    fn arrived(&mut self, rec: &[u8], served: &ServedCounters) {
        if !self.settled {
            match write_data_at(rec) {
                Some(d) => (self.data, self.settled) = (d, true),
                None if rec.len() >= WRITE_HEADER_MAX => self.settled = true,
                None => return,
            }
        }
        if let Some((at, len)) = self.data {
            let now = rec.len().saturating_sub(at).min(len);
            if now > self.counted {
                served.write(now - self.counted);
                self.counted = now;
            }
        }
    }
}

/// Where the data of an NFSv3 WRITE call begins in `rec` (a record's first bytes) and how
/// long it is: `Some(None)` for any other call, `None` while the header is incomplete.
fn write_data_at(rec: &[u8]) -> Option<Option<(usize, usize)>> {
    let mut r = XdrReader::new(rec);
    let h = rpc::parse_call(&mut r).ok()?;
    if (h.prog, h.vers, h.proc_) != (NFS_PROG, NFS_VERS, proc3::WRITE) {
        return Some(None);
    }
    crate::proto::FileHandle::decode(&mut r).ok()?;
    let (_offset, _count, _stable) = (r.u64().ok()?, r.u32().ok()?, r.u32().ok()?);
    let len = r.u32().ok()? as usize;
    Some(Some((r.position(), len.min(MAX_IO))))
}

/// Serves one connection until it closes or sends something that is not an RPC call.
fn connection(mut s: TcpStream, cx: &Context) -> io::Result<()> {
    let local = s.local_addr()?;
    let mut rec: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    let mut data = vec![0u8; MAX_IO];
    loop {
        let used = read_record(&mut s, &mut rec, &cx.served)?;
        out.clear();
        let mut r = XdrReader::new(&rec[..used]);
        let n = match rpc::parse_call(&mut r) {
            Ok(h) => dispatch(cx, local, &h, &mut r, &mut out, &mut data),
            Err(RpcError::Denied(_)) if used >= 4 => {
                rpc::rpc_mismatch_reply(
                    &mut out,
                    u32::from_be_bytes([rec[0], rec[1], rec[2], rec[3]]),
                );
                0
            }
            Err(_) => return Err(io::Error::from(io::ErrorKind::InvalidData)),
        };
        let pad = [0u8; 3];
        let parts = [&out[..], &data[..n], &pad[..crate::xdr::pad4(n) - n]];
        // A READ's data is counted as the socket takes it.
        let mut counted = 0usize;
        write_all_v(&s, &parts, |sent| {
            let now = sent.saturating_sub(out.len()).min(n);
            cx.served.read(now - counted);
            counted = now;
        })?;
    }
}

/// Writes every byte of `parts` with `writev`, one system call when the socket takes it all;
/// `sent` is told the bytes written so far after each call.
fn write_all_v(s: &TcpStream, parts: &[&[u8]], mut sent: impl FnMut(usize)) -> io::Result<()> {
    let mut skip: usize = 0;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    while skip < total {
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 3];
        let mut k = 0;
        let mut off = skip;
        for p in parts {
            if off >= p.len() {
                off -= p.len();
                continue;
            }
            iov[k] = libc::iovec {
                iov_base: p[off..].as_ptr() as *mut libc::c_void,
                iov_len: p.len() - off,
            };
            off = 0;
            k += 1;
            if k == iov.len() {
                break;
            }
        }
        // SAFETY: the iovecs point into `parts`, alive for the call.
        let n = unsafe { libc::writev(s.as_raw_fd(), iov.as_ptr(), k as i32) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        skip += n as usize;
        sent(skip);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::FileHandle;
    use crate::rpc::AuthSys;
    use crate::xdr::{put_u32, put_u64};

    /// A WRITE call of `len` bytes as a record (its mark left out), and where its data begins.
    fn write_call(len: usize) -> (Vec<u8>, usize) {
        let mut b = Vec::new();
        rpc::begin_call(
            &mut b,
            7,
            NFS_PROG,
            NFS_VERS,
            proc3::WRITE,
            &AuthSys::current(),
        );
        FileHandle::new(&[1; 32]).unwrap().encode(&mut b);
        put_u64(&mut b, 0);
        put_u32(&mut b, len as u32);
        put_u32(&mut b, 0);
        put_u32(&mut b, len as u32);
        let at = b.len() - 4;
        b.resize(b.len() + len, 9);
        (b.split_off(4), at)
    }

    #[test]
    fn a_writes_data_is_counted_as_it_arrives() {
        let (rec, at) = write_call(1 << 20);
        let served = ServedCounters::default();
        let mut w = WriteProgress::default();
        // The header in pieces: nothing yet.
        for n in [3, 20, at - 1] {
            w.arrived(&rec[..n], &served);
            assert_eq!(served.snapshot().write_bytes, 0, "{n}");
        }
        w.arrived(&rec[..at + 1000], &served);
        assert_eq!(served.snapshot().write_bytes, 1000);
        w.arrived(&rec[..at + 300_000], &served);
        assert_eq!(served.snapshot().write_bytes, 300_000);
        w.arrived(&rec, &served);
        w.arrived(&rec, &served);
        assert_eq!(served.snapshot().write_bytes, 1 << 20);
    }

    #[test]
    fn other_calls_count_no_data() {
        let mut b = Vec::new();
        rpc::begin_call(
            &mut b,
            7,
            NFS_PROG,
            NFS_VERS,
            proc3::READ,
            &AuthSys::current(),
        );
        FileHandle::new(&[1; 32]).unwrap().encode(&mut b);
        put_u64(&mut b, 0);
        put_u32(&mut b, 1 << 20);
        let served = ServedCounters::default();
        let mut w = WriteProgress::default();
        w.arrived(&b[4..], &served);
        assert!(w.settled && w.data.is_none());
        // Garbage is given up on after the longest header.
        let mut g = WriteProgress::default();
        g.arrived(&[0xff; WRITE_HEADER_MAX], &served);
        assert!(g.settled);
        assert_eq!(served.snapshot().write_bytes, 0);
    }
}
