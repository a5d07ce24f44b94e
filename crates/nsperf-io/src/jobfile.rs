//! fio job files as input (`nsperf io run --job FILE.fio`): a `[global]` section and one job
//! section, with the options nsperf has, read with fio's meanings (sizes in powers of 1024,
//! times in seconds unless suffixed, `invalidate=1` by default so reads are cold, `rw` is
//! sequential mixed I/O). An option nsperf does not have is an error naming it and its line,
//! never silently ignored; options that change nothing in nsperf (`thread`,
//! `group_reporting`, `name`, `description`) are accepted. The parser never panics (fuzzed:
//! `fuzz/fuzz_targets/io_jobfile.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use nsperf_core::units::{Bytes, parse_duration};

use crate::config::{CacheMode, FsyncMode, RateLimit, RunConfig, VerifyMode};
use crate::engine::EngineKind;
use crate::error::IoError;
use crate::target::Target;
use crate::workload::Workload;

/// One `key=value` (or bare `key`) line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOption {
    /// The option's name.
    pub key: String,
    /// Its value (`1` for a bare key).
    pub value: String,
    /// Line number in the file, from 1.
    pub line: usize,
}

/// One `[name]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The name in brackets.
    pub name: String,
    /// Its options, in file order.
    pub options: Vec<JobOption>,
}

/// A parsed job file: `[global]` options and the job sections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFile {
    /// Options of `[global]` sections, in file order.
    pub global: Vec<JobOption>,
    /// Job sections, in file order.
    pub jobs: Vec<Section>,
}

fn err(line: usize, msg: impl std::fmt::Display) -> IoError {
    IoError::JobFile(format!("job file line {line}: {msg}"))
}

impl JobFile {
    /// Parses the text of a job file (syntax only; [`JobFile::to_config`] checks options).
    pub fn parse(text: &str) -> Result<JobFile, IoError> {
        let mut f = JobFile::default();
        let mut cur: Option<Section> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with(';') || l.starts_with('#') {
                continue;
            }
            if let Some(rest) = l.strip_prefix('[') {
                let name = rest
                    .strip_suffix(']')
                    .ok_or_else(|| err(line, "a section header needs a closing ']'"))?
                    .trim();
                if name.is_empty() {
                    return Err(err(line, "empty section name"));
                }
                if let Some(s) = cur.take() {
                    f.push(s);
                }
                cur = Some(Section {
                    name: name.to_string(),
                    options: Vec::new(),
                });
                continue;
            }
            if l.starts_with("include ") {
                return Err(err(
                    line,
                    "'include' is not supported: put the options in this file",
                ));
            }
            let (key, value) = match l.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => (l, "1"),
            };
            if key.is_empty() || key.contains(char::is_whitespace) {
                return Err(err(line, format!("'{l}' is not an option (key=value)")));
            }
            if value.contains('$') {
                return Err(err(
                    line,
                    format!("{key}: environment variables are not expanded"),
                ));
            }
            let Some(s) = cur.as_mut() else {
                return Err(err(line, format!("option '{key}' outside a section")));
            };
            s.options.push(JobOption {
                key: key.to_string(),
                value: value.to_string(),
                line,
            });
        }
        if let Some(s) = cur.take() {
            f.push(s);
        }
        Ok(f)
    }

    fn push(&mut self, s: Section) {
        if s.name == "global" {
            self.global.extend(s.options);
        } else {
            self.jobs.push(s);
        }
    }

    /// The run the file describes: global options, then the job's (which override them).
    /// `dir` overrides `directory=`.
    pub fn to_config(&self, dir: Option<&Path>) -> Result<RunConfig, IoError> {
        let job = match self.jobs.as_slice() {
            [] => return Err(IoError::JobFile("the job file has no job section".into())),
            [j] => j,
            many => {
                let names: Vec<&str> = many.iter().map(|s| s.name.as_str()).collect();
                return Err(IoError::JobFile(format!(
                    "the job file has {} job sections ({}): nsperf runs one per call; use numjobs= for parallel jobs, or one file per job",
                    many.len(),
                    names.join(", ")
                )));
            }
        };
        let mut b = Builder::default();
        for o in self.global.iter().chain(&job.options) {
            b.apply(o)?;
        }
        b.finish(dir)
    }
}

