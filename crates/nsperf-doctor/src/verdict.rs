//! The verdict: which layer limits reads and writes through the file protocol, from the
//! figures alone (a pure function, no I/O, no clock).
//!
//! For each direction the measured ceilings are: the storage at the server (only when the
//! protocol's data came from it: a cold read, or a write, whose COMMIT reaches the disk), the
//! network in that direction (TCP payload rate), and the RPC window — `N` RPCs of `B` bytes
//! in flight can carry at most `N·B` per `RTT + B/link` (a round trip of the NULL RPC plus the
//! time to move one RPC's data at the measured link rate; the window formula of
//! Mathis et al. 1997 and every windowed protocol, with the serialisation of the data
//! counted). The protocol's throughput at or above [`BOUND_SHARE`] of the lowest ceiling
//! means that ceiling's layer is the limit. Below it, in this order: a saturated CPU (the
//! server's busiest thread or all its cores, then this client); RPCs whose median time is
//! mostly round trip ([`ROUND_TRIP_SHARE`]: too few in flight for the latency, whatever
//! stretches each RPC beyond the window arithmetic — server time, TCP pacing); a data-path
//! thread that waited [`CPU_WAIT_PCT`] of the pass on a run queue (a shared host); else the
//! limit is in the protocol or the server beyond what was measured — or, when a layer was
//! not measured, undetermined: a layer not measured is named as such, never guessed.

pub use crate::model::{Ceiling, CeilingKind, Diagnosis, DirectionVerdict, Limit};
use crate::model::{Direction, Figures, NetworkFigures, ProtocolFigures};
use nsperf_core::units::{BitRate, Bytes};

/// A protocol figure at or above this share of a ceiling is bound by it.
pub const BOUND_SHARE: f64 = 0.80;
/// A thread or core busy at or above this share (%) of the pass is saturated.
pub const CPU_SATURATED_PCT: f64 = 90.0;
/// A thread that waited this share (%) of the pass on a run queue lost that much time to
/// other load on the host.
pub const CPU_WAIT_PCT: f64 = 20.0;
/// Below every ceiling, RPCs whose median time is at least this share round trip wait on
/// round trips: too few in flight for the latency.
pub const ROUND_TRIP_SHARE: f64 = 0.5;
/// Another ceiling within this factor of the lowest is named beside it.
const NEAR: f64 = 1.10;
/// A protocol figure above a ceiling by more than this factor contradicts it.
const ABOVE: f64 = 1.15;

/// `112 MiB/s`.
pub fn rate(bytes_per_s: f64) -> String {
    format!("{}/s", Bytes(bytes_per_s.max(0.0).round() as u64))
}

fn ms(ns: f64) -> String {
    if ns < 10e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.0} ms", ns / 1e6)
    }
}

/// The RPC window ceiling: `n` RPCs of `b` bytes in flight, each taking one NULL round trip
/// plus the time to carry `b` bytes at the link rate (when measured).
/// The protocol's name and what it calls one request (`NFS`, `RPC`; `SMB`, `request`).
fn words(p: &ProtocolFigures) -> (&'static str, &'static str) {
    if p.protocol.is_smb() {
        ("SMB", "request")
    } else {
        ("NFS", "RPC")
    }
}

fn rpc_window(p: &ProtocolFigures, link: Option<f64>) -> (f64, String) {
    let b = p.rpc_bytes as f64;
    let n = (p.rpcs_in_flight as f64) * (p.connections.max(1) as f64);
    let rtt = p.null_rtt_ns as f64;
    let carry_ns = link.filter(|l| *l > 0.0).map(|l| b / l * 1e9);
    let per_rpc_ns = rtt + carry_ns.unwrap_or(0.0);
    let cap = if per_rpc_ns > 0.0 {
        n * b / (per_rpc_ns / 1e9)
    } else {
        f64::INFINITY
    };
    let inflight = if p.connections > 1 {
        format!(
            "{} × {} in flight on {} connections",
            p.rpcs_in_flight, p.connections, p.connections
        )
    } else {
        format!("{} in flight", p.rpcs_in_flight)
    };
    let time = match carry_ns {
        Some(c) => format!(
            "({} RTT + {} to carry {} at {})",
            ms(rtt),
            ms(c),
            Bytes(p.rpc_bytes),
            rate(link.unwrap_or(0.0))
        ),
        None => format!("{} RTT", ms(rtt)),
    };
    let basis = format!(
        "{} {}s, {inflight}, {time} → ceiling {}",
        Bytes(p.rpc_bytes),
        words(p).1,
        rate(cap)
    );
    (cap, basis)
}

