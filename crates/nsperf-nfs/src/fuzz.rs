//! Bodies of the fuzz targets (`fuzz/fuzz_targets/nfs_*.rs`), also run as unit tests on
//! generated inputs: whatever the bytes, the decoders return a value or an error, never
//! panic, and never read past what they were given.

use crate::proto::{self, Attr, FsInfo};
use crate::rpc;
use crate::xdr::XdrReader;

/// Every reply decoder of the client on `data`: RPC reply header, then each result type;
/// and `data` as an `nfs://` URL (what the command line and plans hand the engine).
pub fn reply(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = s.parse::<crate::NfsUrl>();
    }
    let mut r = XdrReader::new(data);
    let _ = rpc::parse_reply(&mut r);
    let rest = r.rest();
    let _ = proto::decode_read_head(&mut XdrReader::new(rest));
    let _ = proto::decode_write(&mut XdrReader::new(rest));
    let _ = Attr::decode(&mut XdrReader::new(rest));
    let _ = FsInfo::decode(&mut XdrReader::new(rest));
    let _ = proto::decode_post_op_attr(&mut XdrReader::new(rest));
    let _ = proto::skip_wcc_data(&mut XdrReader::new(rest));
    let _ = proto::decode_readdir(&mut XdrReader::new(rest));
    let _ = proto::FileHandle::decode(&mut XdrReader::new(rest));
    let _ = proto::SetAttr::decode(&mut XdrReader::new(rest));
    v4_reply(rest);
    replay_reply(data);
}

/// The replay's reply head on `data`, for requests of each kind it parses a result of, the
/// xid landing on each of them.
fn replay_reply(data: &[u8]) {
    use crate::replay::{Call, CallOp, Target, Trigger};
    let call = |op| Call::new(op, Trigger::Start);
    let calls = [
        call(CallOp::Read {
            file: 0,
            offset: 0,
            count: 4096,
        }),
        call(CallOp::Write {
            file: 0,
            offset: 0,
            count: 4096,
            stable: crate::Stable::Unstable,
        }),
        call(CallOp::Null),
        call(CallOp::Getattr(Target::Dir)),
    ];
    let xid = data
        .get(..4)
        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    for k in 0..5u32 {
        let _ = crate::replay::conn::reply_head(data, xid.wrapping_sub(k), &calls, |i| i != 3);
        for seq in [false, true] {
            let _ =
                crate::replay::v4::reply_head(data, xid.wrapping_sub(k), &calls, |i| i != 3, seq);
        }
    }
}

/// The NFSv4.1 decoders on `rest`: a COMPOUND reply's results walked as the data path walks
/// them, and each result body.
fn v4_reply(rest: &[u8]) {
    use crate::v4::wire::{self, Results, op};
    let mut r = XdrReader::new(rest);
    if let Ok(mut res) = Results::begin(&mut r, "fuzz") {
        if res.next(op::SEQUENCE, "").is_ok() && res.sequence_rest(0).is_ok() {
            for o in [op::PUTFH, op::OPEN, op::GETFH, op::GETATTR] {
                if res.status_of(o).is_err() {
                    break;
                }
            }
        }
    }
    let _ = wire::decode_open(&mut XdrReader::new(rest));
    let _ = wire::decode_attrs(&mut XdrReader::new(rest));
    let _ = wire::decode_readdir(&mut XdrReader::new(rest), &mut Vec::new());
    let _ = wire::decode_write(&mut XdrReader::new(rest));
    let _ = proto::FileHandle::decode4(&mut XdrReader::new(rest));
}

/// The server's call decoding and dispatch on `data`, against an empty read-only export.
pub fn call(data: &[u8]) {
    use std::sync::OnceLock;
    static CX: OnceLock<Option<crate::server::Context>> = OnceLock::new();
    let cx = CX.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("nsperf-nfs-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let fs = crate::server::ExportFs::new(&dir, 1, true).ok()?;
        Some(crate::server::Context {
            export: fs.root().to_string_lossy().into_owned(),
            fs,
            port: 2049,
            verifier: 1,
            served: Default::default(),
        })
    });
    let Some(cx) = cx else { return };
    let mut r = XdrReader::new(data);
    if let Ok(h) = rpc::parse_call(&mut r) {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 4096];
        let n = crate::server::dispatch(
            cx,
            "127.0.0.1:2049".parse().unwrap_or_else(|_| unreachable!()),
            &h,
            &mut r,
            &mut out,
            &mut buf,
        );
        assert!(n <= buf.len());
        // The reply parses as a reply.
        let mut rr = XdrReader::new(&out[4..]);
        assert!(rpc::parse_reply(&mut rr).is_ok() || out.len() >= 16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::{put_opaque, put_u32, put_u64};

    /// Mutations of valid messages: every prefix, and every single-byte change.
    fn mutate(valid: &[u8], f: fn(&[u8])) {
        for cut in 0..=valid.len() {
            f(&valid[..cut]);
        }
        let mut m = valid.to_vec();
        for i in 0..m.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let old = m[i];
                m[i] = v;
                f(&m);
                m[i] = old;
            }
        }
    }

    #[test]
    fn reply_decoders_survive_mutations() {
        let mut b = Vec::new();
        let s = rpc::begin_reply(&mut b, 9, rpc::AcceptStat::Success);
        put_u32(&mut b, 0);
        proto::encode_post_op_attr(&mut b, None);
        put_u32(&mut b, 5);
        put_u32(&mut b, 1);
        put_opaque(&mut b, b"hello");
        rpc::finish_record(&mut b, s, 0);
        mutate(&b[4..], reply);
    }

    #[test]
    fn readdir_reply_survives_mutations() {
        let mut b = Vec::new();
        let s = rpc::begin_reply(&mut b, 9, rpc::AcceptStat::Success);
        put_u32(&mut b, 0);
        proto::encode_post_op_attr(&mut b, None);
        put_u64(&mut b, 7);
        for (i, name) in [".nsperf-1@0a1b2c3d4e5f-seqwrite-1", "x"]
            .iter()
            .enumerate()
        {
            put_u32(&mut b, 1);
            put_u64(&mut b, 40 + i as u64);
            put_opaque(&mut b, name.as_bytes());
            put_u64(&mut b, i as u64 + 1);
        }
        put_u32(&mut b, 0);
        put_u32(&mut b, 1);
        rpc::finish_record(&mut b, s, 0);
        mutate(&b[4..], reply);
    }

    #[test]
    fn server_dispatch_survives_mutations() {
        let cred = rpc::AuthSys::new("t", 0, 0);
        for (prog, vers, p) in [
            (proto::NFS_PROG, 3, proto::proc3::READ),
            (proto::NFS_PROG, 3, proto::proc3::LOOKUP),
            (proto::NFS_PROG, 3, proto::proc3::WRITE),
            (proto::NFS_PROG, 3, proto::proc3::READDIR),
            (proto::MOUNT_PROG, 3, proto::MOUNT_MNT),
            (proto::PMAP_PROG, 2, proto::PMAP_GETPORT),
        ] {
            let mut b = Vec::new();
            let s = rpc::begin_call(&mut b, 1, prog, vers, p, &cred);
            put_opaque(&mut b, &[0u8; 16]);
            put_u64(&mut b, 0);
            put_u32(&mut b, 4);
            put_u32(&mut b, 0);
            put_opaque(&mut b, b"abcd");
            rpc::finish_record(&mut b, s, 0);
            mutate(&b[4..], call);
        }
    }
}
