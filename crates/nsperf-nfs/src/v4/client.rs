//! The NFSv4 control path: the client's identity at the server ([`Lease`]: in 4.1
//! EXCHANGE_ID, then one session per connection with CREATE_SESSION; in 4.0 SETCLIENTID and
//! its confirmation), and [`Client4`], the blocking connection that finds the target
//! directory from the server's root (PUTROOTFH, LOOKUP) and creates, opens, lists, reads,
//! writes, commits and removes, one COMPOUND at a time (on slot 0 of its session in 4.1; in
//! 4.0 with the open-owner's sequence numbers and OPEN_CONFIRM).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::wire::{
    self, Attr4, Compound, NF4DIR, PROC_COMPOUND, Results, SessionId, Stateid, attr, op,
};
use crate::error::NfsError;
use crate::proto::{FileHandle, NFS_PROG, NfsStat, Stable};
use crate::rpc_conn::{RpcConn, Timeouts, resolve};
use crate::url::NfsUrl;

/// The NFSv4 port when the URL gives none (RFC 7530 3.1: no portmapper).
pub const NFS4_PORT: u16 = 2049;

/// Statuses after which a 4.0 open-owner's sequence number does not move (RFC 7530 9.1.7).
const SEQID_KEPT: [u32; 8] = [
    10022, // STALE_CLIENTID
    10023, // STALE_STATEID
    10025, // BAD_STATEID
    10026, // BAD_SEQID
    10036, // BADXDR
    10018, // RESOURCE
    10020, // NOFILEHANDLE
    10019, // MOVED
];

/// The client's identity at one server, shared by its control connection and every data
/// connection (each with a session of its own).
#[derive(Debug)]
pub struct Lease {
    /// The minor version spoken: 0 or 1.
    pub minor: u32,
    clientid: u64,
    /// CREATE_SESSION's sequence: the last one the server accepted. Held while a
    /// CREATE_SESSION is in flight, so that sessions made from several threads stay in order.
    seq: Mutex<u32>,
    /// Where the server answers.
    pub addr: SocketAddr,
    /// Connect and reply timeouts.
    pub timeouts: Timeouts,
}

impl Lease {
    /// A new client of this process at the server, on `conn`: EXCHANGE_ID in 4.1,
    /// SETCLIENTID and SETCLIENTID_CONFIRM in 4.0.
    fn establish(
        conn: &mut RpcConn,
        addr: SocketAddr,
        t: Timeouts,
        minor: u32,
    ) -> Result<Lease, NfsError> {
        let now = nsperf_core::clock::unix_time_ns();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let owner = format!("nsperf-{}-{}-{now}", host.trim(), std::process::id());
        let what = if minor == 0 {
            "SETCLIENTID"
        } else {
            "EXCHANGE_ID"
        };
        let mut r = conn.call(what, NFS_PROG, wire::NFS_V4, PROC_COMPOUND, |b| {
            let mut c = Compound::begin(b, minor);
            if minor == 0 {
                c.setclientid(now, owner.as_bytes());
            } else {
                c.exchange_id(now, owner.as_bytes());
            }
            c.finish();
        })?;
        let mut res = Results::begin(&mut r, what)?;
        let x = res.xdr();
        if minor == 0 {
            let r = res.next(op::SETCLIENTID, "")?;
            let clientid = r.u64().map_err(&x)?;
            let confirm = r.u64().map_err(&x)?;
            let mut r = conn.call(
                "SETCLIENTID_CONFIRM",
                NFS_PROG,
                wire::NFS_V4,
                PROC_COMPOUND,
                |b| {
                    let mut c = Compound::begin(b, 0);
                    c.setclientid_confirm(clientid, confirm);
                    c.finish();
                },
            )?;
            Results::begin(&mut r, "SETCLIENTID_CONFIRM")?.next(op::SETCLIENTID_CONFIRM, "")?;
            return Ok(Lease {
                minor,
                clientid,
                seq: Mutex::new(0),
                addr,
                timeouts: t,
            });
        }
        let r = res.next(op::EXCHANGE_ID, "")?;
        let clientid = r.u64().map_err(&x)?;
        let seq = r.u32().map_err(&x)?;
        Ok(Lease {
            minor,
            clientid,
            seq: Mutex::new(seq.wrapping_sub(1)),
            addr,
            timeouts: t,
        })
    }

