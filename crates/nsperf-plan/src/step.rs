//! The step contract: what the runner asks a child process to do, and what the child answers.
//!
//! The runner starts `nsperf step` (a hidden subcommand) as a child process in its own
//! process group, writes one [`StepSpec`] as JSON on its standard input and reads one
//! [`StepReport`] as JSON from its standard output; the exit status is a
//! [`nsperf_core::Failure`] class. The child enters the lab site's namespaces itself when the
//! spec names one, and runs the engine in-process. Specifications are built from the
//! engines' own configuration types ([`TestParams`], [`ClientConfig`], [`ServerConfig`],
//! [`RunConfig`]) and checked with the engines' own rules ([`StepSpec::validate`]), both when a
//! plan is loaded and again by the child. The JSON of both is documented in `docs/run.md`.
//!
//! An `exec` step (a user's command) and a `capture` step (tcpdump) replace the child with
//! the program once inside the site: their output is the program's own, not a report.

use std::net::SocketAddr;
use std::path::PathBuf;

use nsperf_io::bonnie::{BonnieConfig, BonnieReport};
use nsperf_io::{IoReport, RunConfig};
use nsperf_lab::service::ServiceConfig;
use nsperf_net::{ClientConfig, NetReport, ServerConfig, ServerTotals, TestParams};
use serde::{Deserialize, Serialize};

/// A site of a lab: where a step's process runs (its network namespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteRef {
    /// The lab, as `nsperf lab up NAME` named it (its namespaces are `nsp-NAME-SITE`).
    pub lab: String,
    /// The site of that lab the process runs in (one of the plan's `[lab] sites`).
    pub site: String,
}

/// The server a network step's client tests against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case")]
pub enum NetClient {
    /// A server in the same process, on 127.0.0.1 (`nsperf net --loopback`).
    Loopback {
        /// The test.
        params: TestParams,
    },
    /// A server reached over the network (`nsperf net HOST`).
    Server {
        /// Address, port, test, timeouts.
        config: ClientConfig,
    },
}

impl NetClient {
    /// The test asked for.
    pub fn params(&self) -> &TestParams {
        match self {
            NetClient::Loopback { params } => params,
            NetClient::Server { config } => &config.params,
        }
    }
}

/// One step for a child process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum StepSpec {
    /// A network test (bulk stream, request/response or message-size sweep: `mode` of the
    /// test parameters); answers [`StepReport::Net`].
    Net {
        /// The site to run in; this host's namespace when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// Against what.
        client: NetClient,
    },
    /// An `nsperf server` (normally `one_off`): answers [`StepReport::Listening`] once it
    /// accepts connections, then serves and exits.
    NetServer {
        /// The site to run in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// The server's settings.
        server: ServerConfig,
    },
    /// A file-system run; answers [`StepReport::Io`].
    Io {
        /// The site to run in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// The run.
        config: RunConfig,
    },
    /// The bonnie++-style suite in a directory; answers [`StepReport::Bonnie`].
    Bonnie {
        /// The site to run in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// The suite.
        config: BonnieConfig,
    },
    /// A packet capture of TCP packets (their first `snaplen` bytes: the headers for a
    /// network step, whole packets for an io step's protocol) on every interface of a site,
    /// written to `file` until the child is interrupted (tcpdump, which must be installed).
    Capture {
        /// The site to capture in.
        site: SiteRef,
        /// The pcap file to write.
        file: PathBuf,
        /// Bytes kept of each packet.
        snaplen: u32,
    },
    /// A file server (a plan's `[[service]]`): answers [`StepReport::Serving`] once it
    /// answers a client's MOUNT, then serves until interrupted; it exits with an error when
    /// its server dies (or when the lab it runs in goes away).
    Service {
        /// The site to run in; this host's loopback on a free port when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// What to serve, and with which server.
        service: ServiceConfig,
    },
    /// The mirror peer of io steps with `replicate` (`nsperf io peer`): makes a directory
    /// `.nsperf-PID-peer` inside `dir`, listens on a free port of every address, answers
    /// [`StepReport::Listening`] (its port), then writes the copies it is sent into that
    /// directory until interrupted, and removes the directory.
    MirrorPeer {
        /// The site to run in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// Where its directory is made (absolute, existing).
        dir: PathBuf,
    },
    /// A captured NFSv3 workload replayed against an NFS server (a plan's service), as
    /// `nsperf replay --lab` replays it, beside the model at the link given; answers
    /// [`StepReport::Replay`].
    Replay {
        /// The site to run in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// The capture file.
        capture: PathBuf,
        /// The server, `nfs://ADDRESS[:PORT]/DIR`: the replay's files are made in a fresh
        /// directory under DIR.
        url: String,
        /// The replayed connections' TCP window (socket buffers), bytes; absent: autotuned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window_bytes: Option<u64>,
        /// The link's round trip the model is given, ms.
        rtt_ms: f64,
        /// The link's rate each way the model is given, bit/s; absent: not limited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate_bps: Option<f64>,
    },
    /// A user's command, run in place of the child (in a site when given).
    Exec {
        /// The site to run in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteRef>,
        /// Program and arguments.
        command: Vec<String>,
    },
}

