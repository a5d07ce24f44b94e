//! `nsperf agent`: runs step specifications for a coordinator (`nsperf run` with
//! `[hosts]`) on this host — over its standard input and output (`--stdio`, as ssh and
//! `srun` start it), or for any coordinator that connects and proves the key (`--listen`);
//! and the launchers' files: `nsperf agent slurm-script` (an sbatch script running a plan's
//! coordinator on an allocation) and `nsperf agent k8s-manifest` (an Indexed Job of agents
//! with its headless Service).

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use nsperf_plan::agent::{
    AgentPolicy, Announcement, ChildStepRunner, K8S_AGENT_PORT, K8sAgents, SlurmScript, StepClass,
    serve_listener, serve_session,
};

use crate::exit::usage;

/// Arguments of `nsperf agent`.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    group(clap::ArgGroup::new("transport").required(true).args(["stdio", "listen"]))
)]
pub struct AgentArgs {
    /// Files for launching agents with Slurm or Kubernetes.
    #[command(subcommand)]
    pub launcher: Option<LauncherCommand>,
    /// Serve one coordinator on standard input and output (started by ssh or srun), then exit.
    #[arg(long)]
    pub stdio: bool,
    /// Listen for coordinators on this address (e.g. 0.0.0.0:5400); needs --psk-file unless
    /// the address is a loopback one.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// File holding the pre-shared key coordinators must prove (challenge/response; never
    /// sent).
    #[arg(long)]
    pub psk_file: Option<PathBuf>,
    /// Step classes this agent runs, comma-separated: net, server, io, capture, exec.
    /// `exec` (a user's command) and `capture` (tcpdump) must be allowed explicitly.
    #[arg(long, value_delimiter = ',', default_values_t = StepClass::DEFAULT.to_vec())]
    pub allow: Vec<StepClass>,
    /// Most steps of one coordinator running at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_steps: u32,
    /// No log lines on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// With --listen: once listening, print `nsperf-agent HOST PORT` on stdout (this host's
    /// name and the port bound, also with port 0): how the tasks srun starts tell the
    /// coordinator where they are.
    // (With --listen; `requires` would be lifted by the subcommands, a conflict is not.)
    #[arg(long, conflicts_with = "stdio")]
    pub announce: bool,
}

/// The launchers' files.
#[derive(Debug, Subcommand)]
pub enum LauncherCommand {
    /// Write an sbatch script that runs a plan's coordinator (`nsperf run PLAN`) on a Slurm
    /// allocation; the plan's Slurm hosts are started by it with srun, one agent per task.
    SlurmScript(SlurmScriptArgs),
    /// Print (JSON, for `kubectl apply -f -`) an Indexed Job of N agents, one per pod, and
    /// the headless Service that names them `NAME-INDEX.NAME.NAMESPACE.svc`.
    K8sManifest(K8sManifestArgs),
}

/// Arguments of `nsperf agent slurm-script`.
#[derive(Debug, Args)]
pub struct SlurmScriptArgs {
    /// The plan the coordinator runs (checked now; at this path on the batch host).
    pub plan: PathBuf,
    /// Nodes of the allocation.
    #[arg(long, default_value_t = NonZeroU32::MIN)]
    pub nodes: NonZeroU32,
    /// Tasks per node: one agent each.
    #[arg(long, default_value_t = NonZeroU32::MIN)]
    pub tasks_per_node: NonZeroU32,
    /// Time limit, in Slurm's form (`30`, `1:00:00`, `2-0`).
    #[arg(long)]
    pub time: Option<String>,
    /// Partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// Account to charge.
    #[arg(long)]
    pub account: Option<String>,
    /// The job's name.
    #[arg(long, default_value = "nsperf")]
    pub job_name: String,
    /// Have the nodes to this job alone (no other job disturbs the measurement).
    #[arg(long)]
    pub exclusive: bool,
    /// The job's output file (sbatch --output; `%j` is the job id). Default: JOB_NAME-%j.out.
    #[arg(long, value_name = "PATTERN")]
    pub job_output: Option<String>,
    /// The nsperf binary the nodes run (a path every node reads). Default: this one.
    #[arg(long, value_name = "PATH")]
    pub nsperf: Option<PathBuf>,
    /// Write the script to this file (made executable) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Further arguments of `nsperf run` (after `--`).
    #[arg(last = true, value_name = "RUN_ARGS")]
    pub run_args: Vec<String>,
}

