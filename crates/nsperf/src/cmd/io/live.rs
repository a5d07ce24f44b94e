//! The live view of `nsperf io run`: a status line on a terminal like fio's (silent when
//! stderr is not a terminal, with --json or --quiet), and one JSON line per interval with
//! `--json-stream`.

use std::io::Write;

use nsperf_io::Progress;

use super::{ops, rate};
use crate::output::{Format, print_json_line};

/// Turns the engine's samples into progress lines and stream events.
pub struct Live {
    format: Format,
    progress: bool,
    drawn: bool,
    /// The previous sample's time and totals: (elapsed_s, read_bytes, write_bytes, ops).
    last: Option<(f64, u64, u64, u64)>,
}

impl Live {
    /// A view for this output format; `progress` allows the status line.
    pub fn new(format: Format, progress: bool) -> Self {
        Live {
            format,
            progress,
            drawn: false,
            last: None,
        }
    }

    /// True when samples are wanted at all.
    pub fn wanted(&self) -> bool {
        self.progress || self.format == Format::JsonStream
    }

    /// One sample of the running pass.
    pub fn sample(&mut self, p: &Progress) {
        let (prev_s, prev_rd, prev_wr, prev_ops) = self.last.unwrap_or((p.begin_s, 0, 0, 0));
        self.last = Some((p.elapsed_s, p.read_bytes, p.write_bytes, p.ops));
        let len = (p.elapsed_s - prev_s).max(1e-9);
        let rd = p.read_bytes.saturating_sub(prev_rd);
        let wr = p.write_bytes.saturating_sub(prev_wr);
        let n = p.ops.saturating_sub(prev_ops);
        // An interval that began before measuring started belongs to the ramp.
        let ramp = prev_s < -1e-3;
        if self.format == Format::JsonStream {
            let _ = print_json_line(&serde_json::json!({
                "event": "interval",
                "ramp": ramp,
                "start_s": prev_s,
                "length_s": len,
                "read_bytes": rd,
                "write_bytes": wr,
                "bytes": rd + wr,
                "ops": n,
                "throughput_bytes_per_s": (rd + wr) as f64 / len,
                "iops": n as f64 / len,
            }));
        }
        if !self.progress {
            return;
        }
        let when = match p.total_s {
            Some(t) => format!("{:6.1} s / {t:.0} s", p.elapsed_s),
            None => format!("{:6.1} s", p.elapsed_s),
        };
        let done = match (p.total_ops, p.total_s) {
            _ if ramp => " ramp".to_string(),
            (Some(total), _) if total > 0 => {
                let f = p.ops as f64 / total as f64;
                let eta = if f > 0.0 {
                    format!(", eta {:.0} s", p.elapsed_s * (1.0 - f) / f)
                } else {
                    String::new()
                };
                format!(" {:.1} % done{eta}", f * 100.0)
            }
            (_, Some(t)) => format!(" eta {:.0} s", (t - p.elapsed_s).max(0.0)),
            _ => String::new(),
        };
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r\x1b[2K[{when}] [r={} w={}] [{} IOPS]{done}",
            rate(rd as f64 / len),
            rate(wr as f64 / len),
            ops(n as f64 / len),
        );
        let _ = e.flush();
        self.drawn = true;
    }

    /// Erases the status line.
    pub fn clear(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            self.drawn = false;
        }
    }
}
