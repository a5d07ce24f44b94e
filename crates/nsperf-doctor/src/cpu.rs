//! CPU over a measured pass: this host's cores, this process's threads (the client side)
//! and, when the file server runs on this host (a lab site), every thread of the server's
//! processes — the CPU time each used and the time each waited on a run queue for a CPU
//! (`/proc/…/schedstat`, field 2: what other load on a shared host costs a data path). A
//! background thread takes snapshots; [`usage`] (pure) turns the snapshots around a pass
//! into percentages.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nsperf_core::cpu::{CpuTimes, ProcessTimes};
use nsperf_core::process::ProcessId;

use crate::model::{PassCpu, ServerCpu};

/// Counters of one thread (or, with `tid` = `pid`, one whole process).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadTicks {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// utime + stime, clock ticks.
    pub ticks: u64,
    /// Time spent runnable but waiting for a CPU, ns (0 when the kernel does not say).
    pub wait_ns: u64,
}

/// Everything read at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When.
    pub at: Instant,
    /// `/proc/stat` per core.
    pub host: Vec<(u32, CpuTimes)>,
    /// This process.
    pub me: Option<ProcessTimes>,
    /// This process's threads.
    pub my_threads: Vec<ThreadTicks>,
    /// The server's processes (`tid` = `pid`; their CPU counters include exited threads).
    pub server_procs: Vec<ThreadTicks>,
    /// The server's threads.
    pub server: Vec<ThreadTicks>,
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Parses utime + stime (fields 14 and 15) and the name of a `/proc/…/stat` line.
pub fn parse_stat(text: &str) -> Option<(String, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let f: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    let u: u64 = f.get(11)?.parse().ok()?;
    let s: u64 = f.get(12)?.parse().ok()?;
    Some((comm, u + s))
}

/// The run-queue wait (ns) of a `/proc/…/schedstat` line: `on-cpu-ns wait-ns slices`.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

fn read_ticks(dir: &str, pid: u32, tid: u32) -> Option<ThreadTicks> {
    let (comm, ticks) = std::fs::read_to_string(format!("{dir}/stat"))
        .ok()
        .as_deref()
        .and_then(parse_stat)?;
    let wait_ns = std::fs::read_to_string(format!("{dir}/schedstat"))
        .ok()
        .as_deref()
        .and_then(parse_schedstat)
        .unwrap_or(0);
    Some(ThreadTicks {
        pid,
        tid,
        comm,
        ticks,
        wait_ns,
    })
}

fn threads_of(pid: u32) -> Vec<ThreadTicks> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|tid| read_ticks(&format!("/proc/{pid}/task/{tid}"), pid, tid))
        .collect()
}

fn snapshot(server: &[ProcessId]) -> Snapshot {
    let alive: Vec<u32> = server
        .iter()
        .filter(|p| p.is_alive())
        .map(|p| p.pid)
        .collect();
    Snapshot {
        at: Instant::now(),
        host: std::fs::read_to_string("/proc/stat")
            .map(|t| nsperf_core::cpu::parse_proc_stat(&t))
            .unwrap_or_default(),
        me: nsperf_core::cpu::process_times(),
        my_threads: threads_of(std::process::id()),
        server_procs: alive
            .iter()
            .filter_map(|&p| read_ticks(&format!("/proc/{p}"), p, p))
            .collect(),
        server: alive.iter().flat_map(|&p| threads_of(p)).collect(),
    }
}

/// Lists a server's processes now.
pub type ServerProcesses = Box<dyn Fn() -> Vec<ProcessId> + Send>;

/// Snapshots every `period` on a background thread until [`CpuWatch::finish`].
#[derive(Debug)]
pub struct CpuWatch {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<Snapshot>>>,
    server_known: bool,
}

