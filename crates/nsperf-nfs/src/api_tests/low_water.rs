//! The pipeline's wake-ups while a large READ's data arrives, against a scripted NFSv3
//! server on loopback that sends each reply's data in pieces with pauses between (as a slow
//! link does): the reader asks the kernel to wake it once much of the data is in
//! (`SO_RCVLOWAT`), every byte lands, and a short reply read blocking afterwards (a COMMIT's)
//! does not wait on the mark.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::proto::FileHandle;
use crate::{Pipeline, Stable};
use nsperf_core::data_path::{Completion, DataOp};

const T: Duration = Duration::from_secs(10);
const VERF: u64 = 0x5eed;

fn byte(i: u64) -> u8 {
    (i.wrapping_mul(2654435761) >> 13) as u8
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// Answers READ (6), WRITE (7) and COMMIT (21) calls of one connection until it closes; a
/// READ's data (`byte(offset)`…) goes in 64 KiB pieces, 5 ms apart.
fn serve(mut c: TcpStream) {
    let mut body = Vec::new();
    loop {
        let mut mark = [0u8; 4];
        if c.read_exact(&mut mark).is_err() {
            return;
        }
        let len = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
        body.resize(len, 0);
        c.read_exact(&mut body).unwrap();
        let proc_ = u32_at(&body, 20);
        // xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS, NFS3_OK
        let mut r: Vec<u8> = [u32_at(&body, 0), 1, 0, 0, 0, 0, 0]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        let word = |r: &mut Vec<u8>, w: u32| r.extend_from_slice(&w.to_be_bytes());
        match proc_ {
            6 => {
                // after the credential and the verifier: the handle, the offset, the count
                let mut at = 24;
                at += 8 + (u32_at(&body, at + 4) as usize).div_ceil(4) * 4;
                at += 8 + (u32_at(&body, at + 4) as usize).div_ceil(4) * 4;
                at += 4 + (u32_at(&body, at) as usize).div_ceil(4) * 4;
                let off = u64::from_be_bytes(body[at..at + 8].try_into().unwrap());
                let count = u32_at(&body, at + 8);
                for w in [0, count, 0, count] {
                    word(&mut r, w); // no attributes, count, not eof, data length
                }
                let data: Vec<u8> = (off..off + u64::from(count)).map(byte).collect();
                let pad = (4 - data.len() % 4) % 4;
                let total = r.len() + data.len() + pad;
                c.write_all(&(0x8000_0000 | total as u32).to_be_bytes())
                    .unwrap();
                c.write_all(&r).unwrap();
                for piece in data.chunks(64 << 10) {
                    c.write_all(piece).unwrap();
                    std::thread::sleep(Duration::from_millis(5));
                }
                c.write_all(&[0; 3][..pad]).unwrap();
                continue;
            }
            7 => {
                // no wcc data, count (the call's last argument word before the data), UNSTABLE
                let count = u32_at(&body, len - 4096 - 4);
                for w in [0, 0, count, 0] {
                    word(&mut r, w);
                }
                r.extend_from_slice(&VERF.to_be_bytes());
            }
            21 => {
                word(&mut r, 0);
                word(&mut r, 0);
                r.extend_from_slice(&VERF.to_be_bytes());
            }
            p => panic!("procedure {p}"),
        }
        c.write_all(&(0x8000_0000 | r.len() as u32).to_be_bytes())
            .unwrap();
        c.write_all(&r).unwrap();
    }
}

#[test]
fn a_large_read_wakes_the_reader_late_and_a_commit_after_it_does_not_wait() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || serve(l.accept().unwrap().0));
    let fh = FileHandle::new(&[7; 8]).unwrap();
    let mut p = Pipeline::connect(addr, fh, 1, Stable::Unstable, T).unwrap();
    let bs = 1usize << 20;
    let mut buf = vec![0u8; bs];
    // SAFETY: the buffer outlives the pipeline's use of it (dropped after it).
    unsafe { p.set_buffer(0, buf.as_mut_ptr(), bs) };
    let mut done: Vec<Completion> = Vec::new();
    // An unstable WRITE (4 KiB, the size the server expects), so that a COMMIT follows.
    p.queue(DataOp::Write, 0, 4096, 0).unwrap();
    p.reap(1, &mut done).unwrap();
    assert_eq!(done[0].result, 4096);
    for i in 0..4u64 {
        buf.fill(0);
        done.clear();
        p.queue(DataOp::Read, i * bs as u64, bs, 0).unwrap();
        p.reap(1, &mut done).unwrap();
        assert_eq!(done[0].result, bs as i32);
        let off = i * bs as u64;
        assert!(
            buf.iter()
                .enumerate()
                .all(|(k, &x)| x == byte(off + k as u64)),
            "read {i}"
        );
    }
    // Woken for more than one 64 KiB piece at a time (the mark is capped at a quarter of
    // the receive buffer, which starts at 128 KiB and grows).
    assert!(p.max_lowat() > 32 << 10, "mark {}", p.max_lowat());
    let t0 = Instant::now();
    p.commit(&mut done).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "COMMIT took {:?}",
        t0.elapsed()
    );
    drop(p);
    server.join().unwrap();
}
