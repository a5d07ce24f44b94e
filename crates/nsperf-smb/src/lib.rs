//! SMB 2/3 in user space, for `nsperf io --engine smb`: no kernel mount and no root.
//!
//! - [`url`]: `smb://HOST[:PORT]/SHARE/PATH` targets.
//! - [`creds`]: who to log on as — smbclient's authentication file, the environment, or a
//!   guest session; never the command line.
//! - [`client`]: the control path ([`Client`]: connect, log on, tree connect, create, remove,
//!   stat, single reads and writes), blocking calls over the `smb2` crate.
//! - [`Pipeline`]: the data path, READ/WRITE with many requests in flight on one connection.
//! - `direct`, `wire`, `sign`, `transport`: the direct data path under [`Pipeline`].
//!
//! Why the `smb2` crate: it is pure Rust, speaks every dialect from 2.0.2 to 3.1.1 with
//! NTLM, signing and encryption, and lets several requests share one connection (its
//! `Connection` is a cheap clone whose receiver task routes replies by message id), which
//! `--iodepth` needs; the `smb` crate (smb-rs) waits for each request on its own thread in
//! its blocking mode and turns every error into a string, so a lost server could not be
//! told from a refused logon. What the crate costs: every message is an allocation, and a
//! READ reply is copied four times between the socket and the caller's buffer; so the data
//! path of an unencrypted connection is nsperf's own (`direct`: READ, WRITE, FLUSH and
//! CLOSE framed, signed and parsed here, each payload byte copied once, by the kernel),
//! after the crate has negotiated, logged on, connected the tree and opened the file on
//! nsperf's socket (`transport`). Encrypted sessions and shares stay on the crate's path.
#![deny(missing_docs)]

pub mod client;
pub mod creds;
mod direct;
mod error;
mod frames;
mod pipeline;
pub mod replay;
mod sign;
mod transport;
pub mod url;
mod wire;

pub use client::{Client, Dialect, Listed, Negotiated};
pub use creds::{CredError, CredentialSource, Credentials};
pub use error::SmbError;
pub use frames::{fuzz_read_reply, read_reply_into};
pub use pipeline::Pipeline;
pub use url::{Signing, SmbUrl};

/// Parses a URL and a credentials file from the same bytes (the body of the fuzz target).
/// Never panics.
/// Also the direct data path's reply parsers.
pub fn fuzz_parsers(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    if let Ok(u) = s.parse::<SmbUrl>() {
        let _ = u.to_string().parse::<SmbUrl>();
        let _ = u.addr();
    }
    let _ = Credentials::parse_file(&s, "fuzz");
    fuzz_read_reply(data);
    wire::fuzz_wire(data);
}
