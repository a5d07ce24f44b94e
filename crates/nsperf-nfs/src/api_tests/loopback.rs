//! The client against the embedded server on loopback: mount, create, pipelined writes and
//! reads with many calls in flight (data compared byte for byte), COMMIT, remove, and the
//! errors for a missing export, a read-only export and a server that dies mid-run.

use std::time::Duration;

use crate::server::{Server, ServerConfig, ServerHandle};
use crate::{NfsError, NfsUrl, Pipeline, Session, Stable};
use nsperf_core::Failure;
use nsperf_core::data_path::{Completion, DataOp};
use nsperf_core::failure::Classify;

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn serve(tag: &str, read_only: bool) -> (Dir, ServerHandle, NfsUrl) {
    let d = std::env::temp_dir().join(format!("nsperf-nfs-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let s = Server::bind(&ServerConfig {
        dir: d.clone(),
        bind: "127.0.0.1:0".parse().unwrap(),
        read_only,
        portmap_111: false,
    })
    .unwrap();
    let url: NfsUrl = format!("nfs://127.0.0.1:{}{}", s.local_addr().port(), s.export())
        .parse()
        .unwrap();
    (Dir(d), s.spawn(), url)
}

const T: Duration = Duration::from_secs(10);

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(2654435761) >> 13) as u8
}

#[test]
fn write_then_read_back_with_many_in_flight() {
    let (dir, _srv, url) = serve("rw", false);
    let mut s = Session::open(&url, T).unwrap();
    assert_eq!(s.fsinfo.rtmax, 1 << 20);
    let fh = s.client.create(&s.dir.clone(), ".nsperf-t-1").unwrap();
    let bs = 65536 + 3; // not a multiple of 4: exercises the XDR padding
    let depth = 8;
    let blocks = 64;
    let mut bufs: Vec<Vec<u8>> = (0..depth).map(|_| vec![0u8; bs]).collect();
    let mut p = Pipeline::connect(s.nfs_addr, fh, depth, Stable::Unstable, T).unwrap();
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: the buffers outlive the pipeline's use of them (dropped after it).
        unsafe { p.set_buffer(i as u32, b.as_mut_ptr(), bs) };
    }
    let mut done: Vec<Completion> = Vec::new();
    let mut next = 0usize;
    let mut free: Vec<u32> = (0..depth as u32).collect();
    let mut slot_block = vec![0usize; depth];
    let mut finished = 0;
    while finished < blocks {
        while next < blocks {
            let Some(slot) = free.pop() else { break };
            let b = &mut bufs[slot as usize];
            for (k, x) in b.iter_mut().enumerate() {
                *x = pattern(next * bs + k);
            }
            slot_block[slot as usize] = next;
            p.queue(DataOp::Write, (next * bs) as u64, bs, slot)
                .unwrap();
            next += 1;
        }
        done.clear();
        p.reap(1, &mut done).unwrap();
        for d in &done {
            assert_eq!(d.result, bs as i32);
            free.push(d.slot);
            finished += 1;
        }
    }
    p.commit(&mut done).unwrap();
    let on_disk = std::fs::read(dir.0.join(".nsperf-t-1")).unwrap();
    assert_eq!(on_disk.len(), blocks * bs);
    assert!(on_disk.iter().enumerate().all(|(i, &b)| b == pattern(i)));

    // Read back, out of order completion allowed.
    let (mut next, mut finished) = (0usize, 0);
    let mut free: Vec<u32> = (0..depth as u32).collect();
    while finished < blocks {
        while next < blocks {
            let Some(slot) = free.pop() else { break };
            bufs[slot as usize].fill(0);
            slot_block[slot as usize] = next;
            p.queue(DataOp::Read, (next * bs) as u64, bs, slot).unwrap();
            next += 1;
        }
        done.clear();
        p.reap(1, &mut done).unwrap();
        for d in &done {
            assert_eq!(d.result, bs as i32);
            let blk = slot_block[d.slot as usize];
            let b = &bufs[d.slot as usize];
            assert!(
                b.iter()
                    .enumerate()
                    .all(|(k, &x)| x == pattern(blk * bs + k)),
                "block {blk}"
            );
            free.push(d.slot);
            finished += 1;
        }
    }
    // Each reply's data went from the socket to its buffer, but for what came in the read
    // of its head (at most 1 KiB): not through the receive buffer (a quarter of each reply did).
    assert!(
        p.staged_read_bytes() <= (blocks * 1024) as u64,
        "{} of {} bytes read were staged",
        p.staged_read_bytes(),
        blocks * bs
    );
    drop(p);
    let d = s.dir;
    s.client.remove(&d, ".nsperf-t-1").unwrap();
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}

