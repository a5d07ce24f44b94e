//! `nsperf step` (hidden): one step of a plan, for `nsperf run` and `nsperf agent`. Reads a
//! step request (JSON, `nsperf_plan::step::StepRequest`: the spec and an optional start time)
//! on standard input, checks the spec with the engines' own rules, enters the lab site's
//! namespaces when it names one, waits for the start time, runs the engine in this process
//! and prints its typed report (`StepReport`) as JSON on standard output: `started_unix_ns`
//! when the step started, `measured_unix_ns` when its engine began measuring. A held request
//! (`hold`) sets an io run up first, prints `ready`, reads its start (`StepGo`) as the next
//! JSON value on standard input and starts measuring then. The exit code is the usual one
//! (`docs/exit-codes.md`). `exec` and `capture` steps become the program they run, once
//! inside the site. The contract is documented in `docs/run.md`.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use nsperf_core::Failure;
use nsperf_net::{NetSpec, Server};
use nsperf_plan::step::{
    NetClient, ServiceCount, StepGo, StepProgress, StepReport, StepRequest, StepSpec,
};
use serde::Deserialize;

use crate::exit::{classified, usage};
use crate::output::{print_json, print_json_line};

/// Runs `nsperf step`.
pub fn run() -> anyhow::Result<()> {
    // One JSON value, not the whole input: a held step reads its go after it.
    let mut input = serde_json::Deserializer::from_reader(std::io::stdin());
    let req = StepRequest::deserialize(&mut input)
        .map_err(|e| classified(Failure::Input, format!("step request: {e}")))?;
    let spec = req.spec;
    spec.validate().map_err(usage)?;
    // Before any thread starts: threads inherit the namespaces.
    if let Some(site) = spec.site() {
        nsperf_lab::lab::enter_site(&site.lab, &site.site)?;
    }
    if let Some(at) = req.start_at_unix_ns {
        wait_until(at)?;
    }
    let started = nsperf_core::clock::unix_time_ns();
    let progress = req.progress;
    match spec {
        StepSpec::Net { client, .. } => net(client, started, progress),
        StepSpec::NetServer { server, .. } => serve(server),
        StepSpec::Io { config, .. } => io(&config, progress, req.hold.then_some(&mut input)),
        StepSpec::Bonnie { config, .. } => {
            let mut report = nsperf_io::bonnie::run_bonnie(&config).context("io bonnie")?;
            report.started_unix_ns = started;
            print_json(&StepReport::Bonnie(Box::new(report)))
        }
        StepSpec::Service { site, service } => {
            let site = site.as_ref().map(|s| (s.lab.as_str(), s.site.as_str()));
            let mut count = |c: Option<&nsperf_nfs::server::Served>| {
                let count = match c {
                    Some(c) => ServiceCount::now(c.read_bytes, c.write_bytes, c.calls),
                    None => ServiceCount::uncounted_now(),
                };
                let _ = print_json_line(&StepReport::ServiceCount(count));
            };
            super::lab_serve::run_service(
                &service,
                site,
                &mut |url, credentials| {
                    print_json_line(&StepReport::Serving {
                        url: url.into(),
                        credentials: credentials.map(Into::into),
                    })
                },
                Some(&mut count),
            )
        }
        StepSpec::MirrorPeer { dir, .. } => mirror_peer(&dir),
        StepSpec::Replay {
            capture,
            url,
            window_bytes,
            rtt_ms,
            rate_bps,
            ..
        } => replay(&capture, &url, window_bytes, rtt_ms, rate_bps),
        StepSpec::Capture { file, snaplen, .. } => {
            // --immediate-mode: each packet is handed to tcpdump as it arrives. Without it
            // the kernel fills a block of its ring for up to a second before handing it
            // over, and the packets of the block still filling when the runner interrupts
            // tcpdump are lost: a step's last requests and replies (2 WRITE calls and 4
            // replies of 64 were missing from an NFS write's capture).
            let e = std::process::Command::new("tcpdump")
                .args([
                    "-i",
                    "any",
                    "--immediate-mode",
                    "-s",
                    &snaplen.to_string(),
                    "-U",
                    "-w",
                ])
                .arg(&file)
                .arg("tcp")
                .exec();
            Err(e).context("running tcpdump")
        }
        StepSpec::Exec { command, .. } => {
            let (prog, args) = command
                .split_first()
                .ok_or_else(|| usage("empty command"))?;
            let e = std::process::Command::new(prog).args(args).exec();
            Err(e).context(format!("running {prog}"))
        }
    }
}

