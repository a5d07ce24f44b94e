//! The three measurements, each through its engine as a library: `nsperf-io` on the served
//! directory (storage), `nsperf-net` client and server (network), `nsperf-io`'s `nfs` engine
//! (protocol). Each returns its layer's figures, or why there are none.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use nsperf_io::{
    CacheMode, FsyncMode, IoError, IoReport, NetworkPath, PathCeiling, RunConfig, Target, Workload,
};
use nsperf_net::{ClientConfig, Direction as NetDir, Mode, NetReport, NetSpec, TestParams};
use nsperf_nfs::Session;

use crate::config::{DoctorConfig, ServerTarget};
use crate::cpu::CpuWatch;
use crate::error::DoctorError;
use crate::locate::LabServer;
use crate::model::{
    Layer, NetDirection, NetworkFigures, Pass, ProtocolFigures, ServerPlace, StorageFigures,
};

/// How often CPU is sampled during a pass.
const CPU_PERIOD: Duration = Duration::from_millis(200);
/// NULL RPCs timed for the protocol's round trip.
const NULL_CALLS: usize = 21;
/// Warm-up of each network direction (slow start), excluded from its figure.
pub const NET_WARMUP: Duration = Duration::from_secs(1);
/// Measured time of the idle-RTT test.
const RR_TIME: Duration = Duration::from_secs(1);

/// An engine error, or Ctrl-C (which ends the whole run).
fn failed<T>(e: IoError) -> Result<Layer<T>, DoctorError> {
    match e {
        IoError::Interrupted => Err(DoctorError::Interrupted),
        e => Ok(Layer::Failed {
            error: e.to_string(),
        }),
    }
}

/// Runs one io pass and the CPU watch around it.
fn timed_pass(
    rc: &RunConfig,
    server: Option<crate::cpu::ServerProcesses>,
) -> Result<(IoReport, Pass), IoError> {
    let watch = CpuWatch::start(server, CPU_PERIOD);
    let rep = nsperf_io::run(rc)?;
    let end = Instant::now();
    let s = &rep.summary;
    // The measured pass is the end of the run (layout and cache phase come first).
    let from = end
        .checked_sub(Duration::from_secs_f64(s.elapsed_s))
        .unwrap_or(end);
    let cpu = watch.finish(from, end);
    let pass = Pass {
        bytes_per_s: s.throughput_bytes_per_s,
        bytes: s.bytes,
        elapsed_s: s.elapsed_s,
        lat_p50_ns: s.lat_p50_ns,
        lat_p99_ns: s.lat_p99_ns,
        cpu,
    };
    Ok((rep, pass))
}

fn io_config(cfg: &DoctorConfig, target: Target, w: Workload) -> RunConfig {
    let mut rc = RunConfig::new(target, w, cfg.size_bytes, cfg.bs_bytes);
    rc.time = Some(cfg.pass_time);
    rc.connect_timeout = cfg.connect_timeout;
    rc
}

/// (a) Sequential write (fsync at the end) and cold read of the served directory, in the
/// server's site.
pub fn storage(
    cfg: &DoctorConfig,
    srv: &LabServer,
    findings: &mut Vec<nsperf_core::report::Finding>,
) -> Result<Layer<StorageFigures>, DoctorError> {
    let dir = srv.dir.clone();
    let run = || -> Result<Result<_, IoError>, DoctorError> {
        let mut w = io_config(cfg, Target::Dir { path: dir.clone() }, Workload::SeqWrite);
        w.fsync = FsyncMode::End;
        let mut r = io_config(cfg, Target::Dir { path: dir.clone() }, Workload::SeqRead);
        r.cache = CacheMode::Cold;
        Ok(timed_pass(&w, None).and_then(|wr| Ok((wr, timed_pass(&r, None)?))))
    };
    let out = nsperf_lab::netns::with_netns(&srv.site.netns, run)?;
    let ((wrep, write), (rrep, read)) = match out {
        Ok(x) => x,
        Err(e) => return failed(e),
    };
    let fs = rrep
        .summary
        .target_fs
        .as_ref()
        .map(|f| format!("{} {}", f.fs_type, f.mount_source))
        .unwrap_or_default();
    keep_findings("storage", &wrep.findings, findings);
    keep_findings("storage", &rrep.findings, findings);
    Ok(Layer::Measured(StorageFigures {
        dir,
        fs,
        read,
        write,
    }))
}

