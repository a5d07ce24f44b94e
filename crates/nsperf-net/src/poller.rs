//! A thin safe shell over `epoll(7)`: one readiness set, level-triggered, each descriptor
//! tagged with a caller's token. Used where one thread watches many sockets (the server's
//! greeter, the multiplexed bulk streams). The event buffer is allocated once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What a descriptor is watched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Data (or the peer's end) to read.
    Read,
    /// Room to write.
    Write,
}

impl Interest {
    fn bits(self) -> u32 {
        let b = match self {
            Interest::Read => libc::EPOLLIN | libc::EPOLLRDHUP,
            Interest::Write => libc::EPOLLOUT,
        };
        b as u32
    }
}

/// One readiness report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The token given at [`Poller::add`].
    pub token: u64,
    /// An error or hang-up is pending on the descriptor (a read or write will say which).
    pub error: bool,
}

/// An epoll instance with its event buffer.
#[derive(Debug)]
pub struct Poller {
    fd: OwnedFd,
    events: Box<[libc::epoll_event]>,
    out: Box<[Event]>,
}

impl Poller {
    /// A poller reporting at most `capacity` events per [`Poller::wait`].
    pub fn new(capacity: usize) -> io::Result<Poller> {
        // SAFETY: no pointers involved.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Poller {
            // SAFETY: a fresh descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)]
                .into_boxed_slice(),
            out: vec![
                Event {
                    token: 0,
                    error: false
                };
                capacity.max(1)
            ]
            .into_boxed_slice(),
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, ev: Option<(Interest, u64)>) -> io::Result<()> {
        let mut e = libc::epoll_event {
            events: ev.map_or(0, |(i, _)| i.bits()),
            u64: ev.map_or(0, |(_, t)| t),
        };
        // SAFETY: `e` is a live epoll_event; the kernel only reads it.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut e) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Watches `fd` for `interest`, reporting `token`.
    pub fn add(&self, fd: RawFd, interest: Interest, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, Some((interest, token)))
    }

    /// Stops watching `fd` (closing it does that too).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, None)
    }

    /// Waits up to `timeout` for readiness; returns the events (empty on timeout or signal).
    pub fn wait(&mut self, timeout: Duration) -> io::Result<&[Event]> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: the buffer holds `events.len()` entries the kernel may fill.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(&[]);
            }
            return Err(e);
        }
        let n = n as usize;
        for (out, k) in self.out.iter_mut().zip(self.events.iter()).take(n) {
            // Copy out of the (packed) kernel struct before reading its fields.
            let (bits, token) = (k.events, k.u64);
            *out = Event {
                token,
                error: bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0,
            };
        }
        Ok(&self.out[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn reports_readable_and_writable_with_tokens() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut p = Poller::new(4).unwrap();
        p.add(a.as_raw_fd(), Interest::Read, 7).unwrap();
        assert!(p.wait(Duration::from_millis(10)).unwrap().is_empty());
        b.write_all(b"x").unwrap();
        let ev = p.wait(Duration::from_secs(1)).unwrap().to_vec();
        assert_eq!(
            ev,
            vec![Event {
                token: 7,
                error: false
            }]
        );
        p.delete(a.as_raw_fd()).unwrap();
        p.add(b.as_raw_fd(), Interest::Write, 9).unwrap();
        let ev = p.wait(Duration::from_secs(1)).unwrap().to_vec();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].token, 9);
        drop(a);
        let ev = p.wait(Duration::from_secs(1)).unwrap().to_vec();
        assert!(ev[0].error, "{ev:?}");
    }
}