impl CpuWatch {
    /// Starts watching; `server` lists the server's processes at each snapshot (`None`: not
    /// on this host), so processes a server forks during the pass (smbd's child per client
    /// connection) are counted from their first sighting.
    pub fn start(server: Option<ServerProcesses>, period: Duration) -> CpuWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let server_known = server.is_some();
        let list = move || server.as_ref().map(|f| f()).unwrap_or_default();
        let handle = std::thread::Builder::new()
            .name("doctor-cpu".into())
            .spawn(move || {
                let mut v = vec![snapshot(&list())];
                while !s.load(Ordering::Acquire) {
                    std::thread::sleep(period);
                    v.push(snapshot(&list()));
                }
                v
            })
            .ok();
        CpuWatch {
            stop,
            handle,
            server_known,
        }
    }

    /// Stops and returns CPU use between `from` and `to` (the measured pass).
    pub fn finish(mut self, from: Instant, to: Instant) -> PassCpu {
        self.stop.store(true, Ordering::Release);
        let snaps = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        usage(&snaps, from, to, self.server_known, cores(), clock_ticks())
    }
}

impl Drop for CpuWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

fn cores() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// Change of one thread's counters over a window.
struct Delta<'a> {
    thread: &'a ThreadTicks,
    ticks: u64,
    wait_ns: u64,
}

/// What each thread (or process) used over `window`: its last values in the window minus
/// those in the first snapshot (0 when it started later), so a thread that ended inside the
/// window keeps what it used until its last sighting.
fn deltas<'a>(
    window: &'a [Snapshot],
    of: impl Fn(&'a Snapshot) -> &'a Vec<ThreadTicks>,
) -> Vec<Delta<'a>> {
    let Some(first) = window.first() else {
        return Vec::new();
    };
    let mut last: Vec<&ThreadTicks> = Vec::new();
    for s in window {
        for t in of(s) {
            match last.iter_mut().find(|x| x.pid == t.pid && x.tid == t.tid) {
                Some(x) => *x = t,
                None => last.push(t),
            }
        }
    }
    last.into_iter()
        .map(|t| {
            let before = of(first).iter().find(|x| x.pid == t.pid && x.tid == t.tid);
            Delta {
                thread: t,
                ticks: t.ticks.saturating_sub(before.map_or(0, |b| b.ticks)),
                wait_ns: t.wait_ns.saturating_sub(before.map_or(0, |b| b.wait_ns)),
            }
        })
        .collect()
}