/// Engine findings worth repeating (warnings and limits), their ids prefixed by the layer.
fn keep_findings(
    layer: &str,
    from: &[nsperf_core::report::Finding],
    to: &mut Vec<nsperf_core::report::Finding>,
) {
    for f in from
        .iter()
        .filter(|f| f.severity >= nsperf_core::report::Severity::Warning)
    {
        if !to.iter().any(|t| t.message == f.message) {
            let mut f = f.clone();
            f.id = format!("{layer}.{}", f.id);
            to.push(f);
        }
    }
}

/// Where the network test's nsperf server is.
pub enum NetServer<'a> {
    /// Started by doctor in the file server's lab site.
    InSite(&'a LabServer),
    /// Named by the user (`--net-server`).
    Named(String, u16),
    /// Tried at the file server's address on the default port.
    Probe(String),
}

fn one_test(
    host: &str,
    port: u16,
    params: TestParams,
    connect_timeout: Duration,
) -> Result<NetReport, nsperf_net::NetError> {
    let cc = ClientConfig {
        host: host.to_string(),
        port,
        params: params.clone(),
        psk: None,
        connect_timeout,
        server_kind: nsperf_net::ServerKind::Nsperf,
        local: nsperf_net::LocalEnd::default(),
    };
    let run = nsperf_net::run_client(&cc, |_| {})?;
    let spec = NetSpec {
        target: host.to_string(),
        port,
        loopback: false,
        params,
        peer: nsperf_net::Peer::Nsperf,
        local: nsperf_net::LocalEnd::default(),
    };
    Ok(nsperf_net::build_report(
        &run,
        spec,
        nsperf_core::host::HostFacts::collect(),
    ))
}

fn direction_of(rep: &NetReport) -> Option<NetDirection> {
    let s = &rep.summary;
    let d = s.down.as_ref().or(s.up.as_ref())?;
    let mss = rep
        .intervals
        .iter()
        .filter(|i| i.stream.is_some())
        .filter_map(|i| i.sender_tcp.map(|t| t.snd_mss))
        .filter(|&m| m > 0)
        .max();
    Some(NetDirection {
        throughput_bps: d.throughput_bps,
        retransmits: d.retransmits,
        rtt_loaded_us: d.rtt_mean_us,
        peer_window_bytes: d.peer_window_bytes,
        rwnd_limited_pct: d.rwnd_limited_pct,
        mss_bytes: mss,
    })
}

