//! Transparent decompression of captures: gzip (`.gz`, also concatenated members), zstd and
//! xz, recognised by their magic numbers, so `tcpdump -w - | gzip` output reads directly.

use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};

/// Compression of the input stream (`capture.compression`: `none`, `gzip`, `zstd`, `xz`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Plain bytes.
    #[default]
    None,
    /// gzip.
    Gzip,
    /// Zstandard.
    Zstd,
    /// xz.
    Xz,
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
        })
    }
}

impl Compression {
    fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Compression::Xz
        } else {
            Compression::None
        }
    }
}

/// Where a compressed stream turned out damaged: (decompressed bytes delivered before, why).
pub type Damage = Arc<Mutex<Option<(u64, String)>>>;

/// A decompressor that ends its stream at the first error instead of failing, so the bytes
/// decoded before the damage are read; the damage is recorded for the reader to report.
struct Tolerant<R> {
    inner: R,
    delivered: u64,
    damage: Damage,
    failed: bool,
}

impl<R: Read> Read for Tolerant<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.failed {
            return Ok(0);
        }
        match self.inner.read(buf) {
            Ok(n) => {
                self.delivered += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                self.failed = true;
                let why = match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => {
                        "the compressed file is cut short".to_string()
                    }
                    _ => format!("the compressed data is damaged ({e})"),
                };
                if let Ok(mut d) = self.damage.lock() {
                    *d = Some((self.delivered, why));
                }
                Ok(0)
            }
        }
    }
}

/// Wraps `r` in the decompressor its first bytes call for. A damaged compressed stream ends
/// early; `damage` then says where and why.
pub fn wrap<R: Read + Send + 'static>(
    r: R,
    damage: Damage,
) -> std::io::Result<(Compression, Box<dyn Read + Send>)> {
    let (c, stream) = decompressor(r)?;
    if c == Compression::None {
        return Ok((c, stream));
    }
    Ok((
        c,
        Box::new(Tolerant {
            inner: stream,
            delivered: 0,
            damage,
            failed: false,
        }),
    ))
}

fn decompressor<R: Read + Send + 'static>(
    r: R,
) -> std::io::Result<(Compression, Box<dyn Read + Send>)> {
    let mut br = BufReader::with_capacity(128 * 1024, r);
    let head = br.fill_buf()?;
    let c = Compression::detect(head);
    let stream: Box<dyn Read + Send> = match c {
        Compression::None => Box::new(br),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(br)),
        Compression::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(br)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?,
        ),
        Compression::Xz => {
            // lzma-rs decodes into a writer: run it on a thread feeding a bounded channel of
            // 64 KiB chunks, so memory stays bounded, not proportional to the file.
            let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<Vec<u8>>>(4);
            std::thread::spawn(move || {
                let mut br = br;
                let mut w = std::io::BufWriter::with_capacity(64 * 1024, ChunkWriter(tx.clone()));
                let r = lzma_rs::xz_decompress(&mut br, &mut w)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
                    .and_then(|()| std::io::Write::flush(&mut w));
                if let Err(e) = r {
                    let _ = tx.send(Err(e));
                }
            });
            Box::new(ChunkReader {
                rx,
                chunk: Vec::new(),
                pos: 0,
            })
        }
    };
    Ok((c, stream))
}

struct ChunkWriter(std::sync::mpsc::SyncSender<std::io::Result<Vec<u8>>>);

impl std::io::Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .send(Ok(buf.to_vec()))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct ChunkReader {
    rx: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos >= self.chunk.len() {
            match self.rx.recv() {
                Ok(Ok(c)) => {
                    self.chunk = c;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0), // the decoder finished
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_magic() {
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd]),
            Compression::Zstd
        );
        assert_eq!(Compression::detect(b"\xfd7zXZ\x00"), Compression::Xz);
        assert_eq!(
            Compression::detect(&[0xd4, 0xc3, 0xb2, 0xa1]),
            Compression::None
        );
        assert_eq!(Compression::detect(&[]), Compression::None);
    }

    #[test]
    fn gzip_round_trip() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"hello capture").unwrap();
        let gz = enc.finish().unwrap();
        let (c, mut r) = wrap(std::io::Cursor::new(gz), Damage::default()).unwrap();
        assert_eq!(c, Compression::Gzip);
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello capture");
    }

    #[test]
    fn xz_round_trip() {
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &b"hello xz"[..], &mut xz).unwrap();
        let (c, mut r) = wrap(std::io::Cursor::new(xz), Damage::default()).unwrap();
        assert_eq!(c, Compression::Xz);
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello xz");
    }

    #[test]
    fn cut_gzip_yields_what_decodes_then_reports_damage() {
        use std::io::Write;
        let plain: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&plain).unwrap();
        let gz = enc.finish().unwrap();
        let damage = Damage::default();
        let (_, mut r) = wrap(
            std::io::Cursor::new(gz[..gz.len() / 2].to_vec()),
            damage.clone(),
        )
        .unwrap();
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert!(!out.is_empty() && out.len() < plain.len(), "{}", out.len());
        assert_eq!(&out[..], &plain[..out.len()]);
        let (at, why) = damage.lock().unwrap().clone().unwrap();
        assert_eq!(at, out.len() as u64);
        assert!(why.contains("cut short"), "{why}");
    }
}