/// An io step: the engine's report, its progress streamed when asked; held (`go` the
/// request's input), the start waits for the go once the run is set up.
fn io<R: Read>(
    config: &nsperf_io::RunConfig,
    progress: bool,
    go: Option<&mut serde_json::Deserializer<serde_json::de::IoRead<R>>>,
) -> anyhow::Result<()> {
    let mut show = |p: &nsperf_io::Progress| {
        if progress {
            let _ = print_json_line(&StepReport::Progress(StepProgress {
                elapsed_s: p.elapsed_s,
                bytes: p.read_bytes + p.write_bytes,
            }));
        }
    };
    let mut hold = go.map(|input| {
        move || -> bool {
            if print_json_line(&StepReport::Ready).is_err() {
                return false;
            }
            match StepGo::deserialize(&mut *input) {
                Ok(g) => wait_until(g.start_at_unix_ns).is_ok(),
                Err(e) => {
                    eprintln!("nsperf: no start for the held step: {e}");
                    false
                }
            }
        }
    });
    let held = hold.is_some();
    let observer = (progress || held).then(|| nsperf_io::Observer {
        sample: &mut show,
        latency: false,
        ready: hold.as_mut().map(|h| h as &mut dyn FnMut() -> bool),
    });
    let report = nsperf_io::run_observed(config, observer)
        .with_context(|| format!("io run {}", config.workload))?;
    print_json(&StepReport::Io(Box::new(report)))?;
    if held && nsperf_core::signal::interrupted() {
        // No go (the coordinator went), or stopped: not a measurement of the barrier's run.
        return Err(classified(
            Failure::Interrupted,
            "interrupted: partial results printed",
        ));
    }
    Ok(())
}

/// A replay step: the capture's NFS workload replayed against `url` (over NFSv4 as its
/// `?version=` asks, for an NFSv4 capture) from this process's namespace (the step's site),
/// reported beside the capture and the model at the link given.
fn replay(
    capture: &std::path::Path,
    url: &str,
    window_bytes: Option<u64>,
    rtt_ms: f64,
    rate_bps: Option<f64>,
) -> anyhow::Result<()> {
    let name = capture.display();
    let (ws, sc, proto, _) = nsperf_trace::replay::script::nfs_replay(capture)
        .map_err(|e| classified(Failure::Input, format!("replay {name}: {e}")))?;
    let u: nsperf_nfs::NfsUrl = url
        .parse()
        .map_err(|e: nsperf_nfs::url::UrlError| usage(e.to_string()))?;
    let v4 = proto == nsperf_trace::proto::requests::Protocol::Nfs4;
    use nsperf_nfs::url::NfsVersion;
    let over_v4 = matches!(
        u.version,
        Some(NfsVersion::V4 | NfsVersion::V4_0 | NfsVersion::V4_1)
    );
    if v4 != over_v4 {
        return Err(usage(format!(
            "replay {name}: a capture of {proto} against {url}: the URL's version must be the capture's"
        )));
    }
    let opt = nsperf_nfs::replay::Options {
        timeout: nsperf_nfs::client::DEFAULT_TIMEOUT,
        keep: false,
        window_bytes,
    };
    let done = nsperf_nfs::replay::run(&u, &sc, opt)
        .with_context(|| format!("replay {name} against {url}"))?;
    let link = nsperf_trace::replay::against::LabLink {
        rtt_ms,
        rate_bps,
        loss: None,
        window_bytes,
    };
    let run = nsperf_trace::replay::against::lab_run(url, &ws, &done, link);
    print_json(&StepReport::Replay(Box::new(run)))
}