    /// CREATE_SESSION on `conn` (which the server then binds to the session) with up to
    /// `slots` requests in flight of up to `max_io` bytes of data; the session and the slots
    /// granted.
    pub fn create_session(
        &self,
        conn: &mut RpcConn,
        slots: u32,
        max_io: u32,
    ) -> Result<(SessionId, u32), NfsError> {
        let mut last = self.seq.lock().unwrap_or_else(|p| p.into_inner());
        let seq = last.wrapping_add(1);
        let mut r = conn.call(
            "CREATE_SESSION",
            NFS_PROG,
            wire::NFS_V4,
            PROC_COMPOUND,
            |b| {
                let mut c = Compound::begin(b, 1);
                c.create_session(self.clientid, seq, slots, max_io);
                c.finish();
            },
        )?;
        let mut res = Results::begin(&mut r, "CREATE_SESSION")?;
        let x = res.xdr();
        let r = res.next(op::CREATE_SESSION, "")?;
        let mut sid = [0u8; 16];
        sid.copy_from_slice(r.fixed(16).map_err(&x)?);
        r.skip(8 + 4 * 5).map_err(&x)?; // sequence, flags; the fore channel up to its slots
        let granted = r.u32().map_err(&x)?.clamp(1, slots.max(1));
        *last = seq;
        Ok((sid, granted))
    }
}

/// A target directory reached through NFSv4, and the control connection to it. Files it
/// opened are closed, and (in 4.1) its session and client destroyed, when it is dropped.
#[derive(Debug)]
pub struct Client4 {
    conn: RpcConn,
    lease: Arc<Lease>,
    /// 4.1: the session of this connection.
    sid: Option<SessionId>,
    /// 4.1: slot 0's last sequence id; 4.0: the open-owner's next sequence id.
    seq: u32,
    owner: Vec<u8>,
    /// The target.
    pub url: NfsUrl,
    /// The directory named by the URL.
    pub dir: FileHandle,
    /// Its attributes (the server's READ and WRITE limits among them).
    pub dir_attr: Attr4,
    opens: Arc<Mutex<HashMap<FileHandle, Stateid>>>,
}

impl Client4 {
    /// Connects to the server of `url` (port 2049 unless the URL gives one) with NFSv4
    /// minor version `minor` (0 or 1), becomes a client (with a session in 4.1), and looks up
    /// the directory of the URL from the server's root.
    pub fn connect(url: &NfsUrl, t: Timeouts, minor: u32) -> Result<Client4, NfsError> {
        let addr = resolve(&url.host, url.port.unwrap_or(NFS4_PORT))?;
        let mut conn = RpcConn::connect_within("NFS", addr, t)?;
        let lease = Arc::new(Lease::establish(&mut conn, addr, t, minor)?);
        let sid = match minor {
            0 => None,
            _ => Some(lease.create_session(&mut conn, 1, 1 << 20)?.0),
        };
        let mut c = Client4 {
            conn,
            lease,
            sid,
            seq: 0,
            owner: format!("nsperf-open-{}", std::process::id()).into_bytes(),
            url: url.clone(),
            dir: FileHandle::new(&[]).unwrap_or_else(|| unreachable!("an empty handle fits")),
            dir_attr: Attr4::default(),
            opens: Arc::default(),
        };
        if minor > 0 {
            match c.call(
                "RECLAIM_COMPLETE",
                "",
                |k| k.reclaim_complete(),
                |res| res.status_of(op::RECLAIM_COMPLETE),
            )? {
                NfsStat::OK | wire::stat::COMPLETE_ALREADY => {}
                stat => {
                    return Err(NfsError::nfs4("RECLAIM_COMPLETE", "", stat));
                }
            }
        }
        let path = url.path.clone();
        let comps: Vec<String> = url.components().map(str::to_string).collect();
        let (dir, a) = c.call(
            "LOOKUP",
            &path,
            |k| {
                k.putrootfh();
                for name in &comps {
                    k.lookup(name);
                }
                k.getfh();
                k.getattr(&[attr::TYPE, attr::MAXREAD, attr::MAXWRITE]);
            },
            |res| {
                res.next(op::PUTROOTFH, "/")?;
                for _ in &comps {
                    res.next(op::LOOKUP, &path)?;
                }
                fh_and_attr(res, &path)
            },
        )?;
        if a.ftype != NF4DIR {
            return Err(NfsError::NotADirectory(path));
        }
        c.dir = dir;
        c.dir_attr = a;
        Ok(c)
    }

