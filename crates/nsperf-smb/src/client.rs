//! The control path: one connection, session and tree (share) per [`Client`], blocking calls
//! (each runs the smb2 crate's future to completion on this client's own single-threaded
//! tokio runtime). Files are created with `FILE_CREATE` (never an existing file), opened
//! with read and write access, and shared for read, write and delete, so the data
//! connections of [`crate::Pipeline`] can open them beside this one.

use std::future::Future;
use std::time::Duration;

use smb2::client::Session;
use smb2::client::connection::Connection;
use smb2::msg::create::{
    CreateDisposition, CreateRequest, CreateResponse, ImpersonationLevel, ShareAccess,
};
use smb2::msg::flush::FlushRequest;
use smb2::pack::{ReadCursor, Unpack};
use smb2::types::flags::{FileAccessMask, FileAttributes};
use smb2::types::status::NtStatus;
use smb2::types::{Command, FileId, OplockLevel};
use smb2::{ClientConfig, SmbClient, Tree};
use std::sync::Arc;

use crate::sign::Signer;
use crate::transport::{Half, Tcp};

use crate::creds::Credentials;
use crate::error::SmbError;
use crate::url::SmbUrl;

/// How long a silent server is waited for by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the TCP connection may take to be made, by default: an unreachable server fails
/// in seconds, not after the reply timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a wait looks at the Ctrl-C flag.
const TICK: Duration = Duration::from_millis(200);
const FILE_NON_DIRECTORY_FILE: u32 = 0x0000_0040;

/// An SMB dialect (MS-SMB2 2.2.3), written as its revision (`3.1.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dialect {
    /// SMB 2.0.2.
    Smb2_0_2,
    /// SMB 2.1.
    Smb2_1,
    /// SMB 3.0.
    Smb3_0,
    /// SMB 3.0.2.
    Smb3_0_2,
    /// SMB 3.1.1.
    Smb3_1_1,
}

impl Dialect {
    /// Every dialect, oldest first.
    pub const ALL: [Dialect; 5] = [
        Dialect::Smb2_0_2,
        Dialect::Smb2_1,
        Dialect::Smb3_0,
        Dialect::Smb3_0_2,
        Dialect::Smb3_1_1,
    ];
}

impl From<smb2::types::Dialect> for Dialect {
    fn from(d: smb2::types::Dialect) -> Dialect {
        use smb2::types::Dialect as D;
        match d {
            D::Smb2_0_2 => Dialect::Smb2_0_2,
            D::Smb2_1 => Dialect::Smb2_1,
            D::Smb3_0 => Dialect::Smb3_0,
            D::Smb3_0_2 => Dialect::Smb3_0_2,
            D::Smb3_1_1 => Dialect::Smb3_1_1,
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dialect::Smb2_0_2 => "2.0.2",
            Dialect::Smb2_1 => "2.1",
            Dialect::Smb3_0 => "3.0",
            Dialect::Smb3_0_2 => "3.0.2",
            Dialect::Smb3_1_1 => "3.1.1",
        })
    }
}

/// What NEGOTIATE settled (for reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Dialect.
    pub dialect: Dialect,
    /// Largest READ the server allows (MaxReadSize).
    pub max_read: u32,
    /// Largest WRITE the server allows (MaxWriteSize).
    pub max_write: u32,
    /// The data path's requests signed ([`data_signed`]).
    pub signed: bool,
    /// Guest or anonymous session.
    pub guest: bool,
}

/// One entry of a directory listing ([`Client::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its name.
    pub name: String,
    /// True for a directory.
    pub is_dir: bool,
    /// Its size in bytes (0 for a directory).
    pub size: u64,
}

/// A connection to a share, with the target directory inside it.
pub struct Client {
    pub(crate) rt: tokio::runtime::Runtime,
    // Kept for the session's lifetime (none on a direct data connection).
    _client: Option<SmbClient>,
    pub(crate) conn: Connection,
    pub(crate) tree: Tree,
    /// The target.
    pub url: SmbUrl,
    /// What was negotiated.
    pub negotiated: Negotiated,
    /// WRITEs ask for WRITE_THROUGH (stable before the reply: `--fsync each`).
    pub write_through: bool,
    addr: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("negotiated", &self.negotiated)
            .finish()
    }
}