/// The longest run-queue wait of one thread over the window, as % of it.
fn most_delayed(d: &[Delta<'_>], wall_s: f64) -> f64 {
    d.iter().map(|x| x.wait_ns).max().unwrap_or(0) as f64 / 1e9 / wall_s * 100.0
}

/// CPU between the last snapshot at or before `from` and the first at or after `to` (the
/// pass, widened to the snapshots around it).
pub fn usage(
    snaps: &[Snapshot],
    from: Instant,
    to: Instant,
    server_known: bool,
    cores: u32,
    tick_hz: f64,
) -> PassCpu {
    if snaps.is_empty() {
        return PassCpu::default();
    }
    let ia = snaps.iter().rposition(|s| s.at <= from).unwrap_or(0);
    let ib = snaps
        .iter()
        .position(|s| s.at >= to)
        .unwrap_or(snaps.len() - 1)
        .max(ia);
    let (a, b) = (&snaps[ia], &snaps[ib]);
    let wall = b.at.saturating_duration_since(a.at).as_secs_f64();
    if wall <= 0.0 {
        return PassCpu::default();
    }
    let window = &snaps[ia..=ib];
    let per_core = nsperf_core::cpu::usage_between(&a.host, &b.host);
    let host_mean_pct = if per_core.is_empty() {
        0.0
    } else {
        per_core.iter().map(|c| c.busy_pct).sum::<f64>() / per_core.len() as f64
    };
    let host_busiest_core_pct = per_core.iter().map(|c| c.busy_pct).fold(0.0, f64::max);
    let client_process_pct = match (a.me, b.me) {
        (Some(p), Some(n)) => 100.0 * ((n.user_s - p.user_s) + (n.sys_s - p.sys_s)) / wall,
        _ => 0.0,
    };
    let client_cpu_wait_pct = most_delayed(&deltas(window, |s| &s.my_threads), wall);
    let pct = |ticks: u64| 100.0 * ticks as f64 / tick_hz / wall;
    let server = server_known.then(|| {
        let procs = deltas(window, |s| &s.server_procs);
        let threads = deltas(window, |s| &s.server);
        let busiest = threads.iter().max_by_key(|d| d.ticks);
        ServerCpu {
            process_pct: pct(procs.iter().map(|d| d.ticks).sum()),
            busiest_thread_pct: busiest.map_or(0.0, |d| pct(d.ticks)),
            busiest_thread: busiest
                .map(|d| format!("{} {}", d.thread.comm, d.thread.tid))
                .unwrap_or_default(),
            cpu_wait_pct: most_delayed(&threads, wall),
            cores,
        }
    });
    PassCpu {
        client_process_pct,
        client_cpu_wait_pct,
        host_mean_pct,
        host_busiest_core_pct,
        server,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(busy: u64, idle: u64) -> CpuTimes {
        CpuTimes {
            user: busy,
            idle,
            ..Default::default()
        }
    }

    #[test]
    fn stat_lines_parse_with_spaces_in_the_name() {
        let line = "4242 (nfs worker 1) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1 0 99 0 0";
        assert_eq!(parse_stat(line), Some(("nfs worker 1".into(), 200)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
        assert_eq!(parse_schedstat("1200 3400 5\n"), Some(3400));
        assert_eq!(parse_schedstat("1200"), None);
    }

    fn thread(tid: u32, comm: &str, ticks: u64, wait_ms: u64) -> ThreadTicks {
        ThreadTicks {
            pid: 9,
            tid,
            comm: comm.into(),
            ticks,
            wait_ns: wait_ms * 1_000_000,
        }
    }

    #[test]
    fn usage_between_the_snapshots_around_a_pass() {
        let t0 = Instant::now();
        let snap = |s: f64, busy: u64, me: f64, ticks: [u64; 2]| Snapshot {
            at: t0 + Duration::from_secs_f64(s),
            host: vec![(0, times(busy, 1000 - busy)), (1, times(busy / 2, 0))],
            me: Some(ProcessTimes {
                user_s: me,
                sys_s: 0.0,
            }),
            my_threads: vec![thread(1, "nsperf", 0, (s * 100.0) as u64)],
            server_procs: vec![thread(9, "nsperf", ticks[0] + ticks[1], 0)],
            server: vec![
                thread(9, "nsperf", ticks[0], 0),
                thread(11, "nfs-conn", ticks[1], (s * 500.0) as u64),
            ],
        };
        let snaps = vec![
            snap(0.0, 0, 0.0, [0, 0]),
            snap(1.0, 100, 0.5, [10, 20]),
            snap(3.0, 300, 1.5, [20, 210]),
            snap(4.0, 400, 2.0, [20, 300]),
        ];
        // The pass ran from 1.2 s to 2.9 s: snapshots 1.0 and 3.0 bracket it.
        let u = usage(
            &snaps,
            t0 + Duration::from_secs_f64(1.2),
            t0 + Duration::from_secs_f64(2.9),
            true,
            2,
            100.0,
        );
        assert!((u.client_process_pct - 50.0).abs() < 1e-6);
        assert!((u.client_cpu_wait_pct - 10.0).abs() < 1e-6, "{u:?}");
        let s = u.server.unwrap();
        assert!((s.busiest_thread_pct - 95.0).abs() < 1e-6, "{s:?}");
        assert_eq!(s.busiest_thread, "nfs-conn 11");
        assert!((s.process_pct - 100.0).abs() < 1e-6);
        assert!((s.cpu_wait_pct - 50.0).abs() < 1e-6);
        assert_eq!(s.cores, 2);
        // The connection's thread ended after 3.0 s: it keeps what it used until then, and
        // the process counter (which includes exited threads) keeps all of it.
        let mut snaps = snaps;
        snaps[3].server.retain(|t| t.tid != 11);
        let u = usage(
            &snaps,
            t0 + Duration::from_secs_f64(1.2),
            t0 + Duration::from_secs_f64(3.5),
            true,
            2,
            100.0,
        );
        let s = u.server.unwrap();
        assert!((s.busiest_thread_pct - 63.333).abs() < 0.01, "{s:?}");
        assert!((s.process_pct - 96.666).abs() < 0.01, "{s:?}");
        let u = usage(&snaps, t0, t0, false, 2, 100.0);
        assert!(u.server.is_none());
        assert_eq!(usage(&[], t0, t0, true, 2, 100.0), PassCpu::default());
    }
}
