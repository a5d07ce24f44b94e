//! `TCP_INFO` samples of a socket: what the kernel knows about a connection (RTT, window,
//! retransmissions, pacing and delivery rate, and why the sender was limited).

use std::os::fd::AsRawFd;

use serde::{Deserialize, Serialize};

/// `struct tcp_info` of Linux up to `tcpi_rcv_wnd` (kernel 5.4+). Older kernels fill a
/// prefix; the rest stays zero and is reported as absent where zero means "unknown".
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
}

/// The fields of `TCP_INFO` nsperf reports, at one instant. Counters are cumulative since the
/// connection opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfoSample {
    /// Smoothed round-trip time, µs.
    pub rtt_us: u32,
    /// RTT variance, µs.
    pub rttvar_us: u32,
    /// Lowest RTT seen, µs.
    pub min_rtt_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
    /// Slow-start threshold, segments.
    pub snd_ssthresh: u32,
    /// Retransmitted segments so far.
    pub total_retrans: u32,
    /// Pacing rate, bytes/s.
    pub pacing_rate_bytes_per_s: u64,
    /// Delivery rate of the last acked data, bytes/s.
    pub delivery_rate_bytes_per_s: u64,
    /// Time with data in flight, µs.
    pub busy_time_us: u64,
    /// Time limited by the receiver's window, µs.
    pub rwnd_limited_us: u64,
    /// Time limited by the send buffer, µs.
    pub sndbuf_limited_us: u64,
    /// Peer's advertised window, bytes (kernel 5.4+; 0 when unknown).
    pub snd_wnd_bytes: u32,
    /// Our advertised window, bytes (kernel 5.4+; 0 when unknown).
    pub rcv_wnd_bytes: u32,
    /// Receive-space estimate used by autotuning, bytes.
    pub rcv_space_bytes: u32,
    /// Bytes acked by the peer.
    pub bytes_acked: u64,
    /// Bytes received.
    pub bytes_received: u64,
}

/// Reads `TCP_INFO` of a TCP socket; `None` when the call fails.
pub fn sample(sock: &impl AsRawFd) -> Option<TcpInfoSample> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a plain-old-data struct of `len` bytes; the kernel writes at most len.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    Some(TcpInfoSample {
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        min_rtt_us: raw.min_rtt,
        snd_cwnd: raw.snd_cwnd,
        snd_mss: raw.snd_mss,
        snd_ssthresh: raw.snd_ssthresh,
        total_retrans: raw.total_retrans,
        pacing_rate_bytes_per_s: raw.pacing_rate,
        delivery_rate_bytes_per_s: raw.delivery_rate,
        busy_time_us: raw.busy_time,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
        snd_wnd_bytes: raw.snd_wnd,
        rcv_wnd_bytes: raw.rcv_wnd,
        rcv_space_bytes: raw.rcv_space,
        bytes_acked: raw.bytes_acked,
        bytes_received: raw.bytes_received,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn samples_a_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _s = l.accept().unwrap();
        let t = super::sample(&c).unwrap();
        assert!(t.snd_mss > 0);
        assert!(t.snd_cwnd > 0);
        assert!(super::sample(&std::fs::File::open("/dev/null").unwrap()).is_none());
    }
}
