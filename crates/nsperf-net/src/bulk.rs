//! TCP bulk streams on a bounded set of threads, so `-P 1024` costs a handful of threads
//! rather than a thousand.
//!
//! Streams are dealt round-robin to at most [`MAX_WORKERS`] threads. A thread that owns one
//! stream runs the blocking loop of [`crate::tcp`] (the kernel sleeps inside `write`/`read`,
//! one syscall per message: the fastest path for few streams); a thread that owns several
//! waits in `epoll` and moves one message per ready stream per turn, level-triggered, so
//! every stream gets its turn. Either way each thread allocates its buffers once — one send
//! buffer and one receive buffer shared by all its streams (the payload is filler and read
//! data is discarded) — and the loops allocate nothing.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use crate::meter::StreamMeter;
use crate::poller::{Interest, Poller};
use crate::tcp::{self, Control, LowWater, POLL};

/// One stream for a worker: its meter (which says whether this end sends) and socket.
#[derive(Debug, Clone)]
pub struct BulkStream {
    /// The stream's counters; `meter.sending` says which way data goes.
    pub meter: Arc<StreamMeter>,
    /// The connection.
    pub sock: Arc<TcpStream>,
    /// Bytes to send, 0 = until stopped (senders only).
    pub quota: u64,
}

/// How every stream of the test moves data.
#[derive(Debug, Clone, Copy)]
pub struct BulkPlan {
    /// Write size.
    pub len: usize,
    /// Send with `sendfile(2)` from a memory file.
    pub zerocopy: bool,
    /// Streams per direction (the receiver's wake-up policy depends on it).
    pub streams: u32,
    /// Pace each sending stream to this many bits per second (`SO_MAX_PACING_RATE`); 0 = no.
    pub pacing_bps: f64,
}

/// Most worker threads per end. Up to this many streams each keep a thread of their own, as
/// before multiplexing: fewer threads measured 0.75× with 16 streams on the loaded 2-CPU
/// test machine (docs/performance.md), where a process's share of the CPUs follows its thread
/// count.
pub const MAX_WORKERS: usize = 16;

