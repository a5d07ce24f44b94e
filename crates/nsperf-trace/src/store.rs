//! Where finished connections go. The analysis keeps only the live connections in memory; a
//! finished one is summarised and handed to a [`ConnectionStore`]: a `Vec` (tests, small
//! captures) or a [`ConnectionSpool`], which keeps the first few in memory and writes the rest
//! to an unlinked temporary file, so a capture of millions of short connections is analysed
//! in bounded memory (16 bytes of index per spooled connection).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::model::TcpConnection;

/// Connections a spool keeps in memory before it writes to its file.
const IN_MEMORY: usize = 1024;

/// Takes finished connections, in any order; reads them back in order of their id.
pub trait ConnectionStore {
    /// Stores one finished connection.
    fn push(&mut self, c: TcpConnection);
    /// Number stored.
    fn count(&self) -> u64;
    /// Calls `f` for each connection in order of id.
    fn each(&self, f: &mut dyn FnMut(&TcpConnection)) -> std::io::Result<()>;
    /// Called once after the last push.
    fn seal(&mut self) -> std::io::Result<()>;
}

impl ConnectionStore for Vec<TcpConnection> {
    fn push(&mut self, c: TcpConnection) {
        Vec::push(self, c);
    }
    fn count(&self) -> u64 {
        self.len() as u64
    }
    fn each(&self, f: &mut dyn FnMut(&TcpConnection)) -> std::io::Result<()> {
        self.iter().for_each(f);
        Ok(())
    }
    fn seal(&mut self) -> std::io::Result<()> {
        self.sort_by_key(|c| c.id);
        Ok(())
    }
}

/// Finished connections in memory, then in an unlinked temporary file.
#[derive(Debug, Default)]
pub struct ConnectionSpool {
    memory: Vec<TcpConnection>,
    file: Option<BufWriter<File>>,
    /// (id, offset, length) of each spooled connection.
    index: Vec<(u32, u64, u32)>,
    written: u64,
    error: Option<String>,
}

impl PartialEq for ConnectionSpool {
    fn eq(&self, other: &Self) -> bool {
        self.memory == other.memory && self.index == other.index
    }
}

impl ConnectionSpool {
    /// An empty spool.
    pub fn new() -> ConnectionSpool {
        ConnectionSpool::default()
    }

    fn spool(&mut self, c: &TcpConnection) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(BufWriter::with_capacity(256 * 1024, tempfile::tempfile()?));
        }
        let line = serde_json::to_vec(c)?;
        if let Some(w) = self.file.as_mut() {
            w.write_all(&line)?;
        }
        self.index.push((c.id, self.written, line.len() as u32));
        self.written += line.len() as u64;
        Ok(())
    }

    fn read(&self, at: u64, len: u32, buf: &mut Vec<u8>) -> std::io::Result<TcpConnection> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| std::io::Error::other("spool file missing"))?
            .get_ref();
        buf.resize(len as usize, 0);
        file.read_exact_at(buf, at)?;
        Ok(serde_json::from_slice(buf)?)
    }
}

impl ConnectionStore for ConnectionSpool {
    fn push(&mut self, c: TcpConnection) {
        if self.memory.len() < IN_MEMORY {
            self.memory.push(c);
        } else if self.error.is_none() {
            if let Err(e) = self.spool(&c) {
                self.error = Some(format!("cannot spool connections to a temporary file: {e}"));
            }
        }
    }
    fn count(&self) -> u64 {
        (self.memory.len() + self.index.len()) as u64
    }
    fn each(&self, f: &mut dyn FnMut(&TcpConnection)) -> std::io::Result<()> {
        if let Some(e) = &self.error {
            return Err(std::io::Error::other(e.clone()));
        }
        // Merge the two id-sorted sequences.
        let mut buf = Vec::new();
        let mut mem = self.memory.iter().peekable();
        for &(id, at, len) in &self.index {
            while let Some(m) = mem.next_if(|m| m.id < id) {
                f(m);
            }
            f(&self.read(at, len, &mut buf)?);
        }
        mem.for_each(f);
        Ok(())
    }
    fn seal(&mut self) -> std::io::Result<()> {
        self.memory.sort_by_key(|c| c.id);
        self.index.sort_by_key(|i| i.0);
        if let Some(w) = self.file.as_mut() {
            w.flush()?;
        }
        match &self.error {
            Some(e) => Err(std::io::Error::other(e.clone())),
            None => Ok(()),
        }
    }
}

impl Serialize for ConnectionSpool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.count() as usize))?;
        let mut err = None;
        let r = self.each(&mut |c| {
            if err.is_none() {
                if let Err(e) = seq.serialize_element(c) {
                    err = Some(e);
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        r.map_err(S::Error::custom)?;
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spool_returns_every_connection_in_id_order() {
        let mut s = ConnectionSpool::new();
        let n = IN_MEMORY as u32 * 3;
        // finished out of order
        for id in (1..=n).rev() {
            s.push(TcpConnection {
                id,
                a: format!("10.0.0.1:{id}"),
                ..TcpConnection::default()
            });
        }
        s.seal().unwrap();
        assert_eq!(s.count(), u64::from(n));
        let mut ids = Vec::new();
        s.each(&mut |c| {
            assert_eq!(c.a, format!("10.0.0.1:{}", c.id));
            ids.push(c.id);
        })
        .unwrap();
        assert_eq!(ids, (1..=n).collect::<Vec<_>>());
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v.as_array().unwrap().len(), n as usize);
        assert_eq!(v[0]["id"], 1);
    }
}