/// (b) TCP both ways and the idle RTT, against an nsperf server in (or named for) the
/// server's place. Runs in the calling thread's namespace (the client side).
pub fn network(
    cfg: &DoctorConfig,
    at: NetServer<'_>,
    findings: &mut Vec<nsperf_core::report::Finding>,
) -> Result<Layer<NetworkFigures>, DoctorError> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut serving = None;
    let (host, port, started, mtu) = match at {
        NetServer::InSite(srv) => {
            let addr = srv.site.addr;
            let server = nsperf_lab::netns::with_netns(&srv.site.netns, || {
                nsperf_net::Server::bind(
                    nsperf_net::ServerConfig {
                        bind: addr.into(),
                        port: 0,
                        max_clients: 4,
                        max_time: Some(Duration::from_secs(120)),
                        ..nsperf_net::ServerConfig::default()
                    },
                    Arc::new(|_: &str| {}),
                )
                .map_err(|e| DoctorError::Usage(format!("starting an nsperf server: {e}")))
            })?;
            let port = server.local_addr().port();
            let s = stop.clone();
            serving = Some(std::thread::spawn(move || server.serve(&s)));
            (addr.to_string(), port, true, Some(srv.lab.mtu))
        }
        NetServer::Named(h, p) => (h, p, false, None),
        NetServer::Probe(h) => (h, nsperf_net::DEFAULT_PORT, false, None),
    };
    let probing = !started && port == nsperf_net::DEFAULT_PORT && cfg.net_server.is_none();
    let bulk = |direction| TestParams {
        direction,
        duration_ns: cfg.net_time.as_nanos() as u64,
        warmup_ns: NET_WARMUP.as_nanos() as u64,
        ..TestParams::default()
    };
    let rr = TestParams {
        mode: Mode::Rr {
            request_bytes: 1,
            response_bytes: 1,
            burst: 1,
        },
        duration_ns: RR_TIME.as_nanos() as u64,
        ..TestParams::default()
    };
    let result = (|| {
        let t = cfg.connect_timeout;
        let down = one_test(&host, port, bulk(NetDir::Down), t)?;
        let up = one_test(&host, port, bulk(NetDir::Up), t)?;
        let rtt = one_test(&host, port, rr, t)?;
        Ok::<_, nsperf_net::NetError>((down, up, rtt))
    })();
    stop.store(true, std::sync::atomic::Ordering::Release);
    if let Some(h) = serving {
        let _ = h.join();
    }
    if nsperf_core::signal::interrupted() {
        return Err(DoctorError::Interrupted);
    }
    let (down, up, rtt) = match result {
        Ok(x) => x,
        Err(nsperf_net::NetError::Connect { .. }) if probing => {
            return Ok(Layer::NotMeasured {
                reason: format!(
                    "no nsperf server answered at {host}:{port} (run `nsperf server` on the file server, or name one with --net-server)"
                ),
            });
        }
        Err(e) => {
            return Ok(Layer::Failed {
                error: e.to_string(),
            });
        }
    };
    for r in [&down, &up] {
        keep_findings("network", &r.findings, findings);
    }
    let (Some(to_client), Some(to_server)) = (direction_of(&down), direction_of(&up)) else {
        return Ok(Layer::Failed {
            error: "the network test returned no throughput".into(),
        });
    };
    Ok(Layer::Measured(NetworkFigures {
        server: format!("{host}:{port}"),
        started_by_doctor: started,
        to_client,
        to_server,
        rtt_idle_ns: rtt.summary.lat_p50_ns.unwrap_or(0),
        lab_mtu_bytes: mtu,
    }))
}

/// Connects to the target and times empty round trips (NFS NULL, SMB ECHO): fails `doctor`
/// at once when the server cannot be reached, refuses the logon, or the export or share is
/// missing (with the protocol's exit code).
pub fn preflight(
    target: &ServerTarget,
    connect_timeout: Duration,
) -> Result<(String, u64), DoctorError> {
    let mut rtts: Vec<u64> = Vec::with_capacity(NULL_CALLS);
    let mut time = |f: &mut dyn FnMut() -> Result<(), DoctorError>| {
        f()?;
        let t0 = Instant::now();
        while rtts.len() < NULL_CALLS && t0.elapsed() < Duration::from_secs(3) {
            let t = Instant::now();
            f()?;
            rtts.push(t.elapsed().as_nanos() as u64);
        }
        Ok::<(), DoctorError>(())
    };
    let server = match target {
        ServerTarget::Nfs(url) => {
            let t = nsperf_nfs::Timeouts {
                connect: connect_timeout,
                reply: nsperf_nfs::client::DEFAULT_TIMEOUT,
            };
            let mut s = Session::open_within(url, t)?;
            time(&mut || Ok(s.client.null()?))?;
            s.nfs_addr.to_string()
        }
        ServerTarget::Smb { url, credentials } => {
            let (creds, _) = nsperf_smb::Credentials::resolve(credentials.as_deref())
                .map_err(nsperf_smb::SmbError::from)?;
            let mut c = nsperf_smb::Client::connect_within(
                url,
                &creds,
                connect_timeout,
                nsperf_smb::client::DEFAULT_TIMEOUT,
            )?;
            time(&mut || Ok(c.echo()?))?;
            c.server_addr()
        }
    };
    rtts.sort_unstable();
    Ok((server, rtts[rtts.len() / 2]))
}

