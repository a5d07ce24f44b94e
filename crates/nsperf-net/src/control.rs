//! The socket shell around the control protocol: frames in and out of a TCP stream, with
//! time limits.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::proto::{FrameDecoder, Msg, ProtoError, encode};

/// Why reading a control message failed.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// The peer closed the connection.
    #[error("peer closed the control connection")]
    Closed,
    /// A socket error.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The peer sent something that is not a valid message.
    #[error(transparent)]
    Proto(#[from] ProtoError),
}

/// A control connection.
#[derive(Debug)]
pub struct ControlConn {
    sock: TcpStream,
    decoder: FrameDecoder,
    out: Vec<u8>,
    buf: Box<[u8]>,
}

impl ControlConn {
    /// Wraps a connected stream; `already` are bytes read from it before (the dispatcher's
    /// peek at the magic).
    pub fn new(sock: TcpStream, already: &[u8]) -> Self {
        let _ = sock.set_nodelay(true);
        let mut decoder = FrameDecoder::new();
        decoder.push(already);
        ControlConn {
            sock,
            decoder,
            out: Vec::new(),
            buf: vec![0u8; 64 * 1024].into_boxed_slice(),
        }
    }

    /// The socket.
    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &Msg) -> io::Result<()> {
        self.out.clear();
        encode(msg, &mut self.out);
        let _ = self.sock.set_write_timeout(Some(Duration::from_secs(30)));
        self.sock.write_all(&self.out)
    }

    /// The next message, waiting at most `timeout` (`Ok(None)` when it passed; `None` waits
    /// for ever).
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<Msg>, RecvError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(m) = self.decoder.next_msg()? {
                return Ok(Some(m));
            }
            let wait = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ok(None);
                    }
                    Some((d - now).max(Duration::from_millis(1)))
                }
                None => Some(Duration::from_millis(500)),
            };
            self.sock.set_read_timeout(wait)?;
            match self.sock.read(&mut self.buf) {
                Ok(0) => return Err(RecvError::Closed),
                Ok(n) => self.decoder.push(&self.buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    if nsperf_core::signal::interrupted() && deadline.is_none() {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(RecvError::Io(e)),
            }
        }
    }
}