fn net_words(n: &NetworkFigures, d: Direction) -> String {
    let bps = n.toward(d).throughput_bps;
    format!("network {} ({})", BitRate(bps), rate(bps / 8.0))
}

/// The verdict of one direction from the figures.
pub fn diagnose_direction(f: &Figures, d: Direction) -> DirectionVerdict {
    let proto = match &f.protocol {
        crate::model::Layer::Measured(p) => p,
        other => {
            let why = other.why_not().unwrap_or("").to_string();
            return DirectionVerdict {
                direction: d,
                limit: Limit::NotMeasured,
                protocol_bytes_per_s: None,
                ceilings: Vec::new(),
                not_measured: vec![format!("protocol: {why}")],
                inconsistent: Vec::new(),
                message: format!("NFS {d} not measured: {why}"),
            };
        }
    };
    let pass = proto.pass(d);
    let x = pass.bytes_per_s;
    let mut ceilings: Vec<Ceiling> = Vec::new();
    let mut not_measured = Vec::new();
    let mut notes = Vec::new();
    let mut push = |kind, cap: f64, basis: String| {
        ceilings.push(Ceiling {
            kind,
            bytes_per_s: cap,
            share_pct: if cap > 0.0 { 100.0 * x / cap } else { 0.0 },
            basis,
        })
    };
    match &f.storage {
        crate::model::Layer::Measured(s) => {
            if d == Direction::Read && !proto.read_from_storage() {
                notes.push(format!(
                    "disk {} not in the path ({} read: the server's cache held the file)",
                    rate(s.read.bytes_per_s),
                    proto.read_cache
                ));
            } else {
                let r = s.pass(d).bytes_per_s;
                push(CeilingKind::Storage, r, format!("disk {}", rate(r)));
            }
        }
        other => not_measured.push(format!(
            "storage at the server ({})",
            other.why_not().unwrap_or("")
        )),
    }
    let link = match &f.network {
        crate::model::Layer::Measured(n) => {
            let b = n.toward(d).bytes_per_s();
            push(CeilingKind::Network, b, net_words(n, d));
            Some(b)
        }
        other => {
            not_measured.push(format!("network ({})", other.why_not().unwrap_or("")));
            None
        }
    };
    let (cap, basis) = rpc_window(proto, link);
    push(CeilingKind::RpcWindow, cap, basis);
    ceilings.sort_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s));
    let inconsistent: Vec<String> = ceilings
        .iter()
        .filter(|c| c.bytes_per_s > 0.0 && x > ABOVE * c.bytes_per_s)
        .map(|c| {
            format!(
                "{} {d} {} is {:.0} % of {}: that figure is too low (measured at another moment on a shared machine, or a cache the test did not reach)",
                words(proto).0,
                rate(x),
                c.share_pct,
                c.basis
            )
        })
        .collect();
    let lowest = &ceilings[0];
    let figures = figures_line(&ceilings, &notes, words(proto).0, d, x);
    let (limit, tail) = if x >= BOUND_SHARE * lowest.bytes_per_s {
        let near: Vec<String> = ceilings[1..]
            .iter()
            .filter(|c| c.bytes_per_s <= NEAR * lowest.bytes_per_s)
            .map(|c| format!("{} is as low", c.basis))
            .collect();
        let mut t = format!(
            "{:.0} % of the {}: {}",
            lowest.share_pct,
            kind_name(lowest.kind),
            Limit::from(lowest.kind).words()
        );
        if lowest.kind == CeilingKind::RpcWindow {
            t.push_str(&format!(" — {}", lowest.basis));
        }
        if !near.is_empty() {
            t.push_str(&format!(" ({})", near.join("; ")));
        }
        (Limit::from(lowest.kind), t)
    } else {
        below_every_ceiling(proto, pass, lowest, &ceilings, &not_measured, link)
    };
    let mut message = format!("{figures} = {tail}");
    for n in &not_measured {
        message.push_str(&format!("; {n} not measured"));
    }
    DirectionVerdict {
        direction: d,
        limit,
        protocol_bytes_per_s: Some(x),
        ceilings,
        not_measured,
        inconsistent,
        message,
    }
}