/// The server's own count: the data of every WRITE it took and every READ it answered,
/// exactly, and the calls (MOUNT, LOOKUP, CREATE, … counted too).
#[test]
fn the_server_counts_what_it_served() {
    let d = std::env::temp_dir().join(format!("nsperf-nfs-count-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let _dir = Dir(d.clone());
    let srv = Server::bind(&ServerConfig {
        dir: d,
        bind: "127.0.0.1:0".parse().unwrap(),
        read_only: false,
        portmap_111: false,
    })
    .unwrap();
    let served = srv.served();
    let url: NfsUrl = format!(
        "nfs://127.0.0.1:{}{}",
        srv.local_addr().port(),
        srv.export()
    )
    .parse()
    .unwrap();
    let _h = srv.spawn();
    assert_eq!(served.snapshot().bytes(), 0);
    let mut s = Session::open(&url, T).unwrap();
    let dir = s.dir;
    let fh = s.client.create(&dir, ".nsperf-c-1").unwrap();
    let block = vec![7u8; 10_000];
    for i in 0..5u64 {
        s.client
            .write(&fh, ".nsperf-c-1", i * 10_000, &block, Stable::Unstable)
            .unwrap();
    }
    let mut buf = vec![0u8; 30_000];
    let (got, _) = s.client.read(&fh, ".nsperf-c-1", 0, &mut buf).unwrap();
    assert_eq!(got, 30_000);
    // A read past the end of the file serves what there is.
    let (tail, _) = s.client.read(&fh, ".nsperf-c-1", 45_000, &mut buf).unwrap();
    assert_eq!(tail, 5_000);
    // A READ's data counts once the server's writev returned, which may be just after the
    // client has it: wait for it (bounded).
    let t0 = std::time::Instant::now();
    while served.snapshot().read_bytes < 35_000 && t0.elapsed() < T {
        std::thread::sleep(Duration::from_millis(1));
    }
    let c = served.snapshot();
    assert_eq!(c.write_bytes, 50_000);
    assert_eq!(c.read_bytes, 35_000);
    assert_eq!(c.bytes(), 85_000);
    assert!(c.calls >= 8, "{c:?}");
    // Unstable WRITEs synced nothing; a COMMIT and a FILE_SYNC WRITE are counted.
    assert_eq!((c.commits, c.stable_writes), (0, 0));
    s.client.commit(&fh, ".nsperf-c-1").unwrap();
    s.client
        .write(&fh, ".nsperf-c-1", 0, &block, Stable::FileSync)
        .unwrap();
    let c = served.snapshot();
    assert_eq!((c.commits, c.stable_writes), (1, 1));
    s.client.remove(&dir, ".nsperf-c-1").unwrap();
}

/// A file removed behind the server's back (`rm` on the server, as a benchmark script does
/// between runs of fio's nfs engine) is answered `STALE` and closed, not kept open holding
/// its space: the server kept every such file open until 256 had piled up (9 GiB of tmpfs
/// held by ten 1 GiB fio runs).
#[test]
fn a_file_removed_behind_the_servers_back_is_stale_and_closed() {
    let (dir, srv, url) = serve("gone", false);
    let mut s = Session::open(&url, T).unwrap();
    let d = s.dir;
    let fh = s.client.create(&d, "victim").unwrap();
    let block = vec![9u8; 64 << 10];
    s.client
        .write(&fh, "victim", 0, &block, Stable::Unstable)
        .unwrap();
    std::fs::remove_file(dir.0.join("victim")).unwrap();
    let open_deleted = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|p| p.starts_with(&dir.0) && p.to_string_lossy().ends_with("(deleted)"))
            .count()
    };
    // The server's housekeeping closes it within 200 ms, with no client request needed
    // (which would otherwise pay for freeing the file's pages: 70 ms for 1 GiB on tmpfs,
    // inside the next client's first WRITE).
    let t0 = std::time::Instant::now();
    while open_deleted() > 0 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(open_deleted(), 0, "the removed file is still open");
    assert!(
        t0.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t0.elapsed()
    );
    // And its handle is stale, as a kernel server answers.
    let e = s
        .client
        .write(&fh, "victim", 0, &block, Stable::Unstable)
        .unwrap_err();
    assert!(e.to_string().contains("STALE"), "{e}");
    drop(srv);
}

