//! Writes a pcap of N sequential short TCP connections (handshake, 100 B request, 1000 B
//! answer, FINs), 10 ms apart: `cargo run --release -p nsperf-trace --example connections -- N FILE`.
//! Used by bench/trace-memory.sh for the memory figure in docs/performance.md.

use std::io::Write;

use nsperf_trace::testkit::{Seg, pcap, tcp_frame};
use nsperf_trace::wire::tcp::flags::{ACK, FIN, SYN};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let path = args.next().unwrap_or_else(|| "connections.pcap".into());
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    // the file header alone, then records
    out.write_all(&pcap(false, true, 1, &[]))?;
    let ms = 1_000_000i64;
    for i in 0..n {
        let t0 = 1_700_000_000_000_000_000 + i as i64 * 10 * ms;
        let port = 1024 + (i % 60000) as u16;
        let (a, b) = (([10, 0, (i >> 16) as u8, 1], port), ([10, 0, 0, 2], 80));
        let mk = |from_a: bool, seq: u32, ack: u32, flags: u8, len: usize| {
            tcp_frame(&Seg {
                src: if from_a { a } else { b },
                dst: if from_a { b } else { a },
                seq,
                ack,
                flags,
                window: 1000,
                len,
                ip_id: (i as u16).wrapping_mul(7).wrapping_add(u16::from(flags)),
                syn_opts: (flags & SYN != 0).then_some((1460, 0)),
                ..Seg::default()
            })
        };
        let frames = [
            (t0, mk(true, 0, 0, SYN, 0)),
            (t0 + ms, mk(false, 0, 1, SYN | ACK, 0)),
            (t0 + ms + 1, mk(true, 1, 1, ACK, 100)),
            (t0 + 2 * ms, mk(false, 1, 101, ACK, 1000)),
            (t0 + 3 * ms, mk(true, 101, 1001, ACK | FIN, 0)),
            (t0 + 4 * ms, mk(false, 1001, 102, ACK | FIN, 0)),
            (t0 + 5 * ms, mk(true, 102, 1002, ACK, 0)),
        ];
        // records only: skip the 24-byte file header of each one-packet pcap
        for f in frames {
            out.write_all(&pcap(false, true, 1, &[f])[24..])?;
        }
    }
    out.flush()
}