fn kind_name(k: CeilingKind) -> &'static str {
    match k {
        CeilingKind::Storage => "disk",
        CeilingKind::Network => "network",
        CeilingKind::RpcWindow => "RPC window",
    }
}

/// `disk 280 MiB/s; network 937 Mbit/s (112 MiB/s); NFS read 84 MiB/s`.
fn figures_line(
    ceilings: &[Ceiling],
    notes: &[String],
    proto: &str,
    d: Direction,
    x: f64,
) -> String {
    let mut parts: Vec<String> = Vec::new();
    for kind in [CeilingKind::Storage, CeilingKind::Network] {
        if let Some(c) = ceilings.iter().find(|c| c.kind == kind) {
            parts.push(c.basis.clone());
        }
    }
    parts.extend(notes.iter().cloned());
    parts.push(format!("{proto} {d} {}", rate(x)));
    parts.join("; ")
}

/// Where one RPC's time went: `each RPC took 60 ms (median) = 40 ms round trip + 0.95 ms
/// to carry 64 KiB + 19 ms more`.
fn rpc_time(p: &ProtocolFigures, pass: &crate::model::Pass, link: Option<f64>) -> String {
    let t = pass.lat_p50_ns as f64;
    let rtt = p.null_rtt_ns as f64;
    let carry = link
        .filter(|l| *l > 0.0)
        .map_or(0.0, |l| p.rpc_bytes as f64 / l * 1e9);
    let more = t - rtt - carry;
    let mut s = format!(
        "each {} took {} (median) = {} round trip",
        words(p).1,
        ms(t),
        ms(rtt)
    );
    if carry > 0.0 {
        s.push_str(&format!(" + {} to carry {}", ms(carry), Bytes(p.rpc_bytes)));
    }
    if more > 0.0 {
        s.push_str(&format!(
            " + {} more (server time, queueing or TCP pacing{})",
            ms(more),
            p.congestion_control
                .as_deref()
                .map(|c| format!("; congestion control {c}"))
                .unwrap_or_default()
        ));
    }
    s
}

/// The protocol is well below every measured ceiling: a saturated CPU, RPCs that wait on
/// round trips, CPUs shared with other load, or the protocol — or a layer not measured.
fn below_every_ceiling(
    proto: &ProtocolFigures,
    pass: &crate::model::Pass,
    lowest: &Ceiling,
    ceilings: &[Ceiling],
    not_measured: &[String],
    link: Option<f64>,
) -> (Limit, String) {
    let window = ceilings.iter().find(|c| c.kind == CeilingKind::RpcWindow);
    let share = format!(
        "{:.0} % of the {}",
        lowest.share_pct,
        kind_name(lowest.kind)
    );
    let cpu = &pass.cpu;
    let rtt_share = if pass.lat_p50_ns > 0 {
        proto.null_rtt_ns as f64 / pass.lat_p50_ns as f64
    } else {
        0.0
    };
    let waited = cpu
        .server
        .as_ref()
        .map_or(0.0, |s| s.cpu_wait_pct)
        .max(cpu.client_cpu_wait_pct);
    let (limit, why) = if let Some(s) = cpu.server.as_ref().filter(|s| {
        s.busiest_thread_pct >= CPU_SATURATED_PCT
            || s.process_pct >= CPU_SATURATED_PCT * s.cores.max(1) as f64
    }) {
        (
            Limit::ServerCpu,
            format!(
                "server CPU {:.0} % (busiest thread {} at {:.0} %)",
                s.process_pct, s.busiest_thread, s.busiest_thread_pct
            ),
        )
    } else if cpu.client_process_pct >= CPU_SATURATED_PCT * proto.connections.max(1) as f64 {
        (
            Limit::ClientCpu,
            format!("client CPU {:.0} %", cpu.client_process_pct),
        )
    } else if let Some(w) = window.filter(|_| rtt_share >= ROUND_TRIP_SHARE) {
        (
            Limit::RpcWindow,
            format!(
                "{}: the RPCs in flight wait on round trips; {}",
                rpc_time(proto, pass, link),
                w.basis
            ),
        )
    } else if waited >= CPU_WAIT_PCT {
        (
            Limit::HostCpu,
            format!(
                "a thread of the {} waited {:.0} % of the pass for a CPU (run-queue delay; this host's cores {:.0} % busy: the client, the server, the lab's link and whatever else runs here share them)",
                if cpu.client_cpu_wait_pct >= waited {
                    "client"
                } else {
                    "server"
                },
                waited,
                cpu.host_mean_pct
            ),
        )
    } else if !not_measured.is_empty() {
        let server = if cpu.server.is_none() {
            ", nor the server's CPU"
        } else {
            ""
        };
        (
            Limit::Undetermined,
            format!(
                "below every measured ceiling, no measured CPU saturated; what was not measured{server} may be the limit"
            ),
        )
    } else {
        let server_cpu = cpu
            .server
            .as_ref()
            .map(|s| format!("server CPU {:.0} %", s.process_pct))
            .unwrap_or_else(|| "server CPU not measured".into());
        let name = words(proto).0;
        (
            Limit::Protocol,
            format!(
                "below every measured ceiling with no CPU saturated ({server_cpu}, client {:.0} %): the loss is in the {name} server or protocol handling (its thread pool, locks, its storage under {name}'s access pattern), beyond what nsperf measures; {}",
                cpu.client_process_pct,
                rpc_time(proto, pass, link)
            ),
        )
    };
    let mut t = format!("{share}: {} — {why}", limit.words());
    if limit != Limit::RpcWindow {
        if let Some(w) = window {
            t.push_str(&format!("; {} is not it", w.basis));
        }
    }
    (limit, t)
}