/// Sleeps until the wall clock reads `at_unix_ns`: in steps of at most 100 ms (Ctrl-C ends
/// the wait), the last one an absolute `clock_nanosleep` on the wall clock with the timer
/// slack at its least, so the kernel wakes the step at that instant. Not a spin: with many
/// steps starting at once on few cores, spinning steps take turns on the CPUs and the last
/// one to get its turn starts milliseconds late; a sleeper woken by its timer is run at once.
fn wait_until(at_unix_ns: u64) -> anyhow::Result<()> {
    // SAFETY: prctl with an integer argument changes only this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    loop {
        let now = nsperf_core::clock::unix_time_ns();
        if now >= at_unix_ns {
            return Ok(());
        }
        if nsperf_core::signal::interrupted() {
            return Err(classified(
                Failure::Interrupted,
                "interrupted before the step started",
            ));
        }
        let until = at_unix_ns.min(now + 100_000_000);
        let ts = libc::timespec {
            tv_sec: (until / 1_000_000_000) as libc::time_t,
            tv_nsec: (until % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: a valid timespec; an interruption (EINTR) or an early wake loops.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_REALTIME,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }
}

/// A mirror peer step: its own directory `.nsperf-PID-peer` inside `dir` (a stale one of a
/// dead peer is swept by the next io run there), a free port, `listening` printed; then the
/// copies it is sent, until interrupted; then its directory removed with what is left in it.
fn mirror_peer(dir: &std::path::Path) -> anyhow::Result<()> {
    let own = dir.join(format!(".nsperf-{}-peer", std::process::id()));
    std::fs::create_dir(&own).map_err(|e| {
        classified(
            Failure::Input,
            format!("mirror peer: {}: {e}", own.display()),
        )
    })?;
    let served = (|| -> anyhow::Result<()> {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))
            .context("mirror peer: listening")?;
        print_json_line(&StepReport::Listening {
            addr: listener.local_addr()?,
        })?;
        let log = Arc::new(|line: &str| eprintln!("nsperf io peer: {line}"));
        nsperf_io::mirror::peer::serve(listener, &own, None, false, log)
            .context("mirror peer: accepting connections")
    })();
    let removed = std::fs::remove_dir_all(&own);
    served?;
    removed.with_context(|| format!("mirror peer: removing {}", own.display()))
}

/// A server step: says where it listens, serves until interrupted (the runner or the agent
/// stops it), then prints what it served by its own count.
fn serve(config: nsperf_net::ServerConfig) -> anyhow::Result<()> {
    let server = Server::bind(config, Arc::new(|_line: &str| {}))?;
    let counters = server.counters();
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(
        &mut out,
        &StepReport::Listening {
            addr: server.local_addr(),
        },
    )?;
    writeln!(out)?;
    out.flush()?;
    drop(out);
    let (t0, cpu0) = (Instant::now(), process_cpu_ns());
    server.serve(&AtomicBool::new(false)).context("server")?;
    let mut totals = counters.snapshot();
    totals.serving_ns = t0.elapsed().as_nanos() as u64;
    totals.cpu_ns = process_cpu_ns().saturating_sub(cpu0);
    print_json(&StepReport::Served(Box::new(totals)))
}

/// CPU time of this process so far (user + system), ns.
pub(crate) fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(u.ru_utime) + ns(u.ru_stime)
}

fn net(client: NetClient, started: u64, progress: bool) -> anyhow::Result<()> {
    let facts = nsperf_core::host::HostFacts::collect();
    let mut bytes = 0u64;
    let mut show = |iv: &nsperf_net::LiveInterval| {
        if progress {
            bytes += iv.stream_bytes.iter().sum::<u64>();
            let _ = print_json_line(&StepReport::Progress(StepProgress {
                elapsed_s: iv.start_s + iv.length_s,
                bytes,
            }));
        }
    };
    let (run, target, port, loopback) = match client {
        NetClient::Loopback { params } => {
            let run = nsperf_net::run_loopback(params, nsperf_net::LocalEnd::default(), &mut show)?;
            let port = run.server_addr.port();
            (run, "127.0.0.1".to_string(), port, true)
        }
        NetClient::Server { config } => {
            let run = nsperf_net::run_client(&config, &mut show)?;
            (run, config.host, config.port, false)
        }
    };
    let spec = NetSpec {
        target,
        port,
        loopback,
        params: run.params.clone(),
        // A step's client speaks nsperf's protocol to the server the runner started.
        peer: nsperf_net::Peer::Nsperf,
        local: nsperf_net::LocalEnd::default(),
    };
    let mut report = nsperf_net::build_report(&run, spec, facts);
    report.started_unix_ns = started;
    print_json(&StepReport::Net(Box::new(report)))?;
    if nsperf_core::signal::interrupted() {
        return Err(classified(
            Failure::Interrupted,
            "interrupted: partial results printed",
        ));
    }
    Ok(())
}
