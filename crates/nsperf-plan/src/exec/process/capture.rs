//! A step's capture: tcpdump in a lab site (a `capture` step child) or the emulator on a
//! link, taken around the step, analysed here through the trace library, and kept beside
//! the store with `--keep-captures`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nsperf_lab::lab;

use super::{ProcessExecutor, lab_error};
use crate::error::ExecError;
use crate::exec::child::Background;
use crate::exec::{Lab, Measurement, RunContext, measure};
use crate::plan::{CapturePoint, Phase, ResolvedStep};
use crate::step::{SiteRef, StepSpec};

/// Bytes of each packet a network step's capture keeps: the link, IP and TCP headers with
/// their options (at most 16 + 60 + 60 with tcpdump's `-i any`), all the TCP analysis reads.
pub(super) const HEADERS_SNAPLEN: u32 = 256;

/// Bytes of each packet an io step's capture keeps: all of it (tcpdump's own largest
/// snapshot length, what `-s 0` means). The storage protocol's decoder needs every record
/// mark and header, and they fall anywhere in a segment: an RPC record (or an SMB2 message)
/// starts right after the previous one's last byte, mid-segment whenever calls go back to
/// back (`iodepth` > 1), and a lab site's segments are TSO/GRO super-packets up to 64 KiB. A
/// record mark cut off by the snapshot length makes the decoder hunt for the next record
/// that starts a segment, losing the calls in between (docs/trace.md#the-storage-protocol),
/// as tshark loses them; with whole packets it matches what tshark matches. The price is a
/// capture as large as the data the step moves (plus headers).
pub(super) const PROTOCOL_SNAPLEN: u32 = 262_144;

impl ProcessExecutor {
    /// Runs a step through `run`, with a capture at `at` around it when given (keeping
    /// `snaplen` bytes of each packet): the run gets the capture's analysis
    /// (`trace_json`) and, with `--keep-captures`, the kept file's path. The one way a step
    /// takes a capture, network and io steps alike.
    pub(super) fn captured(
        &mut self,
        ctx: &RunContext<'_>,
        step: &ResolvedStep,
        at: Option<&CapturePoint>,
        snaplen: u32,
        run: impl FnOnce(&mut Self) -> Result<Measurement, ExecError>,
    ) -> Result<Measurement, ExecError> {
        let Some(at) = at else {
            return run(self);
        };
        let keep = self
            .keep_captures
            .as_ref()
            .map(|dir| dir.join(capture_name(ctx, step, at)));
        let c = self.start_capture(ctx.lab, at, snaplen)?;
        let m = run(self);
        let (analysis, kept) = self.finish_capture(c, keep);
        let mut m = m?;
        m.trace_json = Some(analysis?);
        m.capture_path = kept;
        Ok(m)
    }

    /// Starts a capture at `at`; in a site, tcpdump keeps `snaplen` bytes of each packet (on
    /// the link, the emulator keeps whole packets).
    fn start_capture(
        &mut self,
        lab: Option<&Lab>,
        at: &CapturePoint,
        snaplen: u32,
    ) -> Result<Capture, ExecError> {
        let lab = lab.ok_or_else(|| ExecError::NeedsLab("a capture".into()))?;
        self.captures += 1;
        let file = std::env::temp_dir().join(format!(
            ".nsperf-capture-{}-{}.pcap{}",
            std::process::id(),
            self.captures,
            if matches!(at, CapturePoint::Link(_)) {
                "ng"
            } else {
                ""
            }
        ));
        let site = match at {
            CapturePoint::Link(link) => {
                // The emulator writes the file and starts recording before this returns.
                let c = lab::capture(&lab.name, link, &file).map_err(lab_error)?;
                return Ok(Capture::Link(c, file));
            }
            CapturePoint::Site(site) => site,
        };
        if !program_on_path("tcpdump") {
            return Err(ExecError::Skip(
                "a capture needs tcpdump, which is not installed".into(),
            ));
        }
        let spec = StepSpec::Capture {
            site: SiteRef {
                lab: lab.name.clone(),
                site: site.clone(),
            },
            file: file.clone(),
            snaplen,
        };
        let _ = std::fs::remove_file(&file);
        let bg = self.background(&spec, "capture step")?;
        // tcpdump writes the file's header once its capture is live: the step starts then,
        // not after a fixed pause (500 ms was too short on a loaded machine, and a plan's
        // capture of 64 WRITEs held 41).
        if !capture_opened(&file, CAPTURE_OPEN_WAIT) {
            bg.interrupt(Duration::from_secs(1));
            let _ = std::fs::remove_file(&file);
            return Err(ExecError::DidNotStart {
                what: format!("tcpdump in site {site}"),
                why: format!("no capture opened within {} s", CAPTURE_OPEN_WAIT.as_secs()),
            });
        }
        Ok(Capture::Site(bg, file))
    }

