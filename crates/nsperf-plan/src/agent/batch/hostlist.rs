//! Slurm hostlist expressions (`node[01-04,07],gpu3`, `rack[1-2]-n[1-3]`), as Slurm writes
//! them in `SLURM_JOB_NODELIST` and `scontrol show hostnames` expands them.
//!
//! Grammar: a comma-separated list of names; a name is literal text with any number of
//! bracket groups, each a comma-separated list of numbers and `low-high` ranges; several
//! groups in one name multiply (`a[1-2]b[1-2]` is four names). A range keeps the width of its
//! low bound (`[08-10]` is `08,09,10`; `[8-10]` is `8,9,10`). The input is untrusted: every
//! malformed expression is an error, never a panic, and an expansion past [`MAX_HOSTS`]
//! names is refused before anything is expanded.

use std::fmt;
use std::str::FromStr;

/// The most names one expression may expand to.
pub const MAX_HOSTS: usize = 65_536;
/// The longest expression accepted, in bytes.
pub const MAX_EXPRESSION: usize = 64 * 1024;
/// The most digits of a number in a range.
const MAX_DIGITS: usize = 18;

/// Why a hostlist expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostlistError {
    /// Nothing to expand (an empty expression or an empty name between commas).
    #[error("hostlist: empty name at byte {at}")]
    Empty {
        /// Byte offset.
        at: usize,
    },
    /// A character no host name has.
    #[error("hostlist: unexpected {found:?} at byte {at}")]
    Unexpected {
        /// The character.
        found: char,
        /// Byte offset.
        at: usize,
    },
    /// A `[` without its `]`.
    #[error("hostlist: '[' at byte {at} is never closed")]
    Unclosed {
        /// Byte offset of the `[`.
        at: usize,
    },
    /// A bracket item that is not a number or `low-high`.
    #[error("hostlist: {item:?} is not a number or a low-high range")]
    BadRange {
        /// The item.
        item: String,
    },
    /// A range whose high bound is below its low one.
    #[error("hostlist: range {low}-{high} runs backwards")]
    Backwards {
        /// Low bound.
        low: u64,
        /// High bound.
        high: u64,
    },
    /// The expansion would be too large.
    #[error("hostlist: expands to more than {max} names")]
    TooMany {
        /// The limit.
        max: usize,
    },
    /// The expression is too long.
    #[error("hostlist: longer than {max} bytes")]
    TooLong {
        /// The limit.
        max: usize,
    },
}

/// A hostlist expression, expanded into its names in order (duplicates kept, as Slurm does).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hostlist {
    hosts: Vec<String>,
}

impl Hostlist {
    /// The names, in order.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// No names.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

impl fmt::Display for Hostlist {
    /// The names, comma-separated (itself a hostlist expression that parses back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hosts.join(","))
    }
}

/// One piece of a name: literal text, or a bracket group's numbers.
enum Piece<'a> {
    Text(&'a str),
    Numbers(Vec<Range>),
}

/// `low..=high`, printed `width` digits wide at least.
#[derive(Clone, Copy)]
struct Range {
    low: u64,
    high: u64,
    width: usize,
}