/// What `nsperf step` reads on its standard input: a step, and when to start it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRequest {
    /// The step.
    pub spec: StepSpec,
    /// Start the engine at this wall-clock time (ns since the Unix epoch, this host's clock),
    /// not before: the start barrier of a step run on several hosts at once. A time in the
    /// past starts at once; the report's `started_unix_ns` says when it really started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ns: Option<u64>,
    /// Print a [`StepReport::Progress`] line once per interval while a net or io engine
    /// runs (an agent streams them to its coordinator).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub progress: bool,
    /// Hold the start after setup (an io step's record workload: files created and laid
    /// out, connections open): print [`StepReport::Ready`], then read a [`StepGo`] on
    /// standard input and start measuring at its time. The start barrier of a step on
    /// many hosts, taken after every host's setup rather than before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold: bool,
}

/// The start a held step waits for (one JSON line on its standard input after the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepGo {
    /// Start measuring at this wall-clock time (ns since the Unix epoch, this host's clock);
    /// a time in the past starts at once.
    pub start_at_unix_ns: u64,
}

/// A file service's own count of what it served since it started, sampled while it runs,
/// with the counters of the host it runs on over the same time: its own CPU time, its
/// network interfaces' bytes and each core's busy time. Every field but the first is a
/// running total, read between samples over a window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceCount {
    /// When the counters were read (wall clock, ns since the Unix epoch).
    pub at_unix_ns: u64,
    /// Data bytes of the READ replies that crossed its sockets so far.
    pub read_bytes: u64,
    /// Data bytes of the WRITE calls that arrived so far.
    pub write_bytes: u64,
    /// Calls answered so far.
    pub calls: u64,
    /// True when the server keeps no count of its own (nfs-ganesha, Samba): the data and call
    /// counts are then 0 and mean nothing, and only the host's counters below are read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncounted: bool,
    /// The service's CPU time so far (user and system, every thread), ns: the embedded
    /// server's process; a third-party server's processes, every one in its site's network
    /// namespace.
    #[serde(default)]
    pub cpu_ns: u64,
    /// Bytes received by the network interfaces of its network namespace (loopback left
    /// out: in a lab, the site's links).
    #[serde(default)]
    pub nic_rx_bytes: u64,
    /// Bytes they sent.
    #[serde(default)]
    pub nic_tx_bytes: u64,
    /// Each core's busy and total ticks (`/proc/stat`; the host's, which in a lab on one
    /// machine its clients' sites share).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<CoreTicks>,
}

/// One core's running totals of `/proc/stat` ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreTicks {
    /// Ticks not idle nor waiting for I/O.
    pub busy: u64,
    /// Every tick.
    pub total: u64,
}

impl ServiceCount {
    /// The host's counters now beside a service's own count (`at_unix_ns` now).
    pub fn now(read_bytes: u64, write_bytes: u64, calls: u64) -> Self {
        let cpu_ns = nsperf_core::cpu::process_times()
            .map(|t| ((t.user_s + t.sys_s) * 1e9) as u64)
            .unwrap_or(0);
        ServiceCount {
            read_bytes,
            write_bytes,
            calls,
            ..Self::host(cpu_ns)
        }
    }

    /// The host's counters now, of a server that keeps no count of its own, running in this
    /// process's network namespace (a lab site's): its CPU is that of every process there.
    pub fn uncounted_now() -> Self {
        ServiceCount {
            uncounted: true,
            ..Self::host(nsperf_core::cpu::net_namespace_cpu_ns().unwrap_or(0))
        }
    }

