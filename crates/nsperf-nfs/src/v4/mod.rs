//! NFSv4.0 and 4.1 over TCP (RFC 7530, RFC 8881) for `nfs://HOST/PATH?version=4`: the
//! client's identity (and 4.1's sessions), the control path ([`Client4`]) and the COMPOUND
//! wire format ([`wire`]). The data path is [`crate::Pipeline`] speaking COMPOUNDs of PUTFH
//! and READ or WRITE (after a SEQUENCE on a session of its own in 4.1,
//! [`crate::Pipeline::connect_v4`]).
//!
//! Not spoken: NFSv4.2, the back channel and callbacks (so the server grants no
//! delegations), pNFS, Kerberos, lease renewal by RENEW in 4.0 (every READ and WRITE with
//! the open's stateid renews it, as RFC 7530 9.5 says). The embedded server speaks v3 only.

mod client;
pub mod wire;

pub use client::{Client4, Lease, NFS4_PORT};
pub use wire::{Attr4, SessionId, Stateid};