    /// The client's identity, for data connections.
    pub fn lease(&self) -> Arc<Lease> {
        Arc::clone(&self.lease)
    }

    /// The stateids of the files this client holds open, by handle (for data connections).
    pub fn opens(&self) -> Arc<Mutex<HashMap<FileHandle, Stateid>>> {
        Arc::clone(&self.opens)
    }

    /// The minor version spoken.
    pub fn minor(&self) -> u32 {
        self.lease.minor
    }

    /// One COMPOUND: in 4.1 SEQUENCE on slot 0 first; then what `ops` adds; `read` reads the
    /// results after SEQUENCE's.
    fn call<T>(
        &mut self,
        what: &'static str,
        path: &str,
        ops: impl FnOnce(&mut Compound<'_>),
        read: impl FnOnce(&mut Results<'_, '_>) -> Result<T, NfsError>,
    ) -> Result<T, NfsError> {
        let seq = self.seq.wrapping_add(1);
        let (sid, minor) = (self.sid, self.lease.minor);
        let mut r = self
            .conn
            .call(what, NFS_PROG, wire::NFS_V4, PROC_COMPOUND, |b| {
                let mut c = Compound::begin(b, minor);
                if let Some(sid) = &sid {
                    c.sequence(sid, seq, 0, 0);
                }
                ops(&mut c);
                c.finish();
            })?;
        let mut res = Results::begin(&mut r, what)?;
        if sid.is_some() {
            res.next(op::SEQUENCE, path)?;
            res.sequence_rest(0)?;
            self.seq = seq;
        }
        read(&mut res)
    }

    /// A 4.0 open-owner operation (OPEN, OPEN_CONFIRM, CLOSE) was reached with status `st`:
    /// the owner's sequence number moves on unless the status says the server did not take
    /// the operation (RFC 7530 9.1.7).
    fn owner_step(&mut self, st: NfsStat) {
        if self.lease.minor == 0 && !SEQID_KEPT.contains(&st.0) {
            self.seq = self.seq.wrapping_add(1);
        }
    }

    /// The open-owner sequence id to send (0 in 4.1, where it is ignored).
    fn owner_seq(&self) -> u32 {
        if self.lease.minor == 0 { self.seq } else { 0 }
    }

    /// The NULL procedure (a round trip that asks nothing of the server).
    pub fn null(&mut self) -> Result<(), NfsError> {
        self.conn
            .call("NULL", NFS_PROG, wire::NFS_V4, 0, |_| {})
            .map(drop)
    }

    /// The stateid READ and WRITE name `fh` with: this client's open of it (seqid 0 in 4.1),
    /// else the anonymous stateid.
    pub fn stateid_of(&self, fh: &FileHandle) -> Stateid {
        let opens = self.opens.lock().unwrap_or_else(|p| p.into_inner());
        // Without an open of this client, the anonymous stateid (all zeros, RFC 8881 8.2.3).
        let st = opens.get(fh).copied().unwrap_or_default();
        if self.lease.minor > 0 {
            st.current()
        } else {
            st
        }
    }

    /// LOOKUP of `name` in `dir`: its handle and attributes.
    pub fn lookup(
        &mut self,
        dir: &FileHandle,
        name: &str,
    ) -> Result<(FileHandle, Attr4), NfsError> {
        let dir = *dir;
        self.call(
            "LOOKUP",
            name,
            |k| {
                k.putfh(&dir);
                k.lookup(name);
                k.getfh();
                k.getattr(&[attr::TYPE, attr::SIZE]);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                res.next(op::LOOKUP, name)?;
                fh_and_attr(res, name)
            },
        )
    }

    /// GETATTR of `fh` (named `name` in messages).
    pub fn getattr(&mut self, fh: &FileHandle, name: &str) -> Result<Attr4, NfsError> {
        let fh = *fh;
        self.call(
            "GETATTR",
            name,
            |k| {
                k.putfh(&fh);
                k.getattr(&[attr::TYPE, attr::SIZE]);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let x = res.xdr();
                wire::decode_attrs(res.next(op::GETATTR, name)?).map_err(x)
            },
        )
    }

    /// Creates the new file `name` in `dir` (an existing one is an error) and keeps it open
    /// for reading and writing until [`Client4::close`].
    pub fn create(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        let (dir, clientid, owner) = (*dir, self.lease.clientid, self.owner.clone());
        let seqid = self.owner_seq();
        let mut reached = None;
        let r = self.call(
            "OPEN",
            name,
            |k| {
                k.putfh(&dir);
                k.open_create(seqid, clientid, &owner, name);
                k.getfh();
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let st = res.status_of(op::OPEN)?;
                reached = Some(st);
                let x = res.xdr();
                let r = res.reader_if(st, op::OPEN, name)?;
                let (stateid, rflags) = wire::decode_open(r).map_err(&x)?;
                let fh = FileHandle::decode4(res.next(op::GETFH, name)?).map_err(&x)?;
                Ok((fh, stateid, rflags))
            },
        );
        if let Some(st) = reached {
            self.owner_step(st);
        }
        let (fh, mut stateid, rflags) = r?;
        if rflags & wire::OPEN4_RESULT_CONFIRM != 0 {
            stateid = self.open_confirm(&fh, stateid, name)?;
        }
        self.opens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fh, stateid);
        Ok(fh)
    }

