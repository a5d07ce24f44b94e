//! The TCP transport under the smb2 crate's `Connection` for a data connection: the crate
//! negotiates, logs on, connects the tree and opens the file over it, then hands the socket
//! to the direct data path ([`crate::direct`]), which reads and writes it itself.
//!
//! The handover: [`Tcp::hand_over`] sets a flag after which the crate's receiver task,
//! whenever it runs again, parks without touching the socket (it only runs while this
//! connection's runtime is driven, which the data path does not do), and any send of the
//! crate fails as a lost connection instead of putting a frame with a stale message id on
//! the wire. The crate's own sends happen only before the handover (the caller turns its
//! keepalive off), so the two never share the socket.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use smb2::transport::{TransportReceive, TransportSend};

/// Largest frame the control path accepts (the 24-bit NetBIOS length's maximum).
const MAX_FRAME: usize = (1 << 24) - 1;

/// One TCP connection to the server, shared by the crate (before the handover) and the
/// data path (after).
#[derive(Debug)]
pub(crate) struct Tcp {
    stream: tokio::net::TcpStream,
    handed_over: AtomicBool,
}

fn lost(what: &str) -> smb2::Error {
    smb2::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        what.to_string(),
    ))
}

impl Tcp {
    /// Connects to `addr` within `timeout` (must run inside a tokio runtime).
    pub(crate) async fn connect(addr: &str, timeout: Duration) -> smb2::Result<Arc<Tcp>> {
        let stream = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| smb2::Error::Timeout)?
            .map_err(smb2::Error::Io)?;
        stream.set_nodelay(true).map_err(smb2::Error::Io)?;
        Ok(Arc::new(Tcp {
            stream,
            handed_over: AtomicBool::new(false),
        }))
    }

    /// From now on the socket is the data path's (see the module's documentation); returns
    /// its descriptor (non-blocking), valid as long as this `Tcp` lives.
    pub(crate) fn hand_over(&self) -> RawFd {
        self.handed_over.store(true, Ordering::Release);
        self.stream.as_raw_fd()
    }

    fn is_handed_over(&self) -> bool {
        self.handed_over.load(Ordering::Acquire)
    }

    async fn read_exact(&self, buf: &mut [u8]) -> smb2::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            self.stream.readable().await.map_err(smb2::Error::Io)?;
            match self.stream.try_read(&mut buf[got..]) {
                Ok(0) => return Err(smb2::Error::Disconnected),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(smb2::Error::Io(e)),
            }
        }
        Ok(())
    }
}

/// One of the two halves the crate's `Connection` is given (both the same socket).
#[derive(Debug)]
pub(crate) struct Half(pub(crate) Arc<Tcp>);

impl std::ops::Deref for Half {
    type Target = Tcp;
    fn deref(&self) -> &Tcp {
        &self.0
    }
}

#[async_trait::async_trait]
impl TransportSend for Half {
    async fn send(&self, data: &[u8]) -> smb2::Result<()> {
        if self.is_handed_over() {
            return Err(lost("the connection was handed to the data path"));
        }
        if data.len() > MAX_FRAME {
            return Err(smb2::Error::invalid_data("message longer than a frame"));
        }
        let mut frame = Vec::with_capacity(4 + data.len());
        frame.extend_from_slice(&(data.len() as u32).to_be_bytes());
        frame.extend_from_slice(data);
        let mut sent = 0;
        while sent < frame.len() {
            self.stream.writable().await.map_err(smb2::Error::Io)?;
            match self.stream.try_write(&frame[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(smb2::Error::Io(e)),
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl TransportReceive for Half {
    async fn receive(&self) -> smb2::Result<Vec<u8>> {
        // Wait for the next frame's first byte without taking it (a peek), so a handover
        // while waiting leaves the socket untouched.
        if self.is_handed_over() {
            std::future::pending::<()>().await;
        }
        let mut first = [0u8; 1];
        if self
            .stream
            .peek(&mut first)
            .await
            .map_err(smb2::Error::Io)?
            == 0
        {
            return Err(smb2::Error::Disconnected);
        }
        if self.is_handed_over() {
            std::future::pending::<()>().await;
        }
        let mut len = [0u8; 4];
        self.read_exact(&mut len).await?;
        let n = u32::from_be_bytes(len) as usize & MAX_FRAME;
        let mut frame = vec![0u8; n];
        self.read_exact(&mut frame).await?;
        Ok(frame)
    }
}