/// Options collected before the config is built (the config needs target, workload, sizes).
#[derive(Debug, Default)]
struct Builder {
    workload: Option<Workload>,
    bs: Option<u64>,
    size: Option<u64>,
    dir: Option<PathBuf>,
    jobs: Option<u32>,
    iodepth: Option<u32>,
    engine: Option<EngineKind>,
    direct: bool,
    invalidate: Option<bool>,
    runtime: Option<Duration>,
    time_based: bool,
    ramp: Option<Duration>,
    rate: RateLimit,
    verify: Option<VerifyMode>,
    rwmix_read: Option<u8>,
    fsync: Option<FsyncMode>,
    seed: Option<u64>,
}

fn num<T: std::str::FromStr>(o: &JobOption) -> Result<T, IoError> {
    o.value
        .parse()
        .map_err(|_| err(o.line, format!("{}={}: not a number", o.key, o.value)))
}

fn flag(o: &JobOption) -> Result<bool, IoError> {
    match o.value.as_str() {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        v => Err(err(o.line, format!("{}={v}: expected 0 or 1", o.key))),
    }
}

fn size(o: &JobOption) -> Result<u64, IoError> {
    if o.value.contains([',', ':', '%', '-']) {
        return Err(err(
            o.line,
            format!("{}={}: only one plain size is supported", o.key, o.value),
        ));
    }
    Bytes::parse(&o.value)
        .map(|b| b.0)
        .map_err(|e| err(o.line, format!("{}: {e}", o.key)))
}

fn duration(o: &JobOption) -> Result<Duration, IoError> {
    parse_duration(&o.value).map_err(|e| err(o.line, format!("{}: {e}", o.key)))
}

/// `R[,W]`: one value for both directions, or reads and writes apart (empty: unlimited).
fn pair(
    o: &JobOption,
    parse: fn(&JobOption) -> Result<u64, IoError>,
) -> Result<(Option<u64>, Option<u64>), IoError> {
    let one = |v: &str| -> Result<Option<u64>, IoError> {
        if v.trim().is_empty() {
            return Ok(None);
        }
        parse(&JobOption {
            value: v.trim().to_string(),
            ..o.clone()
        })
        .map(Some)
    };
    match o.value.split_once(',') {
        None => {
            let v = one(&o.value)?;
            Ok((v, v))
        }
        Some((r, w)) if !w.contains(',') => Ok((one(r)?, one(w)?)),
        Some(_) => Err(err(
            o.line,
            format!("{}: trim rates are not supported", o.key),
        )),
    }
}