    /// OPEN_CONFIRM (4.0, the first OPEN of an open-owner): the confirmed stateid.
    fn open_confirm(
        &mut self,
        fh: &FileHandle,
        st: Stateid,
        name: &str,
    ) -> Result<Stateid, NfsError> {
        let (fh, seqid) = (*fh, self.owner_seq());
        let mut reached = None;
        let r = self.call(
            "OPEN_CONFIRM",
            name,
            |k| {
                k.putfh(&fh);
                k.open_confirm(&st, seqid);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let s = res.status_of(op::OPEN_CONFIRM)?;
                reached = Some(s);
                let x = res.xdr();
                let r = res.reader_if(s, op::OPEN_CONFIRM, name)?;
                wire::decode_stateid(r).map_err(x)
            },
        );
        if let Some(s) = reached {
            self.owner_step(s);
        }
        r
    }

    /// CLOSE of a file this client opened (nothing for another).
    pub fn close(&mut self, fh: &FileHandle, name: &str) -> Result<(), NfsError> {
        let st = self
            .opens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(fh);
        let Some(st) = st else { return Ok(()) };
        let (fh, seqid) = (*fh, self.owner_seq());
        let mut reached = None;
        let r = self.call(
            "CLOSE",
            name,
            |k| {
                k.putfh(&fh);
                k.close(seqid, &st);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let s = res.status_of(op::CLOSE)?;
                reached = Some(s);
                let x = res.xdr();
                let r = res.reader_if(s, op::CLOSE, name)?;
                wire::decode_stateid(r).map(|_| ()).map_err(x)
            },
        );
        if let Some(s) = reached {
            self.owner_step(s);
        }
        r
    }

    /// Creates the directory `name` in `dir`.
    pub fn mkdir(&mut self, dir: &FileHandle, name: &str) -> Result<FileHandle, NfsError> {
        let dir = *dir;
        self.call(
            "CREATE",
            name,
            |k| {
                k.putfh(&dir);
                k.mkdir(name);
                k.getfh();
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let x = res.xdr();
                wire::skip_create(res.next(op::CREATE, name)?).map_err(&x)?;
                FileHandle::decode4(res.next(op::GETFH, name)?).map_err(x)
            },
        )
    }

    /// REMOVE of the file or empty directory `name` in `dir`.
    pub fn remove(&mut self, dir: &FileHandle, name: &str) -> Result<(), NfsError> {
        let dir = *dir;
        self.call(
            "REMOVE",
            name,
            |k| {
                k.putfh(&dir);
                k.remove(name);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let x = res.xdr();
                wire::skip_change_info(res.next(op::REMOVE, name)?).map_err(x)
            },
        )
    }

