//! The workloads of `nsperf io` by name: the closed set the io engine (`nsperf-io`) runs and
//! the result model (`nsperf-results`) records, with what each reads and writes. How the
//! offsets of a pass are generated is the engine's (`nsperf_io`'s op stream).

use serde::{Deserialize, Serialize};

/// One workload of `nsperf io run`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Sequential write of a new file (iozone "write").
    #[default]
    SeqWrite,
    /// Sequential write over an existing file (iozone "rewrite").
    Rewrite,
    /// Sequential read (iozone "read").
    SeqRead,
    /// Sequential read of a file read just before (iozone "re-read").
    Reread,
    /// Random reads of whole records.
    RandRead,
    /// Random writes of whole records over an existing file.
    RandWrite,
    /// Random reads and writes mixed (`--rwmix` % reads).
    RandRw,
    /// Sequential reads and writes mixed (`--rwmix` % reads): fio's `rw`/`readwrite`.
    SeqRw,
    /// Sequential read from the end of the file to its start.
    BkwdRead,
    /// Read one record, skip `--stride` bytes, wrapping around the file.
    StrideRead,
    /// Write the same record over and over (iozone "record rewrite").
    RecRewrite,
    /// Write one byte per call through a user-space buffer (bonnie++ "per char" output).
    CharWrite,
    /// Read one byte per call through a user-space buffer (bonnie++ "per char" input).
    CharRead,
    /// Random lseek + read of a record, one in ten rewritten (bonnie++ "random seeks").
    Seeks,
    /// Create, stat, read and delete many small files, in sequential and random order.
    Meta,
}

impl Workload {
    /// Every workload, in the order of `--help`.
    pub const ALL: [Workload; 15] = [
        Workload::SeqWrite,
        Workload::Rewrite,
        Workload::SeqRead,
        Workload::Reread,
        Workload::RandRead,
        Workload::RandWrite,
        Workload::RandRw,
        Workload::SeqRw,
        Workload::BkwdRead,
        Workload::StrideRead,
        Workload::RecRewrite,
        Workload::CharWrite,
        Workload::CharRead,
        Workload::Seeks,
        Workload::Meta,
    ];

    /// True when the measured pass writes (entirely or partly).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Workload::SeqWrite
                | Workload::Rewrite
                | Workload::RandWrite
                | Workload::RandRw
                | Workload::SeqRw
                | Workload::RecRewrite
                | Workload::CharWrite
                | Workload::Seeks
                | Workload::Meta
        )
    }

    /// True when the file must exist with its full size before the measured pass.
    pub fn needs_layout(self) -> bool {
        !matches!(
            self,
            Workload::SeqWrite | Workload::CharWrite | Workload::Meta
        )
    }

    /// True when the measured pass reads (entirely or partly).
    pub fn reads(self) -> bool {
        matches!(
            self,
            Workload::SeqRead
                | Workload::Reread
                | Workload::RandRead
                | Workload::RandRw
                | Workload::SeqRw
                | Workload::BkwdRead
                | Workload::StrideRead
                | Workload::CharRead
                | Workload::Seeks
                | Workload::Meta
        )
    }

    /// True when reads and writes are mixed in one pass (`--rwmix` applies).
    pub fn mixed(self) -> bool {
        matches!(self, Workload::RandRw | Workload::SeqRw)
    }

    /// True for workloads done by the block engines (record-sized I/O through `--engine`).
    pub fn is_block(self) -> bool {
        !matches!(
            self,
            Workload::CharWrite | Workload::CharRead | Workload::Meta
        )
    }
}

/// Parses a name; also accepts the iozone and fio spellings (`write`, `read`, `randrw`,
/// `mixed`, `backward`, …), in any case. fio's `rw` and `readwrite` are *sequential* mixed I/O.
impl std::str::FromStr for Workload {
    type Err = UnknownWorkload;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "seqwrite" | "write" => Workload::SeqWrite,
            "rewrite" => Workload::Rewrite,
            "seqread" | "read" => Workload::SeqRead,
            "reread" => Workload::Reread,
            "randread" => Workload::RandRead,
            "randwrite" => Workload::RandWrite,
            "randrw" | "mixed" => Workload::RandRw,
            "seqrw" | "rw" | "readwrite" => Workload::SeqRw,
            "bkwdread" | "backward" | "backread" => Workload::BkwdRead,
            "strideread" | "stride" => Workload::StrideRead,
            "recrewrite" | "record-rewrite" => Workload::RecRewrite,
            "charwrite" | "putc" => Workload::CharWrite,
            "charread" | "getc" => Workload::CharRead,
            "seeks" | "seek" => Workload::Seeks,
            "meta" | "metadata" => Workload::Meta,
            _ => return Err(UnknownWorkload(s.to_string())),
        })
    }
}