/// Runs `f` to completion on `rt`, giving up when Ctrl-C was pressed.
pub(crate) fn block_on<F: Future>(
    rt: &tokio::runtime::Runtime,
    f: F,
) -> Result<F::Output, SmbError> {
    rt.block_on(async {
        let mut f = std::pin::pin!(f);
        loop {
            match tokio::time::timeout(TICK, &mut f).await {
                Ok(v) => return Ok(v),
                Err(_) if nsperf_core::signal::interrupted() => return Err(SmbError::Interrupted),
                Err(_) => {}
            }
        }
    })
}

/// Whether the data path signs its READs, WRITEs, FLUSHes and CLOSEs, in a session that can
/// sign (`should_sign`: an authenticated one; a guest session cannot): always with
/// `?signing=required` (the default), and with `if_required` only when the server's
/// NEGOTIATE requires it (unknown counts as required). Unsigned requests are answered
/// unsigned; the session's set-up is signed either way, by the smb2 crate.
fn data_signed(
    url: &SmbUrl,
    should_sign: bool,
    params: Option<&smb2::client::connection::NegotiatedParams>,
) -> bool {
    let server_requires = params.is_none_or(|p| p.signing_required);
    should_sign && (url.signing == crate::url::Signing::Required || server_requires)
}

impl Client {
    /// Connects, negotiates, logs on with `creds` and connects to the URL's share; checks
    /// that the URL's path is a directory.
    pub fn connect(
        url: &SmbUrl,
        creds: &Credentials,
        timeout: Duration,
    ) -> Result<Client, SmbError> {
        Client::connect_within(url, creds, DEFAULT_CONNECT_TIMEOUT.min(timeout), timeout)
    }

