//! `nsperf step` (hidden): one step of a plan, for `nsperf run` and `nsperf agent`. Reads a
//! step request (JSON, `nsperf_plan::step::StepRequest`: the spec and an optional start time)
//! on standard input, checks the spec with the engines' own rules, enters the lab site's
//! namespaces when it names one, waits for the start time, runs the engine in this process
//! and prints its typed report (`StepReport`) as JSON on standard output, its
//! `started_unix_ns` the moment the engine started. The exit code is the usual one
//! (`docs/exit-codes.md`). `exec` and `capture` steps become the program they run, once
//! inside the site. The contract is documented in `docs/run.md`.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;
use nsperf_core::Failure;
use nsperf_net::{NetSpec, Server};
use nsperf_plan::step::{NetClient, StepProgress, StepReport, StepRequest, StepSpec};

use crate::exit::{classified, usage};
use crate::output::{print_json, print_json_line};

/// Runs `nsperf step`.
pub fn run() -> anyhow::Result<()> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("reading the step request")?;
    let req: StepRequest = serde_json::from_slice(&input)
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
        StepSpec::Io { config, .. } => {
            let mut show = |p: &nsperf_io::Progress| {
                let _ = print_json_line(&StepReport::Progress(StepProgress {
                    elapsed_s: p.elapsed_s,
                    bytes: p.read_bytes + p.write_bytes,
                }));
            };
            let observer = progress.then_some(nsperf_io::Observer {
                sample: &mut show,
                latency: false,
            });
            let mut report = nsperf_io::run_observed(&config, observer)
                .with_context(|| format!("io run {}", config.workload))?;
            report.started_unix_ns = started;
            print_json(&StepReport::Io(Box::new(report)))
        }
        StepSpec::Bonnie { config, .. } => {
            let mut report = nsperf_io::bonnie::run_bonnie(&config).context("io bonnie")?;
            report.started_unix_ns = started;
            print_json(&StepReport::Bonnie(Box::new(report)))
        }
        StepSpec::Service { site, service } => {
            let site = site.as_ref().map(|s| (s.lab.as_str(), s.site.as_str()));
            super::lab_serve::run_service(&service, site, &mut |url| {
                print_json_line(&StepReport::Serving { url: url.into() })
            })
        }
        StepSpec::Capture { file, snaplen, .. } => {
            let e = std::process::Command::new("tcpdump")
                .args(["-i", "any", "-s", &snaplen.to_string(), "-U", "-w"])
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

/// Sleeps until the wall clock reads `at_unix_ns` (the last millisecond spinning, so hosts
/// start within a few microseconds of it); Ctrl-C ends the wait.
fn wait_until(at_unix_ns: u64) -> anyhow::Result<()> {
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
        let left = Duration::from_nanos(at_unix_ns - now);
        if left > Duration::from_millis(2) {
            std::thread::sleep((left - Duration::from_millis(1)).min(Duration::from_millis(100)));
        } else {
            std::hint::spin_loop();
        }
    }
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
