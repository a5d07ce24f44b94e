//! TCP connection analysis: sequence tracking, retransmissions, duplicate ACKs, windows with
//! scaling, RTT, the sender's view of the receiver's ACKs wherever the capture was taken,
//! and the diagnosis of what limited each connection.
//!
//! The state machine takes segments and their capture times as inputs and reads no clock.

mod conn;
mod frames;
mod half;
pub mod limits;
pub mod rtt;
pub mod seqset;
pub mod view;

pub use conn::TcpConn;