/// The verdict of both directions.
pub fn diagnose(f: &Figures) -> Diagnosis {
    Diagnosis {
        read: diagnose_direction(f, Direction::Read),
        write: diagnose_direction(f, Direction::Write),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    const MIB: f64 = 1048576.0;

    fn pass(mib_s: f64) -> Pass {
        Pass {
            bytes_per_s: mib_s * MIB,
            bytes: 0,
            elapsed_s: 5.0,
            lat_p50_ns: 0,
            lat_p99_ns: 0,
            cpu: PassCpu {
                client_process_pct: 20.0,
                client_cpu_wait_pct: 1.0,
                host_mean_pct: 30.0,
                host_busiest_core_pct: 40.0,
                server: Some(ServerCpu {
                    process_pct: 30.0,
                    busiest_thread_pct: 25.0,
                    busiest_thread: "nsperf 12".into(),
                    cpu_wait_pct: 2.0,
                    cores: 2,
                }),
            },
        }
    }

    fn storage(read: f64, write: f64) -> Layer<StorageFigures> {
        Layer::Measured(StorageFigures {
            dir: "/srv".into(),
            fs: "ext4".into(),
            read: pass(read),
            write: pass(write),
        })
    }

    fn dir(mbit: f64) -> NetDirection {
        NetDirection {
            throughput_bps: mbit * 1e6,
            retransmits: 0,
            rtt_loaded_us: None,
            peer_window_bytes: None,
            rwnd_limited_pct: None,
            mss_bytes: Some(1448),
        }
    }

    fn network(mbit: f64, rtt_ms: f64) -> Layer<NetworkFigures> {
        Layer::Measured(NetworkFigures {
            server: "10.77.0.2:5301".into(),
            started_by_doctor: true,
            to_client: dir(mbit),
            to_server: dir(mbit),
            rtt_idle_ns: (rtt_ms * 1e6) as u64,
            lab_mtu_bytes: Some(1500),
        })
    }

    fn protocol(read: f64, write: f64, rpc: u64, inflight: u32, rtt_ms: f64) -> ProtocolFigures {
        ProtocolFigures {
            protocol: nsperf_io::RemoteProtocol::Nfs3,
            server: "10.77.0.2:2049".into(),
            rpc_bytes: rpc,
            rpcs_in_flight: inflight,
            connections: 1,
            null_rtt_ns: (rtt_ms * 1e6) as u64,
            congestion_control: Some("bbr".into()),
            read_cache: nsperf_io::CacheMode::Cold,
            read: pass(read),
            write: pass(write),
        }
    }

    fn figures(s: Layer<StorageFigures>, n: Layer<NetworkFigures>, p: ProtocolFigures) -> Figures {
        Figures {
            storage: s,
            network: n,
            protocol: Layer::Measured(p),
        }
    }

    #[test]
    fn slow_disk_is_storage_bound() {
        let f = figures(
            storage(10.0, 10.0),
            network(2000.0, 0.2),
            protocol(9.6, 9.2, 1 << 20, 8, 0.2),
        );
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::Storage, "{}", d.read.message);
        assert_eq!(d.write.limit, Limit::Storage);
        assert!(
            d.read
                .message
                .starts_with("disk 10 MiB/s; network 2.00 Gbit/s (238 MiB/s); NFS read 9.60 MiB/s = 96 % of the disk: storage-bound"),
            "{}",
            d.read.message
        );
        assert!(d.read.inconsistent.is_empty());
    }

    #[test]
    fn slow_link_is_network_bound() {
        // 40 Mbit/s = 4.77 MiB/s; 8 × 1 MiB in flight is far more than a BDP.
        let f = figures(
            storage(500.0, 300.0),
            network(40.0, 1.0),
            protocol(4.5, 4.4, 1 << 20, 8, 1.0),
        );
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::Network, "{}", d.read.message);
        assert_eq!(d.write.limit, Limit::Network);
        assert!(
            d.read
                .message
                .contains("= 94 % of the network: network-bound")
        );
        assert_eq!(d.read.ceilings[0].kind, CeilingKind::Network);
    }

    #[test]
    fn long_rtt_one_rpc_is_protocol_bound_with_its_arithmetic() {
        // 64 KiB per 40 ms (+ 0.5 ms to carry it at 1 Gbit/s) = 1.54 MiB/s.
        let f = figures(
            storage(500.0, 300.0),
            network(1000.0, 40.0),
            protocol(1.5, 1.45, 64 << 10, 1, 40.0),
        );
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::RpcWindow, "{}", d.read.message);
        let c = &d.read.ceilings[0];
        assert_eq!(c.kind, CeilingKind::RpcWindow);
        assert!(
            (c.bytes_per_s / MIB - 1.543).abs() < 0.01,
            "{}",
            c.bytes_per_s
        );
        assert!(
            d.read.message.contains(
                "protocol-bound (RPCs in flight) — 64 KiB RPCs, 1 in flight, (40 ms RTT + 0.52 ms to carry 64 KiB at 119 MiB/s) → ceiling 1.54 MiB/s"
            ),
            "{}",
            d.read.message
        );
    }

    #[test]
    fn below_every_ceiling_names_a_saturated_server_cpu() {
        // 4 × 64 KiB per (0.4 ms + 0.56 ms) = 260 MiB/s: not the window.
        let mut p = protocol(84.0, 80.0, 64 << 10, 4, 0.4);
        p.read.cpu.server = Some(ServerCpu {
            process_pct: 99.0,
            busiest_thread_pct: 98.0,
            busiest_thread: "nfsd 7".into(),
            cpu_wait_pct: 0.0,
            cores: 2,
        });
        let f = figures(storage(280.0, 200.0), network(937.0, 0.4), p);
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::ServerCpu, "{}", d.read.message);
        assert!(d.read.message.contains("busiest thread nfsd 7 at 98 %"));
        assert!(d.read.message.contains("is not it"), "{}", d.read.message);
        // The write pass had no saturated CPU: every layer measured, so it is the protocol.
        assert_eq!(d.write.limit, Limit::Protocol, "{}", d.write.message);
    }

    #[test]
    fn rpcs_that_wait_on_round_trips_are_protocol_bound_below_the_window() {
        // BBR paces each 64 KiB reply over ~20 ms: 60 ms per RPC at a 40 ms RTT, 66 % of
        // the window arithmetic; the time is still mostly round trip.
        let mut p = protocol(1.0, 1.0, 64 << 10, 1, 40.0);
        p.read.lat_p50_ns = 60_000_000;
        p.write.lat_p50_ns = 60_000_000;
        p.write.cpu.client_cpu_wait_pct = 50.0;
        let f = figures(storage(500.0, 300.0), network(550.0, 40.0), p);
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::RpcWindow, "{}", d.read.message);
        assert!(
            d.read.message.contains(
                "each RPC took 60 ms (median) = 40 ms round trip + 0.95 ms to carry 64 KiB + 19 ms more (server time, queueing or TCP pacing; congestion control bbr)"
            ),
            "{}",
            d.read.message
        );
        assert!(!d.read.message.contains("is not it"));
        // Round trips come before run-queue waits: the RPC time is mostly round trip.
        assert_eq!(d.write.limit, Limit::RpcWindow);
    }

    #[test]
    fn threads_waiting_for_a_cpu_name_the_shared_host() {
        let mut p = protocol(60.0, 60.0, 1 << 20, 8, 0.2);
        p.read.lat_p50_ns = 100_000_000;
        p.read.cpu.client_cpu_wait_pct = 35.0;
        p.read.cpu.host_mean_pct = 100.0;
        let f = figures(storage(500.0, 500.0), network(1000.0, 0.2), p);
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::HostCpu, "{}", d.read.message);
        assert!(
            d.read
                .message
                .contains("a thread of the client waited 35 %")
        );
        // The write pass had no waits: every layer measured, so it is the protocol.
        assert_eq!(d.write.limit, Limit::Protocol, "{}", d.write.message);
    }

    #[test]
    fn a_layer_not_measured_is_never_guessed() {
        let mut p = protocol(20.0, 20.0, 1 << 20, 8, 0.4);
        p.read.cpu.server = None;
        let f = Figures {
            storage: Layer::NotMeasured {
                reason: "nsperf does not run at 192.0.2.7".into(),
            },
            network: Layer::NotMeasured {
                reason: "no nsperf server answered".into(),
            },
            protocol: Layer::Measured(p),
        };
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::Undetermined, "{}", d.read.message);
        assert_eq!(d.read.not_measured.len(), 2);
        assert!(d.read.message.contains("nor the server's CPU"));
        assert!(
            d.read
                .message
                .contains("storage at the server (nsperf does not run at 192.0.2.7) not measured")
        );
        // Only the RPC window was a ceiling.
        assert_eq!(d.read.ceilings.len(), 1);
    }

    #[test]
    fn remote_warm_read_leaves_the_disk_out_of_the_path() {
        let mut p = protocol(100.0, 9.0, 1 << 20, 8, 0.2);
        p.read_cache = nsperf_io::CacheMode::RemoteWarm;
        let f = figures(storage(10.0, 10.0), network(1000.0, 0.2), p);
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::Network, "{}", d.read.message);
        assert!(d.read.message.contains("not in the path"));
        assert!(d.read.inconsistent.is_empty());
        assert_eq!(d.write.limit, Limit::Storage);
    }

    #[test]
    fn a_rate_above_a_ceiling_is_called_inconsistent() {
        let f = figures(
            storage(50.0, 50.0),
            network(1000.0, 0.2),
            protocol(80.0, 40.0, 1 << 20, 8, 0.2),
        );
        let d = diagnose(&f);
        assert_eq!(d.read.inconsistent.len(), 1, "{:?}", d.read.inconsistent);
        assert!(d.read.inconsistent[0].contains("160 % of disk 50 MiB/s"));
        assert_eq!(d.read.limit, Limit::Storage);
    }

    #[test]
    fn protocol_not_measured_gives_no_verdict() {
        let f = Figures {
            storage: storage(1.0, 1.0),
            network: network(1.0, 1.0),
            protocol: Layer::Failed {
                error: "the NFS server went away".into(),
            },
        };
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::NotMeasured);
        assert!(d.write.message.contains("went away"));
    }

    #[test]
    fn close_ceilings_are_both_named() {
        let f = figures(
            storage(110.0, 110.0),
            network(960.0, 0.2),
            protocol(100.0, 100.0, 1 << 20, 8, 0.2),
        );
        let d = diagnose(&f);
        assert_eq!(d.read.limit, Limit::Storage);
        assert!(
            d.read
                .message
                .contains("network 960 Mbit/s (114 MiB/s) is as low")
        );
    }

    #[test]
    fn verdict_serializes_with_snake_case_names() {
        let f = figures(
            storage(10.0, 10.0),
            network(2000.0, 0.2),
            protocol(9.6, 9.2, 1 << 20, 8, 0.2),
        );
        let j = serde_json::to_value(diagnose(&f)).unwrap();
        assert_eq!(j["read"]["limit"], "storage");
        assert_eq!(j["read"]["ceilings"][0]["kind"], "storage");
        let l: Layer<StorageFigures> = Layer::NotMeasured { reason: "x".into() };
        let j = serde_json::to_value(&l).unwrap();
        assert_eq!(j["status"], "not_measured");
    }
}
