//! Builders of capture files and packets, for tests and fuzz seeds: pcap in both byte
//! orders and resolutions, pcapng with several sections and interfaces, Ethernet/IPv4/TCP
//! frames, and [`sim`], a simulated TCP transfer over a bottleneck captured at any point of
//! the path. Only used to *write* test inputs; the readers never depend on it.

pub mod sim;

/// A tiny seeded PRNG (xorshift64*), so randomized tests are reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is replaced by a constant).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545f4914f6cdd1d)
    }

    /// A number in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// A legacy pcap file: `packets` are (timestamp ns, frame bytes).
pub fn pcap(big_endian: bool, nanos: bool, link: u32, packets: &[(i64, Vec<u8>)]) -> Vec<u8> {
    let w32 = |v: &mut Vec<u8>, x: u32| {
        v.extend_from_slice(&if big_endian {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        })
    };
    let w16 = |v: &mut Vec<u8>, x: u16| {
        v.extend_from_slice(&if big_endian {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        })
    };
    let mut v = Vec::new();
    w32(&mut v, if nanos { 0xa1b23c4d } else { 0xa1b2c3d4 });
    w16(&mut v, 2);
    w16(&mut v, 4);
    w32(&mut v, 0);
    w32(&mut v, 0);
    w32(&mut v, 65535);
    w32(&mut v, link);
    for (ts, data) in packets {
        let frac = ts.rem_euclid(1_000_000_000) as u32;
        w32(&mut v, ts.div_euclid(1_000_000_000) as u32);
        w32(&mut v, if nanos { frac } else { frac / 1000 });
        w32(&mut v, data.len() as u32);
        w32(&mut v, data.len() as u32);
        v.extend_from_slice(data);
    }
    v
}

/// One pcapng section: interfaces as (link type, if_tsresol option), then packets as
/// (interface id, timestamp in that interface's units, frame bytes).
pub fn pcapng_section(
    big_endian: bool,
    interfaces: &[(u16, Option<u8>)],
    packets: &[(u32, u64, Vec<u8>)],
) -> Vec<u8> {
    let w32 = |x: u32| {
        if big_endian {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    };
    let w16 = |x: u16| {
        if big_endian {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    };
    let block = |v: &mut Vec<u8>, kind: u32, body: &[u8]| {
        let pad = (4 - body.len() % 4) % 4;
        let len = (12 + body.len() + pad) as u32;
        v.extend_from_slice(&w32(kind));
        v.extend_from_slice(&w32(len));
        v.extend_from_slice(body);
        v.extend(std::iter::repeat_n(0, pad));
        v.extend_from_slice(&w32(len));
    };
    let mut v = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&w32(0x1a2b3c4d));
    shb.extend_from_slice(&w16(1));
    shb.extend_from_slice(&w16(0));
    shb.extend_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
    block(&mut v, 0x0a0d0d0a, &shb);
    for &(link, tsresol) in interfaces {
        let mut idb = Vec::new();
        idb.extend_from_slice(&w16(link));
        idb.extend_from_slice(&w16(0));
        idb.extend_from_slice(&w32(65535));
        if let Some(r) = tsresol {
            idb.extend_from_slice(&w16(9));
            idb.extend_from_slice(&w16(1));
            idb.extend_from_slice(&[r, 0, 0, 0]);
            idb.extend_from_slice(&w16(0));
            idb.extend_from_slice(&w16(0));
        }
        block(&mut v, 1, &idb);
    }
    for (ifid, ts, data) in packets {
        let mut epb = Vec::new();
        epb.extend_from_slice(&w32(*ifid));
        epb.extend_from_slice(&w32((ts >> 32) as u32));
        epb.extend_from_slice(&w32(*ts as u32));
        epb.extend_from_slice(&w32(data.len() as u32));
        epb.extend_from_slice(&w32(data.len() as u32));
        epb.extend_from_slice(data);
        epb.extend(std::iter::repeat_n(0, (4 - data.len() % 4) % 4));
        block(&mut v, 6, &epb);
    }
    v
}

/// Parameters of a TCP segment to build.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seg {
    /// Source (IPv4 octets, port).
    pub src: ([u8; 4], u16),
    /// Destination.
    pub dst: ([u8; 4], u16),
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flag bits.
    pub flags: u8,
    /// Raw window.
    pub window: u16,
    /// Payload length (zero bytes are written).
    pub len: usize,
    /// MSS and window-scale options (SYNs).
    pub syn_opts: Option<(u16, u8)>,
    /// IPv4 identification.
    pub ip_id: u16,
    /// Time to live (0 is written as 64).
    pub ttl: u8,
    /// Timestamps option (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// One SACK block (left, right).
    pub sack: Option<(u32, u32)>,
}

/// An Ethernet/IPv4/TCP frame for `s` carrying `payload` (`s.len` bytes; zeros where
/// `payload` is shorter).
pub fn tcp_frame_with(s: &Seg, payload: &[u8]) -> Vec<u8> {
    let mut f = tcp_frame(s);
    let at = f.len() - s.len;
    let n = payload.len().min(s.len);
    f[at..at + n].copy_from_slice(&payload[..n]);
    f
}

/// An Ethernet/IPv4/TCP frame for `s` (a payload of `s.len` zero bytes).
pub fn tcp_frame(s: &Seg) -> Vec<u8> {
    let mut opts = Vec::new();
    if let Some((mss, ws)) = s.syn_opts {
        opts.extend_from_slice(&[2, 4]);
        opts.extend_from_slice(&mss.to_be_bytes());
        opts.extend_from_slice(&[1, 3, 3, ws]);
    }
    if let Some((val, ecr)) = s.timestamps {
        opts.extend_from_slice(&[1, 1, 8, 10]);
        opts.extend_from_slice(&val.to_be_bytes());
        opts.extend_from_slice(&ecr.to_be_bytes());
    }
    if let Some((l, r)) = s.sack {
        opts.extend_from_slice(&[1, 1, 5, 10]);
        opts.extend_from_slice(&l.to_be_bytes());
        opts.extend_from_slice(&r.to_be_bytes());
    }
    let tcp_len = 20 + opts.len();
    let ip_len = 20 + tcp_len + s.len;
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[
        0x45,
        0,
        (ip_len >> 8) as u8,
        ip_len as u8,
        (s.ip_id >> 8) as u8,
        s.ip_id as u8,
        0x40,
        0,
        if s.ttl == 0 { 64 } else { s.ttl },
        6,
        0,
        0,
    ]);
    f.extend_from_slice(&s.src.0);
    f.extend_from_slice(&s.dst.0);
    f.extend_from_slice(&s.src.1.to_be_bytes());
    f.extend_from_slice(&s.dst.1.to_be_bytes());
    f.extend_from_slice(&s.seq.to_be_bytes());
    f.extend_from_slice(&s.ack.to_be_bytes());
    f.push(((tcp_len / 4) as u8) << 4);
    f.push(s.flags);
    f.extend_from_slice(&s.window.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(&opts);
    f.extend(std::iter::repeat_n(0, s.len));
    f
}
