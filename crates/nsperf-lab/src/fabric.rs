//! The lab's links as the emulator's threads share them: the [`Layout`], one
//! [`LinkModel`] per direction behind its own lock (a star's port is offered packets by
//! every client's forwarder), the event log, the queue samples and the running capture.
//!
//! Lock order: a model, then the capture's pending buffer; never the other way round.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nsperf_core::{Clock, MonotonicClock};

use crate::capture::{CaptureDirection, CaptureSummary, Sink, counters_delta, statistics};
use crate::config::{LinkChange, LinkParams};
use crate::error::{LabError, Result};
use crate::events::{EventKind, EventSource, LinkEvent};
use crate::model::{DirectionCounters, LinkModel};
use crate::stats::{DirectionStats, LabStats, QueueSample};
use crate::topology::Layout;

/// Interval of the queue-occupancy samples.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Samples kept (one minute).
pub const SAMPLES_KEPT: usize = 600;
/// Memory the delay lines may hold by default: 1 GiB, 8 Gbit/s × 1 s of packets in flight.
pub const DEFAULT_MEMORY: u64 = 1 << 30;

/// State shared by the emulator's threads.
pub struct Fabric {
    /// Sites, links, directions, routes.
    pub layout: Layout,
    models: Vec<Mutex<LinkModel>>,
    capture_on: Vec<AtomicBool>,
    capture: Mutex<Option<Arc<Sink>>>,
    capture_start: Mutex<Vec<DirectionCounters>>,
    /// Bumped whenever the forwarders must look at the parameters again (offload policy).
    pub generation: AtomicU64,
    /// The generation each source site's forwarder has applied.
    pub applied: Vec<AtomicU64>,
    /// Packets per source site that had no destination in the lab (IPv6, broadcast, …).
    pub unroutable: Vec<AtomicU64>,
    /// Packets per source site dropped before the link because the delay lines held the
    /// whole memory budget.
    pub overrun: Vec<AtomicU64>,
    /// Bumped by every forwarder on every batch it read: the lab is carrying traffic.
    pub activity: AtomicU64,
    /// Bytes of packet buffers the delay lines hold now, all forwarders.
    pub held_bytes: AtomicU64,
    /// Most bytes the delay lines may hold ([`DEFAULT_MEMORY`] unless `lab up --memory`).
    pub memory_limit: u64,
    /// Failed writes per source site.
    pub write_errors: Vec<AtomicU64>,
    /// Set to stop every thread.
    pub stop: AtomicBool,
    /// Bumped to stop the schedules running (each ends when it changes).
    pub schedules: AtomicU64,
    /// The clock of the whole emulator.
    pub clock: MonotonicClock,
    unix0_ns: u64,
    events: Mutex<Vec<LinkEvent>>,
    samples: Mutex<VecDeque<QueueSample>>,
    log_path: PathBuf,
    events_path: PathBuf,
}

impl Fabric {
    /// The fabric of `layout` with `params` per direction; events are appended to
    /// `events.log` (text) and `events.jsonl` in `dir`.
    pub fn new(layout: Layout, params: Vec<LinkParams>, memory_limit: u64, dir: PathBuf) -> Fabric {
        let n = layout.sites.len();
        let d = layout.directions.len();
        let clock = MonotonicClock::new();
        Fabric {
            models: params
                .into_iter()
                .map(|p| Mutex::new(LinkModel::new(p)))
                .collect(),
            capture_on: (0..d).map(|_| AtomicBool::new(false)).collect(),
            capture: Mutex::new(None),
            capture_start: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            applied: (0..n).map(|_| AtomicU64::new(0)).collect(),
            unroutable: (0..n).map(|_| AtomicU64::new(0)).collect(),
            overrun: (0..n).map(|_| AtomicU64::new(0)).collect(),
            activity: AtomicU64::new(0),
            held_bytes: AtomicU64::new(0),
            memory_limit,
            write_errors: (0..n).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
            schedules: AtomicU64::new(0),
            unix0_ns: nsperf_core::clock::unix_time_ns().saturating_sub(clock.now_ns()),
            clock,
            events: Mutex::new(Vec::new()),
            samples: Mutex::new(VecDeque::with_capacity(SAMPLES_KEPT)),
            log_path: dir.join("events.log"),
            events_path: dir.join("events.jsonl"),
            layout,
        }
    }