    /// The host's counters now, with the service's CPU time `cpu_ns`, and no count.
    fn host(cpu_ns: u64) -> Self {
        let (mut nic_rx_bytes, mut nic_tx_bytes) = (0, 0);
        for n in nsperf_core::nic::read_nic_counters() {
            if n.name != "lo" {
                nic_rx_bytes += n.rx_bytes;
                nic_tx_bytes += n.tx_bytes;
            }
        }
        let cores = nsperf_core::cpu::read_proc_stat()
            .iter()
            .map(|(_, t)| CoreTicks {
                busy: t.busy(),
                total: t.total(),
            })
            .collect();
        ServiceCount {
            at_unix_ns: nsperf_core::clock::unix_time_ns(),
            read_bytes: 0,
            write_bytes: 0,
            calls: 0,
            uncounted: false,
            cpu_ns,
            nic_rx_bytes,
            nic_tx_bytes,
            cores,
        }
    }
}

impl StepRequest {
    /// A request to start `spec` at once.
    pub fn now(spec: StepSpec) -> Self {
        StepRequest {
            spec,
            start_at_unix_ns: None,
            progress: false,
            hold: false,
        }
    }
}

/// How far a running step got: printed once per interval when asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StepProgress {
    /// Seconds since the engine started measuring.
    pub elapsed_s: f64,
    /// Payload bytes this end moved so far (net: sent and received; io: read and written).
    pub bytes: u64,
}

/// What a child answers on its standard output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "snake_case")]
pub enum StepReport {
    /// The network engine's report (`nsperf net --json`).
    Net(Box<NetReport>),
    /// The io engine's report (`nsperf io run --json`).
    Io(Box<IoReport>),
    /// The suite's report (`nsperf io bonnie --json`).
    Bonnie(Box<BonnieReport>),
    /// A server step is ready for its client.
    Listening {
        /// Where it listens.
        addr: SocketAddr,
    },
    /// A server step that served until it was interrupted: what it served, by its own
    /// count (per test and in total, with its CPU time).
    Served(Box<ServerTotals>),
    /// A running step's progress (when the request asked for it).
    Progress(StepProgress),
    /// A service step answers its clients at this URL (`nfs://ADDRESS[:PORT]/DIR`,
    /// `smb://ADDRESS/SHARE`).
    Serving {
        /// Where clients reach it.
        url: String,
        /// The smbclient-style credentials file its clients use (Samba), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<std::path::PathBuf>,
    },
    /// A service step's own count so far (the embedded NFS server: every
    /// [`SERVICE_COUNT_EVERY`] while it serves).
    ServiceCount(ServiceCount),
    /// A held step is set up and waits for its [`StepGo`].
    Ready,
    /// A replay's report: the replayed duration beside the captured one and the model's,
    /// per connection and per operation (as `nsperf replay --lab` reports each RTT).
    Replay(Box<nsperf_trace::replay::against::LabRun>),
}

/// How often a service step prints its own count.
pub const SERVICE_COUNT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl StepSpec {
    /// The site the step runs in, if any.
    pub fn site(&self) -> Option<&SiteRef> {
        match self {
            StepSpec::Net { site, .. }
            | StepSpec::NetServer { site, .. }
            | StepSpec::Io { site, .. }
            | StepSpec::Bonnie { site, .. }
            | StepSpec::Service { site, .. }
            | StepSpec::MirrorPeer { site, .. }
            | StepSpec::Replay { site, .. }
            | StepSpec::Exec { site, .. } => site.as_ref(),
            StepSpec::Capture { site, .. } => Some(site),
        }
    }

    /// Checks the spec with the engines' own rules; the message is one line.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(s) = self.site() {
            nsperf_lab::config::check_name("lab name", &s.lab).map_err(|e| e.to_string())?;
            nsperf_lab::config::check_name("site", &s.site).map_err(|e| e.to_string())?;
        }
        match self {
            StepSpec::Net { client, .. } => client.params().validate(),
            StepSpec::NetServer { .. } => Ok(()),
            StepSpec::Io { config, .. } => config.validate().map_err(|e| e.to_string()),
            StepSpec::Bonnie { config, .. } => config.validate().map_err(|e| e.to_string()),
            StepSpec::Service { site, service } => {
                service.validate(site.is_some()).map_err(|e| e.to_string())
            }
            StepSpec::MirrorPeer { dir, .. } => {
                if dir.is_absolute() {
                    Ok(())
                } else {
                    Err(format!(
                        "the mirror peer's directory {} is not absolute",
                        dir.display()
                    ))
                }
            }
            StepSpec::Replay {
                url,
                window_bytes,
                rtt_ms,
                ..
            } => {
                url.parse::<nsperf_nfs::NfsUrl>()
                    .map_err(|e| format!("replay against {url}: {e}"))?;
                if *window_bytes == Some(0) {
                    return Err("a replay window of 0 bytes holds no byte".into());
                }
                if !rtt_ms.is_finite() || *rtt_ms < 0.0 {
                    return Err(format!("a replay's RTT of {rtt_ms} ms"));
                }
                Ok(())
            }
            StepSpec::Capture { snaplen, .. } => {
                if *snaplen == 0 {
                    Err("a capture keeps at least one byte of each packet".into())
                } else {
                    Ok(())
                }
            }
            StepSpec::Exec { command, .. } => match command.first() {
                Some(p) if !p.is_empty() => Ok(()),
                _ => Err("the command is empty".into()),
            },
        }
    }
}