    /// The names in `dir` (named `path` in messages).
    pub fn readdir(&mut self, dir: &FileHandle, path: &str) -> Result<Vec<String>, NfsError> {
        let dir = *dir;
        let mut names = Vec::new();
        let (mut cookie, mut verf) = (0u64, [0u8; 8]);
        loop {
            let (c, v, eof) = self.call(
                "READDIR",
                path,
                |k| {
                    k.putfh(&dir);
                    k.readdir(cookie, verf);
                },
                |res| {
                    res.next(op::PUTFH, path)?;
                    let x = res.xdr();
                    wire::decode_readdir(res.next(op::READDIR, path)?, &mut names).map_err(x)
                },
            )?;
            if eof || c == 0 {
                return Ok(names);
            }
            (cookie, verf) = (c, v);
        }
    }

    /// SETATTR of the size of `fh`.
    pub fn set_size(&mut self, fh: &FileHandle, name: &str, size: u64) -> Result<(), NfsError> {
        let (fh, st) = (*fh, self.stateid_of(fh));
        self.call(
            "SETATTR",
            name,
            |k| {
                k.putfh(&fh);
                k.set_size(&st, size);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let x = res.xdr();
                wire::skip_setattr(res.next(op::SETATTR, name)?).map_err(x)
            },
        )
    }

    /// One READ into `buf` at `off`: bytes read and whether the file ends there.
    pub fn read(
        &mut self,
        fh: &FileHandle,
        name: &str,
        off: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool), NfsError> {
        let (fh, st) = (*fh, self.stateid_of(fh));
        let want = buf.len().min(u32::MAX as usize) as u32;
        self.call(
            "READ",
            name,
            |k| {
                k.putfh(&fh);
                k.read(&st, off, want);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let x = res.xdr();
                let r = res.next(op::READ, name)?;
                let eof = r.bool().map_err(&x)?;
                let data = r.opaque(want as usize).map_err(&x)?;
                buf[..data.len()].copy_from_slice(data);
                Ok((data.len(), eof))
            },
        )
    }

    /// One WRITE of `data` at `off` with `stable`: bytes written.
    pub fn write(
        &mut self,
        fh: &FileHandle,
        name: &str,
        off: u64,
        data: &[u8],
        stable: Stable,
    ) -> Result<u32, NfsError> {
        let (fh, st) = (*fh, self.stateid_of(fh));
        self.call(
            "WRITE",
            name,
            |k| {
                k.putfh(&fh);
                k.write(&st, off, stable, data);
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let x = res.xdr();
                wire::decode_write(res.next(op::WRITE, name)?)
                    .map(|w| w.0)
                    .map_err(x)
            },
        )
    }

    /// COMMIT of everything written to `fh`: the server's write verifier.
    pub fn commit(&mut self, fh: &FileHandle, name: &str) -> Result<u64, NfsError> {
        let fh = *fh;
        self.call(
            "COMMIT",
            name,
            |k| {
                k.putfh(&fh);
                k.commit();
            },
            |res| {
                res.next(op::PUTFH, name)?;
                let x = res.xdr();
                res.next(op::COMMIT, name)?.u64().map_err(x)
            },
        )
    }
}

impl Drop for Client4 {
    fn drop(&mut self) {
        // Best effort: close what is open, then end the session and the client (the
        // server would let them expire with the lease).
        let open: Vec<FileHandle> = self
            .opens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect();
        for fh in open {
            let _ = self.close(&fh, "");
        }
        let (Some(sid), clientid) = (self.sid, self.lease.clientid) else {
            // 4.0 has no way to end a client: its state goes with the lease.
            return;
        };
        let _ = self.conn.call(
            "DESTROY_SESSION",
            NFS_PROG,
            wire::NFS_V4,
            PROC_COMPOUND,
            |b| {
                let mut c = Compound::begin(b, 1);
                c.destroy_session(&sid);
                c.finish();
            },
        );
        let _ = self.conn.call(
            "DESTROY_CLIENTID",
            NFS_PROG,
            wire::NFS_V4,
            PROC_COMPOUND,
            |b| {
                let mut c = Compound::begin(b, 1);
                c.destroy_clientid(clientid);
                c.finish();
            },
        );
    }
}

/// GETFH's and GETATTR's results.
fn fh_and_attr(res: &mut Results<'_, '_>, path: &str) -> Result<(FileHandle, Attr4), NfsError> {
    let x = res.xdr();
    let fh = FileHandle::decode4(res.next(op::GETFH, path)?).map_err(&x)?;
    let a = wire::decode_attrs(res.next(op::GETATTR, path)?).map_err(&x)?;
    Ok((fh, a))
}