/// Arguments of `nsperf agent k8s-manifest`.
#[derive(Debug, Args)]
pub struct K8sManifestArgs {
    /// The Job's and the Service's name (a DNS label).
    #[arg(long)]
    pub name: String,
    /// Agents (pods).
    #[arg(long)]
    pub count: NonZeroU32,
    /// The container image holding nsperf.
    #[arg(long)]
    pub image: String,
    /// Namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// The port every agent listens on.
    #[arg(long, default_value_t = K8S_AGENT_PORT)]
    pub port: u16,
    /// Step classes the agents run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = StepClass::DEFAULT.to_vec())]
    pub allow: Vec<StepClass>,
    /// The nsperf binary in the image (on its PATH, or a path).
    #[arg(long, default_value = "nsperf")]
    pub nsperf: String,
    /// Seconds after which Kubernetes ends the Job whatever happens.
    #[arg(long, default_value_t = 86_400)]
    pub deadline: u64,
    /// Include the Secret `NAME-psk` holding this key file (else create it with `kubectl
    /// create secret generic NAME-psk --from-file=psk=FILE`).
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
}

/// Runs `nsperf agent`.
pub fn run(a: AgentArgs) -> anyhow::Result<()> {
    match a.launcher {
        Some(LauncherCommand::SlurmScript(s)) => return slurm_script(s),
        Some(LauncherCommand::K8sManifest(k)) => return k8s_manifest(k),
        None => {}
    }
    let psk = match &a.psk_file {
        Some(p) => Some(nsperf_net::read_key_file(p)?),
        None => None,
    };
    let policy = AgentPolicy {
        psk,
        allow: a.allow.iter().copied().collect::<BTreeSet<_>>(),
        max_steps: a.max_steps as usize,
    };
    // The agent may run from a cached copy that another host's upload replaces meanwhile.
    let exe = nsperf_core::process::running_binary().context("finding the nsperf binary")?;
    let runner = ChildStepRunner::new(exe);
    let quiet = a.quiet;
    let log = Arc::new(move |line: &str| {
        if !quiet {
            eprintln!("nsperf agent: {line}");
        }
    });
    if a.stdio {
        let end = serve_session(
            std::io::stdin(),
            std::io::stdout(),
            policy,
            &runner,
            nsperf_core::host::HostFacts::collect(),
        );
        log(&format!("session ended: {}", end.reason));
        return Ok(());
    }
    let addr = a.listen.expect("clap requires --stdio or --listen");
    if policy.psk.is_none() && !addr.ip().is_loopback() {
        return Err(usage(format!(
            "an agent listening on {addr} would run steps for whoever connects: give --psk-file, or listen on a loopback address"
        )));
    }
    let listener = TcpListener::bind(addr).with_context(|| format!("listening on {addr}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    log(&format!(
        "listening on {bound}, running {} steps",
        a.allow
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    // The bound address on stdout, for whoever started the agent with port 0; with
    // --announce, this host's name with the port, for a coordinator on another host.
    if a.announce {
        println!("{}", Announcement::here(bound.port()));
    } else {
        println!("{bound}");
    }
    serve_listener(listener, policy, Arc::new(runner), log).context("serving coordinators")
}

fn slurm_script(a: SlurmScriptArgs) -> anyhow::Result<()> {
    // The plan is checked now, not when the job finally runs.
    crate::cmd::run::load_plan(Some(&a.plan))?;
    let plan =
        std::fs::canonicalize(&a.plan).with_context(|| format!("finding {}", a.plan.display()))?;
    let nsperf = match a.nsperf {
        Some(p) => p,
        None => std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .context("finding the nsperf binary")?,
    };
    let script = SlurmScript {
        job_name: a.job_name,
        nodes: a.nodes,
        tasks_per_node: a.tasks_per_node,
        time: a.time,
        partition: a.partition,
        account: a.account,
        exclusive: a.exclusive,
        output: a.job_output,
        nsperf,
        plan,
        run_args: a.run_args,
    };
    script.validate().map_err(|e| usage(e.to_string()))?;
    match a.output {
        None => print!("{script}"),
        Some(path) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(&path, script.to_string())
                .and_then(|()| {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                })
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

fn k8s_manifest(a: K8sManifestArgs) -> anyhow::Result<()> {
    let agents = K8sAgents {
        name: a.name,
        namespace: a.namespace,
        count: a.count,
        image: a.image,
        nsperf: a.nsperf,
        port: a.port,
        allow: a.allow,
        deadline_s: a.deadline,
    };
    agents.validate().map_err(|e| usage(e.to_string()))?;
    let psk = match &a.psk_file {
        Some(p) => Some(nsperf_net::read_key_file(p)?),
        None => None,
    };
    let list = agents.manifests(psk.as_deref());
    println!("{}", serde_json::to_string_pretty(&list)?);
    Ok(())
}