    /// The model of direction `d`, locked (a poisoned lock is taken over: the model holds
    /// no invariant a panic elsewhere could break).
    pub fn model(&self, d: usize) -> MutexGuard<'_, LinkModel> {
        self.models[d].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True while direction `d` is captured (read under its model lock).
    #[inline]
    pub fn captured(&self, d: usize) -> bool {
        self.capture_on[d].load(Ordering::Relaxed)
    }

    /// The running capture.
    pub fn sink(&self) -> Option<Arc<Sink>> {
        self.capture.lock().ok()?.clone()
    }

    /// Unix time of emulator clock reading `t_ns`.
    pub fn unix_ns(&self, t_ns: u64) -> u64 {
        self.unix0_ns + t_ns
    }

    /// Records an event.
    pub fn log_event(
        &self,
        source: EventSource,
        kind: EventKind,
        text: &str,
        change: Option<(&LinkChange, &[usize])>,
    ) {
        let t = self.clock.now_ns();
        let ev = LinkEvent {
            t_s: t as f64 / 1e9,
            t_unix_ns: self.unix_ns(t),
            source,
            kind,
            text: text.to_string(),
            directions: change
                .map(|(_, dirs)| {
                    dirs.iter()
                        .map(|&d| self.layout.direction_name(d))
                        .collect()
                })
                .unwrap_or_default(),
            links: change
                .map(|(_, dirs)| {
                    // The links the change took whole: both directions.
                    (0..self.layout.links.len())
                        .filter(|l| dirs.contains(&(2 * l)) && dirs.contains(&(2 * l + 1)))
                        .map(|l| self.layout.links[l].name.clone())
                        .collect()
                })
                .unwrap_or_default(),
            change: change.map(|(c, _)| c.clone()),
        };
        let append = |path: &PathBuf, line: &str| {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{line}");
            }
        };
        append(
            &self.log_path,
            &format!("{:.6} {} {text}", ev.t_s, ev.source),
        );
        if let Ok(j) = serde_json::to_string(&ev) {
            append(&self.events_path, &j);
        }
        if let Ok(mut e) = self.events.lock() {
            e.push(ev);
        }
    }

    /// Applies a change to the directions it selects; errors on unknown names.
    pub fn apply(&self, change: &LinkChange, source: EventSource, text: &str) -> Result<()> {
        let dirs = self.layout.select(change)?;
        if dirs.is_empty() {
            return Err(LabError::Usage(format!(
                "'{}' selects no direction of this lab",
                change.to_flags()
            )));
        }
        for &d in &dirs {
            let mut m = self.model(d);
            let mut p = *m.params();
            change.apply(&mut p);
            m.set_params(p);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        let kind = match change.up {
            Some(false) => EventKind::Down,
            Some(true) => EventKind::Up,
            None => EventKind::Change,
        };
        self.log_event(source, kind, text, Some((change, &dirs)));
        Ok(())
    }

    /// Waits (up to `limit`) until every forwarder has applied generation `g`.
    pub fn wait_applied(&self, g: u64, limit: Duration) {
        let t0 = std::time::Instant::now();
        while self.applied.iter().any(|a| a.load(Ordering::Acquire) < g) && t0.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The parameters of direction `d` now.
    pub fn params(&self, d: usize) -> LinkParams {
        *self.model(d).params()
    }

    /// The statistics now.
    pub fn stats(&self) -> LabStats {
        let now = self.clock.now_ns();
        let directions = (0..self.layout.directions.len())
            .map(|d| {
                let mut m = self.model(d);
                let (qp, qb) = m.queue_occupancy(now);
                let dir = &self.layout.directions[d];
                DirectionStats {
                    link: self.layout.links[dir.link].name.clone(),
                    from: dir.from.clone(),
                    to: dir.to.clone(),
                    params: *m.params(),
                    counters: *m.counters(),
                    queue_packets: qp,
                    queue_bytes: qb,
                }
            })
            .collect();
        let sum = |v: &[AtomicU64]| v.iter().map(|u| u.load(Ordering::Relaxed)).sum();
        LabStats {
            uptime_s: now as f64 / 1e9,
            topology: self.layout.topology.clone(),
            links: self.layout.links.clone(),
            directions,
            queue_series: self
                .samples
                .lock()
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
            events: self.events.lock().map(|e| e.clone()).unwrap_or_default(),
            unroutable_packets: sum(&self.unroutable),
            overrun_packets: sum(&self.overrun),
            held_bytes: self.held_bytes.load(Ordering::Relaxed),
            memory_limit_bytes: self.memory_limit,
            write_errors: sum(&self.write_errors),
        }
    }

    /// Takes one queue-occupancy sample of every direction.
    pub fn sample(&self) {
        let now = self.clock.now_ns();
        let (qp, qb): (Vec<u64>, Vec<u64>) = (0..self.layout.directions.len())
            .map(|d| self.model(d).queue_occupancy(now))
            .unzip();
        if let Ok(mut s) = self.samples.lock() {
            if s.len() >= SAMPLES_KEPT {
                s.pop_front();
            }
            s.push_back(QueueSample {
                t_s: now as f64 / 1e9,
                queue_packets: qp,
                queue_bytes: qb,
            });
        }
    }

    /// Starts capturing link `name` into `path` (one capture at a time).
    pub fn capture_start(&self, name: &str, path: PathBuf) -> Result<Arc<Sink>> {
        let link = self.layout.link_index(name)?;
        let mut slot = self
            .capture
            .lock()
            .map_err(|_| LabError::Usage("capture state poisoned".into()))?;
        if let Some(s) = slot.as_ref() {
            return Err(LabError::Usage(format!(
                "link '{}' is already being captured (one capture at a time)",
                self.layout.links[s.link].name
            )));
        }
        let names = [
            self.layout.direction_name(2 * link),
            self.layout.direction_name(2 * link + 1),
        ];
        let now = self.clock.now_ns();
        let sink = Arc::new(Sink::new(
            link,
            path,
            [&names[0], &names[1]],
            self.unix_ns(now),
            now,
        ));
        *slot = Some(sink.clone());
        drop(slot);
        let mut start = Vec::new();
        for d in [2 * link, 2 * link + 1] {
            let m = self.model(d);
            start.push(*m.counters());
            self.capture_on[d].store(true, Ordering::Relaxed);
        }
        if let Ok(mut s) = self.capture_start.lock() {
            *s = start;
        }
        // Forwarders turn segmentation offloads off for routes over a captured link; wait
        // until they have, so that packets made from now on are wire packets.
        let g = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.wait_applied(g, Duration::from_secs(1));
        self.log_event(
            EventSource::Capture,
            EventKind::Note,
            &format!("capture of link {name} started"),
            None,
        );
        Ok(sink)
    }

    /// Stops the capture: no record after this; returns the sink (for its last bytes) and
    /// the summary (without the file size, which the writer fills in).
    pub fn capture_stop(&self) -> Option<(Arc<Sink>, CaptureSummary, Vec<u8>)> {
        let sink = self.sink()?;
        let link = sink.link;
        let start = self
            .capture_start
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        let now = self.clock.now_ns();
        let mut directions = Vec::new();
        let mut tail = Vec::new();
        // Off under each model's lock (no record is half made), and only then is the sink
        // let go: a forwarder that saw the flag on finds the sink.
        for (side, d) in [2 * link, 2 * link + 1].into_iter().enumerate() {
            let m = self.model(d);
            self.capture_on[d].store(false, Ordering::Relaxed);
            let c = counters_delta(
                start.get(side).unwrap_or(&DirectionCounters::default()),
                m.counters(),
            );
            drop(m);
            statistics(
                &mut tail,
                side as u32,
                self.unix_ns(now),
                (sink.unix0_ns, self.unix_ns(now)),
                &c,
            );
            directions.push(CaptureDirection {
                direction: self.layout.direction_name(d),
                recorded: Default::default(),
                counters: c,
            });
        }
        if let Ok(mut slot) = self.capture.lock() {
            *slot = None;
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        sink.release_held();
        let (counts, lost) = sink
            .pending
            .lock()
            .map(|p| (p.counts.clone(), p.lost))
            .unwrap_or_default();
        for (d, c) in directions.iter_mut().zip(counts) {
            d.recorded = c;
        }
        let name = self.layout.links[link].name.clone();
        self.log_event(
            EventSource::Capture,
            EventKind::Note,
            &format!("capture of link {name} stopped"),
            None,
        );
        let summary = CaptureSummary {
            link: name,
            file: sink.path.clone(),
            duration_s: now.saturating_sub(sink.mono0_ns) as f64 / 1e9,
            directions,
            lost_records: lost,
            file_bytes: 0,
        };
        Some((sink, summary, tail))
    }
}