    /// [`Client::connect`] with the TCP connection made within `connect` and each reply
    /// waited for `timeout`.
    pub fn connect_within(
        url: &SmbUrl,
        creds: &Credentials,
        connect: Duration,
        timeout: Duration,
    ) -> Result<Client, SmbError> {
        let addr = url.addr();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SmbError::Connect {
                addr: addr.clone(),
                source: smb2::Error::Io(e),
            })?;
        let cfg = ClientConfig {
            addr: addr.clone(),
            timeout: connect,
            username: creds.username.clone(),
            password: creds.password.clone(),
            domain: creds.domain.clone(),
            auto_reconnect: false,
            compression: false,
            dfs_enabled: false,
            response_timeout: Some(timeout),
            ..ClientConfig::default()
        };
        let user = if creds.is_guest() {
            "guest".to_string()
        } else {
            creds.username.clone()
        };
        let mut client = block_on(&rt, SmbClient::connect(cfg))?.map_err(|source| {
            use smb2::ErrorKind as K;
            match source.kind() {
                K::ConnectionLost | K::TimedOut | K::Io | K::InvalidData => SmbError::Connect {
                    addr: addr.clone(),
                    source,
                },
                _ => SmbError::Logon { user, source },
            }
        })?;
        let tree =
            block_on(&rt, client.connect_share(&url.share))?.map_err(|source| SmbError::Share {
                share: url.share.clone(),
                host: url.host.clone(),
                source,
            })?;
        let conn = client
            .connection_for(&tree)
            .map_err(|source| SmbError::Lost {
                what: "TREE_CONNECT",
                source,
            })?;
        let p = client.params();
        let signed = data_signed(url, client.session().should_sign, p.as_ref());
        Client::finish(rt, Some(client), conn, tree, url, creds, addr, p, signed)
    }

    /// The rest of a connection once its tree is connected: what was negotiated, and the
    /// URL's directory checked.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        rt: tokio::runtime::Runtime,
        client: Option<SmbClient>,
        conn: Connection,
        tree: Tree,
        url: &SmbUrl,
        creds: &Credentials,
        addr: String,
        p: Option<smb2::client::connection::NegotiatedParams>,
        signed: bool,
    ) -> Result<Client, SmbError> {
        let resolved = std::net::ToSocketAddrs::to_socket_addrs(&addr)
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.to_string())
            .unwrap_or_else(|| addr.clone());
        let negotiated = Negotiated {
            dialect: p
                .as_ref()
                .map(|p| Dialect::from(p.dialect))
                .ok_or_else(|| SmbError::NoDialect(addr.clone()))?,
            max_read: p.as_ref().map(|p| p.max_read_size).unwrap_or(65536),
            max_write: p.as_ref().map(|p| p.max_write_size).unwrap_or(65536),
            signed,
            guest: creds.is_guest(),
        };
        let mut c = Client {
            rt,
            _client: client,
            conn,
            tree,
            url: url.clone(),
            negotiated,
            write_through: false,
            addr: resolved,
        };
        if !url.path.is_empty() {
            let path = url.path.clone();
            let info = c.run(
                |t, conn| async move { t.stat(conn, &path).await },
                "QUERY_INFO",
                &url.path,
            )?;
            if !info.is_directory {
                return Err(SmbError::NotADirectory(url.to_string()));
            }
        }
        Ok(c)
    }

    /// A connection for the direct data path ([`crate::direct`]): the smb2 crate negotiates,
    /// logs on and connects the tree over nsperf's own socket ([`Tcp`]); returns the
    /// client, that socket and the session's ids and signing key — or `None` when the
    /// session or share is encrypted (sealed messages stay on the crate's path).
    pub(crate) fn connect_direct(
        url: &SmbUrl,
        creds: &Credentials,
        timeout: Duration,
    ) -> Result<Option<(Client, Arc<Tcp>, crate::direct::Session)>, SmbError> {
        let addr = url.addr();
        let connect_err = |source| SmbError::Connect {
            addr: addr.clone(),
            source,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| connect_err(smb2::Error::Io(e)))?;
        let connect = DEFAULT_CONNECT_TIMEOUT.min(timeout);
        let tcp = block_on(&rt, Tcp::connect(&addr, connect))?.map_err(connect_err)?;
        // The crate spawns its receiver task on the current runtime.
        let entered = rt.enter();
        let mut conn = Connection::from_transport(
            Box::new(Half(Arc::clone(&tcp))),
            Box::new(Half(Arc::clone(&tcp))),
            addr.clone(),
        );
        drop(entered);
        conn.set_response_timeout(Some(timeout));
        conn.set_keepalive(None);
        // Bounded by the response timeout set above.
        block_on(&rt, conn.negotiate())?.map_err(connect_err)?;
        let user = if creds.is_guest() {
            "guest".to_string()
        } else {
            creds.username.clone()
        };
        let session = block_on(
            &rt,
            Session::setup(&mut conn, &creds.username, &creds.password, &creds.domain),
        )?
        .map_err(|source| match source.kind() {
            smb2::ErrorKind::ConnectionLost | smb2::ErrorKind::TimedOut => connect_err(source),
            _ => SmbError::Logon { user, source },
        })?;
        let mut tree = block_on(&rt, Tree::connect(&mut conn, &url.share))?.map_err(|source| {
            SmbError::Share {
                share: url.share.clone(),
                host: url.host.clone(),
                source,
            }
        })?;
        if session.should_encrypt || tree.encrypt_data || conn.should_encrypt() {
            return Ok(None);
        }
        tree.server = addr.clone();
        let p = conn.params();
        let sign = data_signed(url, session.should_sign, p.as_ref());
        let signer = if sign {
            Signer::new(session.signing_algorithm, &session.signing_key).map_err(|e| {
                SmbError::Logon {
                    user: creds.username.clone(),
                    source: smb2::Error::invalid_data(e),
                }
            })?
        } else {
            Signer::None
        };
        let ids = crate::direct::Session {
            signer,
            session_id: session.session_id.0,
            tree_id: tree.tree_id.0,
            next_message_id: 0,
            credits: 0,
        };
        let c = Client::finish(rt, None, conn, tree, url, creds, addr, p, sign)?;
        Ok(Some((c, tcp, ids)))
    }

    /// Message id and credits where the crate left them, for the direct path to go on from.
    pub(crate) fn handover_state(&self) -> (u64, u16) {
        (self.conn.next_message_id(), self.conn.credits())
    }

    /// Runs one call of the smb2 crate on this client's tree and connection.
    fn run<'a, T, F, Fut>(&'a mut self, f: F, op: &'static str, path: &str) -> Result<T, SmbError>
    where
        F: FnOnce(&'a Tree, &'a mut Connection) -> Fut,
        Fut: Future<Output = smb2::Result<T>> + 'a,
    {
        block_on(&self.rt, f(&self.tree, &mut self.conn))?.map_err(|e| SmbError::op(op, path, e))
    }

    /// Sends one request on the tree and returns the reply frame, its status checked.
    fn execute(
        &mut self,
        command: Command,
        body: &dyn smb2::pack::Pack,
        op: &'static str,
        path: &str,
    ) -> Result<smb2::Frame, SmbError> {
        let tid = self.tree.tree_id;
        let frame = block_on(&self.rt, self.conn.execute(command, body, Some(tid)))?
            .map_err(|e| SmbError::op(op, path, e))?;
        if frame.header.status != NtStatus::SUCCESS {
            return Err(SmbError::op(
                op,
                path,
                smb2::Error::Protocol {
                    status: frame.header.status,
                    command,
                },
            ));
        }
        Ok(frame)
    }

    /// Opens (`FileOpen`) or creates (`FileCreate`: fails if it exists) a file for reading
    /// and writing; `path` is relative to the share's root.
    pub fn open(&mut self, path: &str, create: bool) -> Result<FileId, SmbError> {
        let req = CreateRequest {
            requested_oplock_level: OplockLevel::None,
            impersonation_level: ImpersonationLevel::Impersonation,
            desired_access: FileAccessMask::new(
                FileAccessMask::FILE_READ_DATA
                    | FileAccessMask::FILE_WRITE_DATA
                    | FileAccessMask::FILE_READ_ATTRIBUTES
                    | FileAccessMask::SYNCHRONIZE,
            ),
            file_attributes: FileAttributes::NORMAL,
            share_access: ShareAccess(
                ShareAccess::FILE_SHARE_READ
                    | ShareAccess::FILE_SHARE_WRITE
                    | ShareAccess::FILE_SHARE_DELETE,
            ),
            create_disposition: if create {
                CreateDisposition::FileCreate
            } else {
                CreateDisposition::FileOpen
            },
            create_options: FILE_NON_DIRECTORY_FILE,
            name: smb2::encode_path(path),
            create_contexts: vec![],
        };
        let frame = self.execute(Command::Create, &req, "CREATE", path)?;
        let resp = CreateResponse::unpack(&mut ReadCursor::new(&frame.body))
            .map_err(|e| SmbError::op("CREATE", path, e))?;
        Ok(resp.file_id)
    }

    /// Closes a handle.
    pub fn close(&mut self, fid: FileId, path: &str) -> Result<(), SmbError> {
        let tree = self.tree.clone();
        block_on(&self.rt, tree.close_handle(&mut self.conn, fid))?
            .map_err(|e| SmbError::op("CLOSE", path, e))
    }

    /// FLUSH: the server writes the file's data to stable storage.
    pub fn flush(&mut self, fid: FileId, path: &str) -> Result<(), SmbError> {
        self.execute(
            Command::Flush,
            &FlushRequest { file_id: fid },
            "FLUSH",
            path,
        )
        .map(|_| ())
    }

    /// Writes `buf` at `offset` (one WRITE of at most MaxWriteSize); returns bytes written.
    pub fn write(
        &mut self,
        fid: FileId,
        path: &str,
        offset: u64,
        buf: &[u8],
    ) -> Result<usize, SmbError> {
        let req = crate::frames::write_request(fid, offset, buf.to_vec(), self.write_through);
        let frame = self.execute(Command::Write, &req, "WRITE", path)?;
        crate::frames::write_count(&frame).map_err(|e| SmbError::op("WRITE", path, e))
    }

    /// Reads into `buf` at `offset` (one READ); returns bytes read and whether the end of
    /// the file was reached.
    pub fn read(
        &mut self,
        fid: FileId,
        path: &str,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(usize, bool), SmbError> {
        let req = crate::frames::read_request(fid, offset, buf.len() as u32);
        let tid = self.tree.tree_id;
        let frame = block_on(&self.rt, self.conn.execute(Command::Read, &req, Some(tid)))?
            .map_err(|e| SmbError::op("READ", path, e))?;
        if frame.header.status == NtStatus::END_OF_FILE {
            return Ok((0, true));
        }
        let n = crate::frames::read_into(&frame, buf).map_err(|e| SmbError::op("READ", path, e))?;
        Ok((n, n < buf.len()))
    }

    /// Creates a directory (fails if it exists).
    pub fn mkdir(&mut self, path: &str) -> Result<(), SmbError> {
        let p = path.to_string();
        self.run(
            |t, c| async move { t.create_directory(c, &p).await },
            "CREATE (directory)",
            path,
        )
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, path: &str) -> Result<(), SmbError> {
        let p = path.to_string();
        self.run(
            |t, c| async move { t.delete_directory(c, &p).await },
            "DELETE (directory)",
            path,
        )
    }

    /// Removes a file.
    pub fn remove(&mut self, path: &str) -> Result<(), SmbError> {
        let p = path.to_string();
        self.run(
            |t, c| async move { t.delete_file(c, &p).await },
            "DELETE",
            path,
        )
    }

    /// Size of a file (CREATE, QUERY_INFO, CLOSE).
    pub fn stat(&mut self, path: &str) -> Result<u64, SmbError> {
        let p = path.to_string();
        self.run(
            |t, c| async move { t.stat(c, &p).await },
            "QUERY_INFO",
            path,
        )
        .map(|i| i.size)
    }

    /// The entries of directory `path` (CREATE, QUERY_DIRECTORY until the end, CLOSE),
    /// without "." and "..".
    pub fn list(&mut self, path: &str) -> Result<Vec<Listed>, SmbError> {
        let p = path.to_string();
        let v = self.run(
            |t, c| async move { t.list_directory(c, &p).await },
            "QUERY_DIRECTORY",
            path,
        )?;
        Ok(v.into_iter()
            .filter(|e| e.name != "." && e.name != "..")
            .map(|e| Listed {
                name: e.name,
                is_dir: e.is_directory,
                size: e.size,
            })
            .collect())
    }

    /// Creates a small file with `data` (CREATE exclusive, WRITE, CLOSE in one compound).
    pub fn put_small(&mut self, path: &str, data: &[u8]) -> Result<(), SmbError> {
        let p = path.to_string();
        let d = data.to_vec();
        self.run(
            |t, c| async move { t.write_file_compound_exclusive(c, &p, &d).await },
            "CREATE+WRITE",
            path,
        )
        .map(|_| ())
    }

    /// Reads a small file whole (CREATE, READ, CLOSE in one compound); returns its length.
    pub fn get_small(&mut self, path: &str) -> Result<usize, SmbError> {
        let p = path.to_string();
        self.run(
            |t, c| async move { t.read_file_compound(c, &p).await },
            "CREATE+READ",
            path,
        )
        .map(|v| v.len())
    }

    /// Where the server answered (`ADDRESS:PORT`).
    pub fn server_addr(&self) -> String {
        self.addr.clone()
    }

    /// One ECHO round trip (the SMB request that touches no file).
    pub fn echo(&mut self) -> Result<(), SmbError> {
        let frame = block_on(
            &self.rt,
            self.conn
                .execute(Command::Echo, &smb2::msg::echo::EchoRequest, None),
        )?
        .map_err(|e| SmbError::op("ECHO", "", e))?;
        if frame.header.status != NtStatus::SUCCESS {
            return Err(SmbError::op(
                "ECHO",
                "",
                smb2::Error::Protocol {
                    status: frame.header.status,
                    command: Command::Echo,
                },
            ));
        }
        Ok(())
    }

    /// The path of `name` in the target directory.
    pub fn join(&self, name: &str) -> String {
        self.url.join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_is_written_as_the_smb2_crate_names_it_without_smb() {
        for &d in smb2::types::Dialect::ALL {
            let old = d.to_string().trim_start_matches("SMB ").to_string();
            assert_eq!(Dialect::from(d).to_string(), old);
        }
        let ours: Vec<Dialect> = smb2::types::Dialect::ALL
            .iter()
            .map(|&d| d.into())
            .collect();
        assert_eq!(ours, Dialect::ALL);
    }
}