/// The name used on the command line and in JSON (serde's name); pads to a width.
impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Workload::SeqWrite => "seqwrite",
            Workload::Rewrite => "rewrite",
            Workload::SeqRead => "seqread",
            Workload::Reread => "reread",
            Workload::RandRead => "randread",
            Workload::RandWrite => "randwrite",
            Workload::RandRw => "randrw",
            Workload::SeqRw => "seqrw",
            Workload::BkwdRead => "bkwdread",
            Workload::StrideRead => "strideread",
            Workload::RecRewrite => "recrewrite",
            Workload::CharWrite => "charwrite",
            Workload::CharRead => "charread",
            Workload::Seeks => "seeks",
            Workload::Meta => "meta",
        })
    }
}

/// A name that is no workload (nor one of its iozone or fio spellings).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workload '{0}' (one of {names})", names = names())]
pub struct UnknownWorkload(pub String);

/// The names of every workload, comma-separated, in the order of `--help`.
fn names() -> String {
    Workload::ALL.map(|w| w.to_string()).join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workload's text, as `name()` wrote it before Display/FromStr took its place.
    const NAMES: [(Workload, &str); 15] = [
        (Workload::SeqWrite, "seqwrite"),
        (Workload::Rewrite, "rewrite"),
        (Workload::SeqRead, "seqread"),
        (Workload::Reread, "reread"),
        (Workload::RandRead, "randread"),
        (Workload::RandWrite, "randwrite"),
        (Workload::RandRw, "randrw"),
        (Workload::SeqRw, "seqrw"),
        (Workload::BkwdRead, "bkwdread"),
        (Workload::StrideRead, "strideread"),
        (Workload::RecRewrite, "recrewrite"),
        (Workload::CharWrite, "charwrite"),
        (Workload::CharRead, "charread"),
        (Workload::Seeks, "seeks"),
        (Workload::Meta, "meta"),
    ];

    #[test]
    fn names_match_display_and_from_str() {
        assert_eq!(NAMES.map(|(w, _)| w), Workload::ALL);
        for (w, name) in NAMES {
            assert_eq!(w.to_string(), name);
            assert_eq!(name.parse::<Workload>(), Ok(w));
            assert_eq!(
                format!("{w:>12}|{w:<12}|"),
                format!("{name:>12}|{name:<12}|")
            );
        }
    }

    #[test]
    fn names_round_trip() {
        assert_eq!("mixed".parse(), Ok(Workload::RandRw));
        // fio: rw and readwrite are sequential mixed I/O, not random.
        assert_eq!("rw".parse(), Ok(Workload::SeqRw));
        assert_eq!("readwrite".parse(), Ok(Workload::SeqRw));
        assert!("trim".parse::<Workload>().is_err());
        assert!("nope".parse::<Workload>().is_err());
    }

    #[test]
    fn serde_and_display_are_the_name() {
        for w in Workload::ALL {
            assert_eq!(serde_json::to_string(&w).unwrap(), format!("\"{w}\""));
            let back: Workload = serde_json::from_str(&format!("\"{w}\"")).unwrap();
            assert_eq!(back, w);
        }
        // serde reads the names only, not the command line's other spellings.
        assert!(serde_json::from_str::<Workload>("\"read\"").is_err());
    }

    #[test]
    fn unknown_names_list_the_workloads() {
        assert_eq!(
            "nope".parse::<Workload>().unwrap_err().to_string(),
            "unknown workload 'nope' (one of seqwrite, rewrite, seqread, reread, randread, \
             randwrite, randrw, seqrw, bkwdread, strideread, recrewrite, charwrite, charread, \
             seeks, meta)"
        );
        assert_eq!("Write".parse::<Workload>(), Ok(Workload::SeqWrite));
    }
}
