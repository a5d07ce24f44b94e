//! TCP connection analysis: sequence tracking, retransmissions, duplicate ACKs, windows with
//! scaling, RTT, bytes in flight, and the diagnosis of what limited each connection.
//!
//! The state machine takes segments and their capture times as inputs and reads no clock.

pub mod conn;
pub mod limits;
pub mod rtt;
pub mod seqset;

pub use conn::TcpConn;