#[test]
fn missing_export_and_path_and_read_only() {
    let (_dir, _srv, url) = serve("err", true);
    let mut bad = url.clone();
    bad.path = "/no/such/export".into();
    let e = Session::open(&bad, T).unwrap_err();
    assert_eq!(e.failure(), Failure::NotFound, "{e}");
    let mut sub = url.clone();
    sub.path = format!("{}/missing", url.path);
    let e = Session::open(&sub, T).unwrap_err();
    assert_eq!(e.failure(), Failure::NotFound, "{e}");
    assert!(e.to_string().contains("missing"), "{e}");
    let mut s = Session::open(&url, T).unwrap();
    let d = s.dir;
    let e = s.client.create(&d, ".nsperf-x").unwrap_err();
    assert_eq!(e.failure(), Failure::Permission, "{e}");
    let mut closed = url.clone();
    closed.port = Some(1);
    let e = Session::open(&closed, Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.failure(), Failure::Connect, "{e}");
}

#[test]
fn server_dying_mid_run_is_peer_lost() {
    let (_dir, mut srv, url) = serve("die", false);
    let mut s = Session::open(&url, T).unwrap();
    let d = s.dir;
    let fh = s.client.create(&d, ".nsperf-die").unwrap();
    let mut buf = vec![7u8; 1 << 20];
    let mut p = Pipeline::connect(s.nfs_addr, fh, 1, Stable::Unstable, T).unwrap();
    // SAFETY: buf outlives the pipeline.
    unsafe { p.set_buffer(0, buf.as_mut_ptr(), buf.len()) };
    let mut done = Vec::new();
    p.queue(DataOp::Write, 0, 1 << 20, 0).unwrap();
    p.reap(1, &mut done).unwrap();
    srv.stop();
    let mut err = None;
    for i in 0..50 {
        done.clear();
        let r = p
            .queue(DataOp::Read, 0, 1 << 20, 0)
            .and_then(|()| p.reap(1, &mut done));
        if let Err(e) = r {
            err = Some(e);
            break;
        }
        assert!(i < 49, "the pipeline never noticed the server was gone");
    }
    let e: NfsError = err.unwrap();
    assert_eq!(e.failure(), Failure::PeerLost, "{e}");
    assert!(!e.to_string().contains('\n'));
}

/// A READ's data counts as served once the client acknowledged it, not when the server
/// queued it: a client that does not read its socket holds the reply in the server's send
/// queue, and the count stays below it (through a 50 ms path, 20 clients' queued replies made
/// a window's count 8 % larger than what they received in it).
#[test]
fn a_read_counts_once_the_client_acknowledged_it() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    use crate::proto::{NFS_PROG, NFS_VERS, proc3};
    use crate::rpc::{self, AuthSys};
    use crate::xdr::{put_u32, put_u64};

    let (_dir, h, url) = serve("acked", false);
    let mut s = Session::open(&url, T).unwrap();
    let dir = s.dir;
    let fh = s.client.create(&dir, ".nsperf-a-1").unwrap();
    const N: usize = 1 << 20;
    s.client
        .write(&fh, ".nsperf-a-1", 0, &vec![3u8; N], Stable::Unstable)
        .unwrap();
    let before = h.served().read_bytes;
    // A raw connection with a small locked receive buffer that asks for 1 MiB and waits.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", url.port.unwrap())).unwrap();
    let small: libc::c_int = 16 << 10;
    // SAFETY: one int option on a socket this test owns.
    unsafe {
        libc::setsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let mut call = Vec::new();
    let start = rpc::begin_call(
        &mut call,
        1,
        NFS_PROG,
        NFS_VERS,
        proc3::READ,
        &AuthSys::current(),
    );
    fh.encode(&mut call);
    put_u64(&mut call, 0);
    put_u32(&mut call, N as u32);
    rpc::finish_record(&mut call, start, 0);
    c.write_all(&call).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let held = h.served().read_bytes - before;
    assert!(
        held < (N / 2) as u64,
        "{held} B counted while the client holds at most its 16 KiB buffer"
    );
    // Once the client takes the reply, all of it counts.
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 << 10];
    c.set_read_timeout(Some(T)).unwrap();
    while got < N {
        got += c.read(&mut buf).unwrap();
    }
    let t0 = std::time::Instant::now();
    while h.served().read_bytes - before < N as u64 && t0.elapsed() < T {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(h.served().read_bytes - before, N as u64);
    s.client.remove(&dir, ".nsperf-a-1").unwrap();
}
