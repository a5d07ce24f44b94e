//! WAN labs: network namespaces ("sites") joined by a userspace link emulator.
//!
//! `lab up` creates one namespace per site (`nsp-LAB-SITE`), each with a TUN device `wan0`
//! addressed 10.77.0.(i+1)/24 ([`site_addr`]), and starts a background emulator process that
//! forwards packets between the sites through a [`model::LinkModel`] per direction: rate with
//! a drop-tail bottleneck queue, delay, jitter, loss, reorder, duplicate, corrupt, link
//! up/down. The model is pure (time and randomness are inputs); [`forwarder`] drives it with
//! the real clock and TUN devices. State lives under [`state::LABS_DIR`] so `lab down` works
//! after a crash.
#![deny(missing_docs)]

pub mod capture;
pub mod config;
pub mod emulator;
mod error;
pub mod events;
mod fabric;
mod forwarder;
pub mod lab;
mod model;
pub mod netns;
mod packet;
pub mod path;
mod rng;
pub mod samba;
mod schedule;
pub mod service;
mod setup;
pub mod state;
pub mod stats;
pub mod topology;
mod tun;

use std::net::Ipv4Addr;

pub use config::{LinkChange, LinkParams};
pub use error::LabError;
pub use schedule::Schedule;
pub use setup::LinkSetup;
pub use topology::Topology;

/// The IPv4 address of site number `i` (0-based, in `--sites` order) inside its namespace:
/// 10.77.0.(i+1). Labs hold at most [`lab::MAX_SITES`] sites.
pub fn site_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 0, (i.min(253) + 1) as u8)
}

#[cfg(test)]
mod tests {
    #[test]
    fn site_addresses() {
        assert_eq!(super::site_addr(0).to_string(), "10.77.0.1");
        assert_eq!(super::site_addr(1).to_string(), "10.77.0.2");
    }
}