impl Range {
    fn count(&self) -> u64 {
        self.high - self.low + 1
    }
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > MAX_DIGITS || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_range(item: &str) -> Result<Range, HostlistError> {
    let bad = || HostlistError::BadRange {
        item: item.chars().take(40).collect(),
    };
    let (lo, hi) = item.split_once('-').unwrap_or((item, item));
    let (low, high) = (number(lo).ok_or_else(bad)?, number(hi).ok_or_else(bad)?);
    if high < low {
        return Err(HostlistError::Backwards { low, high });
    }
    Ok(Range {
        low,
        high,
        width: lo.len(),
    })
}

/// Splits the expression at the commas outside brackets: `(offset, name)`.
fn split_names(s: &str) -> Result<Vec<(usize, &str)>, HostlistError> {
    let mut names = Vec::new();
    let (mut start, mut open) = (0usize, None::<usize>);
    for (i, c) in s.char_indices() {
        match c {
            '[' if open.is_some() => return Err(HostlistError::Unexpected { found: c, at: i }),
            '[' => open = Some(i),
            ']' if open.is_none() => return Err(HostlistError::Unexpected { found: c, at: i }),
            ']' => open = None,
            ',' if open.is_none() => {
                names.push((start, &s[start..i]));
                start = i + 1;
            }
            ',' | '-' if open.is_some() => {}
            c if c.is_ascii_digit() || (open.is_none() && name_char(c)) => {}
            c => return Err(HostlistError::Unexpected { found: c, at: i }),
        }
    }
    if let Some(at) = open {
        return Err(HostlistError::Unclosed { at });
    }
    names.push((start, &s[start..]));
    Ok(names)
}

/// Parses one name (brackets balanced and characters checked by [`split_names`]).
fn pieces(at: usize, name: &str) -> Result<Vec<Piece<'_>>, HostlistError> {
    if name.is_empty() {
        return Err(HostlistError::Empty { at });
    }
    let mut out = Vec::new();
    let mut rest = name;
    while let Some(open) = rest.find('[') {
        let close = open + rest[open..].find(']').unwrap_or(rest.len() - open);
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        let inner = rest.get(open + 1..close).unwrap_or("");
        let ranges = inner
            .split(',')
            .map(parse_range)
            .collect::<Result<Vec<_>, _>>()?;
        out.push(Piece::Numbers(ranges));
        rest = rest.get(close + 1..).unwrap_or("");
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// How many names `pieces` make, or `None` past `limit`.
fn count(pieces: &[Piece<'_>], limit: u64) -> Option<u64> {
    let mut n: u64 = 1;
    for p in pieces {
        if let Piece::Numbers(ranges) = p {
            let mut k: u64 = 0;
            for r in ranges {
                k = k.checked_add(r.count())?;
            }
            n = n.checked_mul(k)?;
            if n > limit {
                return None;
            }
        }
    }
    (n <= limit).then_some(n)
}

fn expand(pieces: &[Piece<'_>], out: &mut Vec<String>) {
    let mut names = vec![String::new()];
    for p in pieces {
        names = match p {
            Piece::Text(t) => names.into_iter().map(|n| n + t).collect(),
            Piece::Numbers(ranges) => names
                .iter()
                .flat_map(|n| {
                    ranges.iter().flat_map(move |r| {
                        (r.low..=r.high).map(move |v| format!("{n}{v:0w$}", w = r.width))
                    })
                })
                .collect(),
        };
    }
    out.extend(names);
}

impl FromStr for Hostlist {
    type Err = HostlistError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() > MAX_EXPRESSION {
            return Err(HostlistError::TooLong {
                max: MAX_EXPRESSION,
            });
        }
        let s = s.trim();
        let mut parsed = Vec::new();
        let mut total: u64 = 0;
        for (at, name) in split_names(s)? {
            let p = pieces(at, name)?;
            let left = MAX_HOSTS as u64 - total;
            total += count(&p, left).ok_or(HostlistError::TooMany { max: MAX_HOSTS })?;
            parsed.push(p);
        }
        let mut hosts = Vec::with_capacity(total as usize);
        for p in &parsed {
            expand(p, &mut hosts);
        }
        Ok(Hostlist { hosts })
    }
}

/// Parses arbitrary bytes as an expression (the body of the fuzz target, also run by unit
/// tests). Never panics.
pub fn fuzz_hostlist(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data)
        && let Ok(h) = s.parse::<Hostlist>()
    {
        assert!(h.len() <= MAX_HOSTS);
        // What it prints parses back to the same names (when short enough to be parsed).
        let printed = h.to_string();
        if printed.len() <= MAX_EXPRESSION {
            assert!(
                printed.parse::<Hostlist>().ok().as_ref() == Some(&h),
                "round trip"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(s: &str) -> Vec<String> {
        s.parse::<Hostlist>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .hosts
    }

    #[test]
    fn expands_slurm_expressions() {
        assert_eq!(
            hosts("node[01-04,07],gpu3"),
            ["node01", "node02", "node03", "node04", "node07", "gpu3"]
        );
        assert_eq!(hosts("vm"), ["vm"]);
        assert_eq!(hosts("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(hosts("n[08-10]"), ["n08", "n09", "n10"]);
        assert_eq!(hosts("n[1]"), ["n1"]);
        assert_eq!(hosts("[1-2]x"), ["1x", "2x"]);
        assert_eq!(hosts("r[1-2]-n[1,3]"), ["r1-n1", "r1-n3", "r2-n1", "r2-n3"]);
        assert_eq!(hosts("a.b-c_d,e[9-9].lan"), ["a.b-c_d", "e9.lan"]);
        assert_eq!(hosts(" n[1-2] \n"), ["n1", "n2"]);
        assert_eq!(hosts("n[000-002]").len(), 3);
        assert_eq!(hosts("n[000-002]")[2], "n002");
    }

    #[test]
    fn refuses_malformed_expressions_with_one_line_errors() {
        let err = |s: &str| s.parse::<Hostlist>().unwrap_err();
        assert_eq!(err(""), HostlistError::Empty { at: 0 });
        assert_eq!(err("a,,b"), HostlistError::Empty { at: 2 });
        assert_eq!(err("a,"), HostlistError::Empty { at: 2 });
        assert_eq!(err("n[1-2"), HostlistError::Unclosed { at: 1 });
        assert_eq!(
            err("n1-2]"),
            HostlistError::Unexpected { found: ']', at: 4 }
        );
        assert_eq!(
            err("n[[1]]"),
            HostlistError::Unexpected { found: '[', at: 2 }
        );
        assert_eq!(err("n[a]"), HostlistError::Unexpected { found: 'a', at: 2 });
        assert_eq!(err("n 1"), HostlistError::Unexpected { found: ' ', at: 1 });
        assert!(matches!(err("n[]"), HostlistError::BadRange { .. }));
        assert!(matches!(err("n[1-]"), HostlistError::BadRange { .. }));
        assert!(matches!(err("n[1-2-3]"), HostlistError::BadRange { .. }));
        assert!(matches!(err("n[1,]"), HostlistError::BadRange { .. }));
        assert_eq!(err("n[5-1]"), HostlistError::Backwards { low: 5, high: 1 });
        assert!(matches!(
            err("n[1-9999999999999999999]"),
            HostlistError::BadRange { .. }
        ));
        for e in [err("n[1-2"), err("n[5-1]"), err("x[1-70000]")] {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn expansion_is_bounded_before_it_happens() {
        assert_eq!(hosts("n[1-65536]").len(), MAX_HOSTS);
        let too_many = HostlistError::TooMany { max: MAX_HOSTS };
        assert_eq!("n[1-65537]".parse::<Hostlist>(), Err(too_many.clone()));
        assert_eq!("n[1-65536],x".parse::<Hostlist>(), Err(too_many.clone()));
        // Products overflow u64 long before anything is expanded.
        let huge = "a[0-999999999999999999][0-999999999999999999][0-999999999999999999]";
        assert_eq!(huge.parse::<Hostlist>(), Err(too_many));
        let long = "a,".repeat(MAX_EXPRESSION);
        assert!(matches!(
            long.parse::<Hostlist>(),
            Err(HostlistError::TooLong { .. })
        ));
    }

    #[test]
    fn fuzz_seeds_do_not_panic() {
        let seeds: [&[u8]; 8] = [
            b"node[01-04,07],gpu3",
            b"r[1-2]-n[1,3]",
            b"n[1-65536]",
            b"[",
            b"]",
            b"a[0-1][0-1][0-1]",
            b"\xff\xfe",
            b"n[18446744073709551615]",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for seed in seeds {
            fuzz_hostlist(seed);
            for cut in 0..seed.len() {
                fuzz_hostlist(&seed[..cut]);
            }
            for _ in 0..300 {
                let mut v = seed.to_vec();
                let i = (next() as usize) % v.len();
                v[i] = b"[]-,0123456789ab"[(next() % 16) as usize];
                fuzz_hostlist(&v);
            }
        }
    }
}
