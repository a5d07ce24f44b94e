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
        ServerHandle {
            addr,
            wake,
            stop,
            conns,
            threads,
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
}

impl ServerHandle {
    /// Where NFS and MOUNT answer.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
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

/// Serves one connection until it closes or sends something that is not an RPC call.
fn connection(mut s: TcpStream, cx: &Context) -> io::Result<()> {
    let local = s.local_addr()?;
    let mut rec: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    let mut data = vec![0u8; MAX_IO];
    loop {
        let mut used = 0usize;
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
            s.read_exact(&mut rec[used..used + len])?;
            used += len;
            if last {
                break;
            }
        }
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
        write_all_v(&s, &[&out, &data[..n], &pad[..crate::xdr::pad4(n) - n]])?;
    }
}

/// Writes every byte of `parts` with `writev`, one system call when the socket takes it all.
fn write_all_v(s: &TcpStream, parts: &[&[u8]]) -> io::Result<()> {
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
    }
    Ok(())
}