/// Starts the workers for `streams`; each stream's meter is finished when its stream ends.
/// `tag` names the threads (`c` client, `s` server).
pub fn spawn(
    streams: Vec<BulkStream>,
    plan: BulkPlan,
    ctl: &Arc<Control>,
    tag: char,
) -> io::Result<Vec<JoinHandle<()>>> {
    if plan.pacing_bps > 0.0 {
        for s in streams.iter().filter(|s| s.meter.sending) {
            crate::sock::set_pacing(s.sock.as_raw_fd(), plan.pacing_bps)?;
        }
    }
    let workers = streams.len().clamp(1, MAX_WORKERS);
    let mut groups: Vec<Vec<BulkStream>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, s) in streams.into_iter().enumerate() {
        groups[i % workers].push(s);
    }
    let mut handles = Vec::with_capacity(workers);
    for (w, group) in groups.into_iter().enumerate() {
        let worker_ctl = ctl.clone();
        let name = format!("{tag}{w}");
        let h = tcp::spawn(name, ctl.cpu, move || {
            match <[BulkStream; 1]>::try_from(group) {
                Ok([one]) => run_one(&one, plan, &worker_ctl),
                Err(group) => run_many(group, plan, &worker_ctl),
            }
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The streams already started end at once; the caller reports the error.
                ctl.abort.store(true, Ordering::Release);
                for h in handles {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    Ok(handles)
}

fn run_one(s: &BulkStream, plan: BulkPlan, ctl: &Control) {
    if s.meter.sending {
        tcp::send(&s.meter, &s.sock, plan.len, s.quota, plan.zerocopy, ctl);
    } else {
        tcp::receive(&s.meter, &s.sock, plan.len, plan.streams, ctl);
    }
}

/// One stream's state in a multiplexing worker.
struct Slot {
    s: BulkStream,
    /// Bytes moved.
    total: u64,
    /// Offset into the memory file (zero copy).
    off: libc::off_t,
    /// The receiver's wake-up policy.
    low: Option<LowWater>,
    live: bool,
}

/// What one turn on a stream did.
enum Turn {
    /// Moved data or would block: keep the stream.
    Keep,
    /// The stream is over (quota sent, end of stream), with an error if it failed.
    End(Option<String>),
}

/// Messages moved per ready stream per turn: enough to amortize the `epoll_wait`, few enough
/// that a thousand streams take turns within milliseconds.
const PER_TURN: usize = 4;

fn run_many(group: Vec<BulkStream>, plan: BulkPlan, ctl: &Control) {
    if let Err(e) = mux(&group, plan, ctl) {
        // Could not set the worker up: every stream fails with the reason.
        for s in &group {
            if !s.meter.done.load(Ordering::Acquire) {
                if s.meter.sending {
                    let _ = s.sock.shutdown(Shutdown::Write);
                }
                s.meter.finish(Some(e.to_string()));
            }
        }
    }
}

fn mux(group: &[BulkStream], plan: BulkPlan, ctl: &Control) -> io::Result<()> {
    let any_send = group.iter().any(|s| s.meter.sending);
    let any_recv = group.iter().any(|s| !s.meter.sending);
    let wbuf = if any_send && !plan.zerocopy {
        vec![0x5au8; plan.len]
    } else {
        Vec::new()
    };
    let mut rbuf = if any_recv {
        vec![0u8; tcp::receive_buffer_len(plan.len)]
    } else {
        Vec::new()
    };
    let file: Option<OwnedFd> = if any_send && plan.zerocopy {
        Some(tcp::memfd(plan.len)?)
    } else {
        None
    };
    let mut poller = Poller::new(64)?;
    let mut slots = Vec::with_capacity(group.len());
    for (i, s) in group.iter().enumerate() {
        s.sock.set_nonblocking(true)?;
        let interest = if s.meter.sending {
            Interest::Write
        } else {
            Interest::Read
        };
        poller.add(s.sock.as_raw_fd(), interest, i as u64)?;
        slots.push(Slot {
            s: s.clone(),
            total: 0,
            off: 0,
            low: (!s.meter.sending).then(|| {
                LowWater::new(s.sock.as_raw_fd(), tcp::mark_cap(plan.streams, rbuf.len()))
            }),
            live: true,
        });
    }
    let mut live = slots.len();
    let mut ready = Vec::with_capacity(64);
    let mut stopped = false;
    while live > 0 {
        let abort = ctl.abort.load(Ordering::Relaxed);
        if abort || (!stopped && ctl.stop.load(Ordering::Relaxed)) {
            stopped = true;
            // Senders stop and close their side; receivers read on to the end unless aborted.
            for slot in slots
                .iter_mut()
                .filter(|x| x.live && (abort || x.s.meter.sending))
            {
                end(slot, &poller, None);
                live -= 1;
            }
            if live == 0 {
                break;
            }
        }
        ready.clear();
        ready.extend_from_slice(poller.wait(POLL)?);
        if ready.is_empty() {
            for slot in slots.iter_mut().filter(|x| x.live) {
                if let Some(low) = slot.low.as_mut() {
                    low.read(0);
                }
            }
            continue;
        }
        for ev in &ready {
            let Some(slot) = slots.get_mut(ev.token as usize).filter(|x| x.live) else {
                continue;
            };
            let turn = if slot.s.meter.sending {
                match &file {
                    Some(f) => send_file_turn(slot, f, plan.len),
                    None => send_turn(slot, &wbuf),
                }
            } else {
                receive_turn(slot, &mut rbuf)
            };
            if let Turn::End(err) = turn {
                end(slot, &poller, err);
                live -= 1;
            }
        }
    }
    Ok(())
}

/// Ends one stream: a sender closes its side so the receiver sees the end.
fn end(slot: &mut Slot, poller: &Poller, err: Option<String>) {
    slot.live = false;
    let _ = poller.delete(slot.s.sock.as_raw_fd());
    if slot.s.meter.sending {
        let _ = slot.s.sock.shutdown(Shutdown::Write);
    }
    slot.s.meter.finish(err);
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

fn send_turn(slot: &mut Slot, buf: &[u8]) -> Turn {
    for _ in 0..PER_TURN {
        let want = match slot.s.quota {
            0 => buf.len(),
            q if slot.total >= q => return Turn::End(None),
            q => ((q - slot.total) as usize).min(buf.len()),
        };
        match (&*slot.s.sock).write(&buf[..want]) {
            Ok(n) => {
                slot.total += n as u64;
                slot.s.meter.bytes.store(slot.total, Ordering::Relaxed);
                if n < want {
                    break;
                }
            }
            Err(e) if retry(&e) => break,
            Err(e) => return Turn::End(Some(e.to_string())),
        }
    }
    if slot.s.quota > 0 && slot.total >= slot.s.quota {
        return Turn::End(None);
    }
    Turn::Keep
}

fn send_file_turn(slot: &mut Slot, file: &OwnedFd, len: usize) -> Turn {
    for _ in 0..PER_TURN {
        let mut want = len - slot.off as usize;
        if slot.s.quota > 0 {
            if slot.total >= slot.s.quota {
                return Turn::End(None);
            }
            want = want.min((slot.s.quota - slot.total) as usize);
        }
        // SAFETY: both descriptors are open for the call; `off` is a valid offset pointer.
        let n = unsafe {
            libc::sendfile(
                slot.s.sock.as_raw_fd(),
                file.as_raw_fd(),
                &mut slot.off,
                want,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if retry(&e) {
                break;
            }
            return Turn::End(Some(e.to_string()));
        }
        slot.total += n as u64;
        if slot.off as usize >= len {
            slot.off = 0;
        }
        slot.s.meter.bytes.store(slot.total, Ordering::Relaxed);
        if (n as usize) < want {
            break;
        }
    }
    if slot.s.quota > 0 && slot.total >= slot.s.quota {
        return Turn::End(None);
    }
    Turn::Keep
}

fn receive_turn(slot: &mut Slot, buf: &mut [u8]) -> Turn {
    for _ in 0..PER_TURN {
        match (&*slot.s.sock).read(buf) {
            Ok(0) => return Turn::End(None),
            Ok(n) => {
                slot.total += n as u64;
                slot.s.meter.bytes.store(slot.total, Ordering::Relaxed);
                if let Some(low) = slot.low.as_mut() {
                    low.read(n);
                }
                if n < buf.len() {
                    break;
                }
            }
            Err(e) if retry(&e) => break,
            Err(e) => return Turn::End(Some(e.to_string())),
        }
    }
    Turn::Keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::StreamSocket;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    /// Many streams on one multiplexing worker each way: every quota arrives whole, in both
    /// the write and the sendfile path, and every meter is finished.
    #[test]
    fn multiplexed_streams_deliver_every_quota() {
        for zerocopy in [false, true] {
            let n = 24;
            let (mut tx, mut rx) = (Vec::new(), Vec::new());
            for i in 0..n {
                let (a, b) = pair();
                let (a, b) = (Arc::new(a), Arc::new(b));
                let quota = 100_000 + i as u64 * 7_919;
                tx.push(BulkStream {
                    meter: StreamMeter::new(i, true, StreamSocket::Tcp(a.clone())),
                    sock: a,
                    quota,
                });
                rx.push(BulkStream {
                    meter: StreamMeter::new(i, false, StreamSocket::Tcp(b.clone())),
                    sock: b,
                    quota: 0,
                });
            }
            let plan = BulkPlan {
                len: 16 * 1024,
                zerocopy,
                streams: n,
                pacing_bps: 0.0,
            };
            let ctl = Arc::new(Control::default());
            let (txm, rxm): (Vec<_>, Vec<_>) = tx
                .iter()
                .zip(&rx)
                .map(|(t, r)| (t.clone(), r.meter.clone()))
                .unzip();
            // Two groups per side, so each worker multiplexes 12 streams.
            let half = |v: Vec<BulkStream>| {
                let (a, b): (Vec<_>, Vec<_>) =
                    v.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
                [a, b].map(|g| g.into_iter().map(|(_, s)| s).collect::<Vec<_>>())
            };
            let mut hs = Vec::new();
            for g in half(tx).into_iter().chain(half(rx)) {
                let ctl = ctl.clone();
                hs.push(std::thread::spawn(move || run_many(g, plan, &ctl)));
            }
            for h in hs {
                h.join().unwrap();
            }
            for (t, r) in txm.iter().zip(&rxm) {
                assert!(t.meter.done.load(Ordering::Acquire) && r.done.load(Ordering::Acquire));
                assert_eq!(t.meter.bytes.load(Ordering::Relaxed), t.quota);
                assert_eq!(
                    r.bytes.load(Ordering::Relaxed),
                    t.quota,
                    "zerocopy {zerocopy}"
                );
                assert!(r.error.lock().unwrap().is_none());
            }
        }
    }
}