/// Reads arbitrary bytes as a step spec and checks it, as `nsperf step` does with its
/// standard input (the body of the fuzz target, also run by unit tests). Never panics.
pub fn fuzz_spec(data: &[u8]) {
    if let Ok(spec) = serde_json::from_slice::<StepSpec>(data) {
        let _ = spec.validate();
        let _ = serde_json::to_vec(&spec);
    }
    if let Ok(req) = serde_json::from_slice::<StepRequest>(data) {
        let _ = req.spec.validate();
        let _ = serde_json::to_vec(&req);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip_through_json() {
        let specs = [
            StepSpec::Net {
                site: Some(SiteRef {
                    lab: "t3".into(),
                    site: "client".into(),
                }),
                client: NetClient::Server {
                    config: ClientConfig {
                        host: "10.77.0.2".into(),
                        port: 5301,
                        params: TestParams::default(),
                        psk: None,
                        connect_timeout: std::time::Duration::from_secs(5),
                        server_kind: nsperf_net::ServerKind::Nsperf,
                        local: nsperf_net::LocalEnd::default(),
                    },
                },
            },
            StepSpec::Io {
                site: None,
                config: RunConfig::new(
                    nsperf_io::Target::Dir { path: ".".into() },
                    nsperf_io::Workload::SeqRead,
                    1 << 20,
                    4096,
                ),
            },
            StepSpec::Exec {
                site: None,
                command: vec!["true".into()],
            },
            StepSpec::Bonnie {
                site: None,
                config: BonnieConfig::new("/tmp".into()),
            },
        ];
        for s in specs {
            let j = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<StepSpec>(&j).unwrap(), s, "{j}");
            assert!(s.validate().is_ok());
        }
        let r = StepReport::Listening {
            addr: "10.77.0.2:5301".parse().unwrap(),
        };
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(j, r#"{"report":"listening","addr":"10.77.0.2:5301"}"#);
        assert_eq!(serde_json::from_str::<StepReport>(&j).unwrap(), r);
    }

    #[test]
    fn engine_rules_refuse_bad_specs() {
        let p = TestParams {
            streams: 0,
            ..TestParams::default()
        };
        let net = StepSpec::Net {
            site: None,
            client: NetClient::Loopback { params: p },
        };
        assert!(net.validate().unwrap_err().contains("parallel streams"));
        let exec = StepSpec::Exec {
            site: Some(SiteRef {
                lab: "Bad-Name".into(),
                site: "a".into(),
            }),
            command: vec!["true".into()],
        };
        assert!(exec.validate().is_err());
        assert!(
            serde_json::from_str::<StepSpec>(r#"{"step":"fly"}"#).is_err(),
            "unknown step"
        );
    }

    #[test]
    fn random_and_mutated_specs_never_panic() {
        let seed = serde_json::to_vec(&StepSpec::Exec {
            site: Some(SiteRef {
                lab: "t3".into(),
                site: "a".into(),
            }),
            command: vec!["true".into()],
        })
        .unwrap();
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut v = seed.clone();
            let i = (next() as usize) % v.len();
            v[i] = next() as u8;
            fuzz_spec(&v);
            let n = (next() % 64) as usize;
            let junk: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            fuzz_spec(&junk);
        }
        for cut in 0..seed.len() {
            fuzz_spec(&seed[..cut]);
        }
    }
}