/// (c) Sequential write (NFS UNSTABLE with a COMMIT, SMB buffered with a FLUSH, timed at the
/// end) and read through the `nfs` or `smb` engine. Runs in the calling thread's namespace (the client side).
pub fn protocol(
    cfg: &DoctorConfig,
    url: &ServerTarget,
    srv: Option<&LabServer>,
    pre: (String, u64),
    read_cache: CacheMode,
    findings: &mut Vec<nsperf_core::report::Finding>,
) -> Result<Layer<ProtocolFigures>, DoctorError> {
    let (target, engine) = url.io();
    let path = srv.map(lab_path).unwrap_or_default();
    let nfs = |w| {
        let mut rc = io_config(cfg, target.clone(), w);
        rc.engine = engine;
        rc.iodepth = cfg.iodepth;
        rc.cache = CacheMode::RemoteWarm;
        rc.network_path = path;
        rc
    };
    let mut w = nfs(Workload::SeqWrite);
    w.fsync = FsyncMode::End;
    let mut r = nfs(Workload::SeqRead);
    if read_cache == CacheMode::Cold {
        r.cache = CacheMode::Cold;
        r.drop_caches = true;
    }
    let procs = || {
        srv.map(|s| {
            let s = s.clone();
            Box::new(move || s.processes()) as crate::cpu::ServerProcesses
        })
    };
    let (wrep, write) = match timed_pass(&w, procs()) {
        Ok(x) => x,
        Err(e) => return failed(e),
    };
    let (rrep, read) = match timed_pass(&r, procs()) {
        Ok(x) => x,
        Err(e) => return failed(e),
    };
    keep_findings("protocol", &wrep.findings, findings);
    keep_findings("protocol", &rrep.findings, findings);
    let remote = rrep.summary.remote.clone().unwrap_or_default();
    Ok(Layer::Measured(ProtocolFigures {
        protocol: remote.protocol,
        server: pre.0,
        rpc_bytes: remote.rpc_bytes,
        rpcs_in_flight: remote.rpcs_in_flight,
        connections: remote.connections,
        null_rtt_ns: pre.1,
        congestion_control: nsperf_core::host::TcpSysctls::read().congestion_control,
        read_cache,
        read,
        write,
    }))
}

/// What doctor knows of the path to a server in a lab site: it runs on this host (its page
/// cache is this host's), and the lab's links carry at most their configured rate.
fn lab_path(srv: &LabServer) -> NetworkPath {
    let from = srv
        .client_site
        .as_ref()
        .or_else(|| {
            srv.lab
                .sites
                .iter()
                .find(|s| nsperf_lab::netns::thread_is_in(&s.netns))
        })
        .map(|s| s.name.clone());
    let rate = from
        .and_then(|f| nsperf_lab::path::site_path(&srv.lab, &f, &srv.site.name).ok())
        .and_then(|p| p.rate_bps);
    NetworkPath {
        server_on_this_host: Some(true),
        ceiling: rate.map(|rate_bps| PathCeiling::LabLink { rate_bps }),
    }
}

/// The place as the report records it.
pub fn place(srv: &LabServer) -> ServerPlace {
    ServerPlace {
        lab: srv.lab.name.clone(),
        site: srv.site.name.clone(),
        server: srv.service.server.to_string(),
        client_site: srv.client_site.as_ref().map(|s| s.name.clone()),
    }
}