impl Builder {
    fn apply(&mut self, o: &JobOption) -> Result<(), IoError> {
        match o.key.as_str() {
            "rw" | "readwrite" => {
                if o.value.contains(':') {
                    return Err(err(
                        o.line,
                        format!("{}={}: offset modifiers are not supported", o.key, o.value),
                    ));
                }
                if o.value.contains("trim") {
                    return Err(err(
                        o.line,
                        format!("{}={}: trim workloads are not supported", o.key, o.value),
                    ));
                }
                let w = match o.value.as_str() {
                    "read" | "write" | "randread" | "randwrite" | "rw" | "readwrite" | "randrw" => {
                        o.value.parse::<Workload>().ok()
                    }
                    _ => None,
                };
                self.workload = Some(w.ok_or_else(|| {
                    err(o.line, format!("{}={}: not a fio workload nsperf has (read, write, randread, randwrite, rw, readwrite, randrw)", o.key, o.value))
                })?);
            }
            "bs" | "blocksize" => self.bs = Some(size(o)?),
            "size" => self.size = Some(size(o)?),
            "numjobs" => self.jobs = Some(num(o)?),
            "iodepth" => self.iodepth = Some(num(o)?),
            "ioengine" => {
                self.engine = Some(match o.value.as_str() {
                    "psync" | "sync" | "pvsync" => EngineKind::Psync,
                    "io_uring" => EngineKind::Uring,
                    "mmap" => EngineKind::Mmap,
                    "null" => EngineKind::Null,
                    v => {
                        return Err(err(
                            o.line,
                            format!(
                                "ioengine={v} is not supported (psync, sync, pvsync, io_uring, mmap, null)"
                            ),
                        ));
                    }
                })
            }
            "direct" => self.direct = flag(o)?,
            "buffered" => self.direct = !flag(o)?,
            "invalidate" => self.invalidate = Some(flag(o)?),
            "runtime" => self.runtime = Some(duration(o)?),
            "time_based" => self.time_based = flag(o)?,
            "ramp_time" => self.ramp = Some(duration(o)?),
            "rate" => {
                let (r, w) = pair(o, size)?;
                self.rate.read_bytes_per_s = r;
                self.rate.write_bytes_per_s = w;
            }
            "rate_iops" => {
                let (r, w) = pair(o, num)?;
                self.rate.read_iops = r;
                self.rate.write_iops = w;
            }
            "verify" => {
                self.verify = match o.value.as_str() {
                    "0" | "null" => None,
                    v => Some(v.parse().map_err(|e| err(o.line, e))?),
                }
            }
            "rwmixread" => self.rwmix_read = Some(pct(o)?),
            "rwmixwrite" => self.rwmix_read = Some(100 - pct(o)?),
            "fsync" => {
                self.fsync = Some(match num::<u64>(o)? {
                    0 => FsyncMode::None,
                    1 => FsyncMode::Each,
                    n => {
                        return Err(err(
                            o.line,
                            format!("fsync={n}: only fsync=1 (after every write) is supported"),
                        ));
                    }
                })
            }
            "end_fsync" | "fsync_on_close" => {
                if flag(o)? {
                    self.fsync = Some(FsyncMode::End);
                }
            }
            "directory" => {
                if o.value.contains(':') {
                    return Err(err(
                        o.line,
                        "directory=: several directories are not supported",
                    ));
                }
                self.dir = Some(PathBuf::from(&o.value));
            }
            "filename" => {
                return Err(err(
                    o.line,
                    "filename= is not supported: nsperf writes only files it creates (use directory=), or a device with `nsperf io run --device PATH --destructive`",
                ));
            }
            "randseed" => self.seed = Some(num(o)?),
            // Options that change nothing in nsperf: it always uses threads, reports the
            // aggregate with per-job intervals, and names the run by its workload.
            "thread" | "group_reporting" | "name" | "description" => {}
            "stonewall" | "new_group" | "wait_for_previous" => {}
            k => {
                return Err(err(
                    o.line,
                    format!(
                        "option '{k}' is not supported by nsperf (see docs/io.md for the fio options it has)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn finish(self, dir: Option<&Path>) -> Result<RunConfig, IoError> {
        let dir = dir.map(Path::to_path_buf).or(self.dir).ok_or_else(|| {
            IoError::JobFile("the job file has no directory= (or give DIR)".into())
        })?;
        let workload = self.workload.unwrap_or(Workload::SeqRead);
        let bs = self.bs.unwrap_or(4096);
        let size = self.size.ok_or_else(|| {
            IoError::JobFile(
                "the job file has no size= (nsperf needs the size of each job's file)".into(),
            )
        })?;
        let mut c = RunConfig::new(Target::Dir { path: dir }, workload, size, bs);
        c.jobs = self.jobs.unwrap_or(1);
        c.engine = self.engine.unwrap_or(EngineKind::Psync);
        c.iodepth = match c.engine {
            // fio ignores iodepth on synchronous engines; nsperf would refuse it.
            EngineKind::Uring => self.iodepth.unwrap_or(1),
            _ => 1,
        };
        c.cache = if self.direct {
            CacheMode::Direct
        } else if self.invalidate.unwrap_or(true) {
            CacheMode::Cold
        } else {
            CacheMode::Warm
        };
        c.time = self.runtime;
        c.time_based = self.time_based;
        c.ramp = self.ramp;
        c.rate = self.rate;
        c.verify = self.verify;
        if let Some(p) = self.rwmix_read {
            c.rwmix_read_pct = p;
        }
        if let Some(f) = self.fsync {
            c.fsync = f;
        }
        if let Some(s) = self.seed {
            c.seed = s;
        }
        c.validate()
            .map_err(|e| IoError::JobFile(format!("the job file asks for an invalid run: {e}")))?;
        Ok(c)
    }
}

fn pct(o: &JobOption) -> Result<u8, IoError> {
    let p: u8 = num(o)?;
    if p > 100 {
        return Err(err(
            o.line,
            format!("{}={p}: a percentage is 0..100", o.key),
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIO: &str = "\
; a typical fio job file
[global]
ioengine=io_uring
direct=1
bs=4k
size=64m
runtime=10
time_based
directory=/tmp
group_reporting

[randrw-job]
rw=randrw
rwmixread = 75
iodepth=16
numjobs=2
ramp_time=2s
rate_iops=1000,500
verify=crc32
";

    #[test]
    fn reads_global_and_job_with_fio_meanings() {
        let c = JobFile::parse(FIO).unwrap().to_config(None).unwrap();
        assert_eq!(c.workload, Workload::RandRw);
        assert_eq!((c.bs_bytes, c.size_bytes), (4096, 64 << 20));
        assert_eq!((c.jobs, c.iodepth, c.engine), (2, 16, EngineKind::Uring));
        assert_eq!(c.cache, CacheMode::Direct);
        assert_eq!(c.time, Some(Duration::from_secs(10)));
        assert!(c.time_based);
        assert_eq!(c.ramp, Some(Duration::from_secs(2)));
        assert_eq!(
            (c.rate.read_iops, c.rate.write_iops),
            (Some(1000), Some(500))
        );
        assert_eq!(c.rwmix_read_pct, 75);
        assert_eq!(c.verify, Some(VerifyMode::Crc32));
        let c = JobFile::parse("[j]\nrw=rw\nsize=1m\ndirectory=/x\n")
            .unwrap()
            .to_config(Some(Path::new("/y")))
            .unwrap();
        // rw is sequential mixed; fio invalidates the cache by default: cold.
        assert_eq!(c.workload, Workload::SeqRw);
        assert_eq!(c.cache, CacheMode::Cold);
        assert_eq!(c.target.path(), Path::new("/y"));
    }

    #[test]
    fn unsupported_is_an_error_naming_it() {
        let e = |t: &str| {
            JobFile::parse(t)
                .and_then(|j| j.to_config(None))
                .unwrap_err()
                .to_string()
        };
        let base = "[j]\nsize=1m\ndirectory=/tmp\n";
        assert!(
            e(&format!("{base}zonemode=zbd\n"))
                .contains("line 4: option 'zonemode' is not supported")
        );
        assert!(e(&format!("{base}ioengine=libaio\n")).contains("ioengine=libaio"));
        assert!(e(&format!("{base}rw=trim\n")).contains("trim"));
        assert!(e(&format!("{base}filename=/dev/sda\n")).contains("filename="));
        assert!(e(&format!("{base}verify=md5\n")).contains("md5"));
        assert!(e(&format!("{base}bs=4k,8k\n")).contains("one plain size"));
        assert!(e(&format!("{base}[k]\nsize=1m\n")).contains("2 job sections (j, k)"));
        assert!(e("size=1m\n").contains("outside a section"));
        assert!(e("[j]\nsize=1m\n").contains("directory="));
        assert!(e("[j\n").contains("closing"));
        assert!(e(&format!("{base}size=${{SIZE}}\n")).contains("environment"));
        assert!(e(&format!("{base}time_based\n")).contains("--runtime"));
        let x = IoError::JobFile(String::new());
        assert_eq!(
            nsperf_core::failure::Classify::failure(&x),
            nsperf_core::Failure::Input
        );
    }

    #[test]
    fn hostile_job_files_never_panic() {
        let mut seed = 0x1234_5678u64;
        let alphabet = b"[]=;#\n \tabcrwsizebdirectory0123456789kmg,:%$-_{}\xff";
        for len in 0..400 {
            let mut v = Vec::with_capacity(len);
            for _ in 0..len {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                v.push(alphabet[(seed >> 33) as usize % alphabet.len()]);
            }
            crate::fuzz_job_file(&v);
        }
        // Mutations of a real file.
        for i in 0..FIO.len() {
            let mut b = FIO.as_bytes().to_vec();
            b[i] = b'=';
            crate::fuzz_job_file(&b);
            crate::fuzz_job_file(&FIO.as_bytes()[..i]);
        }
    }
}