    /// Stops a capture and analyses it: `nsperf trace --json` of the file; a capture on the
    /// link adds the emulator's summary (records and counters per direction) as
    /// `link_capture`.
    /// The file is kept as `keep` when given (`--keep-captures`); returns the analysis and
    /// where the file was kept.
    fn finish_capture(
        &mut self,
        c: Capture,
        keep: Option<PathBuf>,
    ) -> (Result<String, ExecError>, Option<String>) {
        std::thread::sleep(Duration::from_millis(200));
        let (file, summary) = match c {
            Capture::Site(bg, file) => {
                bg.interrupt(Duration::from_secs(3));
                (file, None)
            }
            Capture::Link(c, file) => match c.stop() {
                Ok(s) => (file, Some(s)),
                Err(e) => {
                    let _ = std::fs::remove_file(&file);
                    return (Err(lab_error(e)), None);
                }
            },
        };
        let out = measure::analyse_capture(&file, summary.as_ref());
        // The capture was written where its writer could (tcpdump drops privileges): a kept
        // one is moved beside the store once analysed.
        let kept = keep.and_then(|dest| match keep_file(&file, &dest) {
            Ok(()) => Some(dest.display().to_string()),
            Err(e) => {
                eprintln!(
                    "nsperf: the capture could not be kept as {}: {e}",
                    dest.display()
                );
                None
            }
        });
        let _ = std::fs::remove_file(&file);
        (out, kept)
    }
}

/// Moves `from` to `to` (copying across file systems), making `to`'s directory.
fn keep_file(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::rename(from, to).is_err() {
        std::fs::copy(from, to)?;
    }
    Ok(())
}

/// The name of a kept capture: experiment, step, the resolved parameters, phase and
/// repetition (`e3-tcp-rtt=50ms,window=281600-r2.pcap`; `.pcapng` for a capture on a link),
/// with anything but letters, digits and `=,.-_` replaced by `_`.
fn capture_name(ctx: &RunContext<'_>, step: &ResolvedStep, at: &CapturePoint) -> String {
    let params: Vec<String> = step
        .params
        .iter()
        .map(|(k, v)| format!("{k}={}", v.value))
        .collect();
    let phase = match ctx.phase {
        Phase::None => String::new(),
        p => format!("-{p}"),
    };
    let ext = match at {
        CapturePoint::Link(_) => "pcapng",
        CapturePoint::Site(_) => "pcap",
    };
    let name: String = format!(
        "e{}-{}-{}{phase}-r{}",
        ctx.experiment,
        step.name,
        params.join(","),
        ctx.repetition
    )
    .chars()
    .map(|c| {
        if c.is_ascii_alphanumeric() || "=,.-_".contains(c) {
            c
        } else {
            '_'
        }
    })
    .collect();
    format!("{name}.{ext}")
}

/// A capture running during a step.
enum Capture {
    /// tcpdump in a site, writing this file.
    Site(Background, PathBuf),
    /// The emulator, on a link, writing this file.
    Link(lab::LinkCapture, PathBuf),
}

fn program_on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// How long tcpdump may take to open its capture.
const CAPTURE_OPEN_WAIT: Duration = Duration::from_secs(10);

/// Size of a pcap file's header, which tcpdump writes once its capture is live.
const PCAP_HEADER: u64 = 24;

/// Waits until `file` holds a pcap file header, at most `limit`; whether it came.
fn capture_opened(file: &Path, limit: Duration) -> bool {
    let t0 = Instant::now();
    loop {
        if std::fs::metadata(file).is_ok_and(|m| m.len() >= PCAP_HEADER) {
            return true;
        }
        if t0.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_is_open_once_its_header_is_written_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.pcap");
        // Nothing yet: false after the limit.
        let t0 = Instant::now();
        assert!(!capture_opened(&file, Duration::from_millis(100)));
        assert!(t0.elapsed() >= Duration::from_millis(100));
        // Part of a header is not a header.
        std::fs::write(&file, [0u8; 10]).unwrap();
        assert!(!capture_opened(&file, Duration::from_millis(60)));
        // The header written a moment later by another writer: seen as it comes.
        let f = file.clone();
        let w = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            std::fs::write(&f, [0u8; 24]).unwrap();
        });
        let t0 = Instant::now();
        assert!(capture_opened(&file, Duration::from_secs(5)));
        assert!(t0.elapsed() >= Duration::from_millis(140));
        assert!(t0.elapsed() < Duration::from_secs(4));
        w.join().unwrap();
    }
}
