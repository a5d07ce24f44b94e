//! `nsperf run [PLAN]`: runs an experiment plan (the embedded default plan without one) into
//! the result store, with a progress bar and ETA on a terminal and plain lines otherwise.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use nsperf_plan::exec::process::ProcessExecutor;
use nsperf_plan::runner::Progress;
use nsperf_plan::{DEFAULT_PLAN, Plan, RunOptions};
use nsperf_results::{Phase, RunKey, RunStatus, Store};

use crate::output::print_json;

/// Arguments of `nsperf run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Plan file (TOML, see docs/run.md); without one, the embedded default plan (the WAN
    /// window experiment and a small io matrix in the current directory).
    pub plan: Option<PathBuf>,
    /// Result store (SQLite).
    #[arg(long, default_value = "nsperf-results.db")]
    pub db: PathBuf,
    /// Complete the latest unfinished experiment of this plan: only its missing runs.
    #[arg(long)]
    pub resume: bool,
    /// Where to write the HTML report of the experiment when the plan has run [default:
    /// nsperf-report.html beside the result store].
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write no report.
    #[arg(long)]
    pub no_report: bool,
    /// A label for the experiment (`native`, `replicated`): stored with it, shown by
    /// `results list`, the report and `results compare`, and usable wherever an experiment
    /// id is (`nsperf results compare native replicated`: the latest with that label).
    #[arg(long, value_parser = parse_label)]
    pub label: Option<String>,
    /// Keep the packet capture of every step that takes one (a plan step's `capture`):
    /// the pcap files go to NAME-captures/ beside the result store (NAME: the store's file
    /// name without extension), each run records its file's path, and the report names it.
    #[arg(long)]
    pub keep_captures: bool,
    /// Check the plan and print what it would run, then stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the outcome as JSON (experiment id and counts) and nothing else on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress bar or per-run lines.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
}

/// An experiment label: 1 to 64 printable characters, not a number and not `latest` (those
/// name experiments already).
fn parse_label(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().count() > 64 || s.chars().any(char::is_control) {
        return Err("a label is 1 to 64 printable characters".into());
    }
    if s == "latest" || s.parse::<i64>().is_ok() {
        return Err(format!(
            "\"{s}\" names an experiment already (a label is not a number or latest)"
        ));
    }
    Ok(s.to_string())
}

/// Where `--keep-captures` keeps the pcap files: `NAME-captures/` beside the store.
fn captures_dir(db: &std::path::Path) -> PathBuf {
    let stem = db
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "nsperf-results".into());
    db.parent()
        .unwrap_or(std::path::Path::new(""))
        .join(format!("{stem}-captures"))
}

/// Loads the plan named on the command line, or the default plan.
pub fn load_plan(path: Option<&PathBuf>) -> anyhow::Result<Plan> {
    match path {
        None => Ok(Plan::parse(DEFAULT_PLAN.as_bytes()).context("the embedded default plan")?),
        Some(p) => {
            let bytes = std::fs::read(p)
                .with_context(|| format!("cannot read plan {}", p.display()))
                .map_err(|e| {
                    crate::exit::classified(nsperf_core::Failure::Input, format!("{e:#}"))
                })?;
            Ok(Plan::parse(&bytes).with_context(|| format!("plan {}", p.display()))?)
        }
    }
}

/// Progress on stderr: a bar with ETA on a terminal, one line per run otherwise.
struct CliProgress {
    bar: Option<ProgressBar>,
    quiet: bool,
    total: usize,
    pos: usize,
}

impl CliProgress {
    fn line(&self, s: &str) {
        match &self.bar {
            Some(b) => b.println(s),
            None if !self.quiet => eprintln!("{s}"),
            None => {}
        }
    }
}

fn describe(key: &RunKey, params: &str) -> String {
    let phase = if key.phase == Phase::None {
        String::new()
    } else {
        format!(" {}", key.phase)
    };
    let params = if params.is_empty() { "-" } else { params };
    format!("{} [{params}]{phase} #{}", key.step, key.repetition)
}

impl Progress for CliProgress {
    fn start(&mut self, experiment: i64, total: usize, done: usize) {
        self.total = total;
        self.pos = done;
        if let Some(b) = &self.bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.reset_eta();
        }
        let resumed = if done > 0 {
            format!(", {done} already stored")
        } else {
            String::new()
        };
        self.line(&format!("experiment {experiment}: {total} runs{resumed}"));
    }

    fn run_start(&mut self, key: &RunKey, params: &str) {
        if let Some(b) = &self.bar {
            b.set_message(describe(key, params));
        }
    }

    fn run_end(&mut self, key: &RunKey, params: &str, status: RunStatus, outcome: &str) {
        self.pos += 1;
        let tag = match status {
            RunStatus::Ok => "",
            RunStatus::Skipped => "skipped: ",
            RunStatus::Failed => "FAILED: ",
            RunStatus::Partial => "PARTIAL: ",
        };
        self.line(&format!(
            "[{}/{}] {}: {tag}{outcome}",
            self.pos,
            self.total,
            describe(key, params)
        ));
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn note(&mut self, message: &str) {
        self.line(message);
    }

    fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Runs `nsperf run`.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let plan = load_plan(args.plan.as_ref())?;
    if args.dry_run {
        print_dry_run(&plan);
        return Ok(());
    }
    if args.resume && !args.db.exists() {
        // Checked before opening: opening creates the store, and an empty database is not
        // what a resume that had nothing to resume should leave.
        return Err(nsperf_results::StoreError::NothingToResume(format!(
            "no result store at {} to resume from",
            args.db.display()
        ))
        .into());
    }
    let listener = args.metrics.bind()?;
    let mut store = Store::open(&args.db)?;
    let mut exec = ProcessExecutor::current(crate::cmd::lab::emulator_command)?;
    if args.keep_captures {
        keep_captures(&plan, &args, &mut exec);
    }
    let mut progress = CliProgress::new(&plan, &args);
    if !progress.quiet {
        eprintln!(
            "plan {}: {} cells, {} runs ({} repetitions), store {}",
            plan.name,
            plan.cells.len(),
            plan.total_runs(),
            plan.repetitions,
            args.db.display()
        );
    }
    if let Some(hosts) = &plan.hosts {
        // Every host's agent before any run: an unreachable host fails the plan at once.
        exec.connect_hosts(hosts)
            .context("connecting the plan's [hosts]")?;
        if !progress.quiet {
            for (name, offset, error) in exec.host_clocks() {
                eprintln!(
                    "host {name}: agent up, clock {:+.3} ms ± {:.3} ms",
                    offset as f64 / 1e6,
                    error as f64 / 1e6
                );
            }
        }
    }
    let metrics = crate::metrics::RunMetrics::default();
    let _endpoint = match listener {
        Some(l) => Some(l.serve(metrics.clone())?),
        None => None,
    };
    let summary = nsperf_plan::run_plan(
        &plan,
        &mut store,
        &mut exec,
        &RunOptions {
            resume: args.resume,
            label: args.label.clone(),
        },
        &mut crate::metrics::Counting {
            inner: &mut progress,
            metrics,
        },
    );
    exec.close_hosts();
    let summary = summary?;
    let report_file = report_path(&args);
    let report = (!args.no_report).then(|| {
        crate::cmd::report::export_to(
            &store,
            &summary.experiment.to_string(),
            nsperf_report::ExportFormat::Html,
            &report_file,
        )
    });
    if let Some(Err(e)) = &report {
        eprintln!("nsperf: the report could not be written: {e:#}");
    }
    let report_path = match &report {
        Some(Ok(())) => Some(report_file.display().to_string()),
        _ => None,
    };
    print_outcome(&args, &store, &summary, report_path.as_deref())?;
    if summary.interrupted {
        return Err(crate::exit::classified(
            nsperf_core::Failure::Interrupted,
            format!(
                "interrupted: experiment {} is stored; `nsperf run --resume` completes it",
                summary.experiment
            ),
        ));
    }
    Ok(())
}

/// `--keep-captures`: the step captures are kept beside the store (and a word when no step
/// takes one).
fn keep_captures(plan: &Plan, args: &RunArgs, exec: &mut ProcessExecutor) {
    let takes_one = plan
        .cells
        .iter()
        .flat_map(|c| &c.steps)
        .any(|s| s.capture().is_some());
    if !takes_one && !args.json {
        eprintln!(
            "nsperf: --keep-captures: no step of plan {} takes a capture (add capture = \"SITE\" or \"link\" to a network step, or to an io step through a lab)",
            plan.name
        );
    }
    let dir = captures_dir(&args.db);
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    exec.keep_captures_in(dir);
}

impl CliProgress {
    /// The progress bar on a terminal (neither `--quiet` nor `--json`).
    fn new(plan: &Plan, args: &RunArgs) -> Self {
        let bar = (!args.quiet && !args.json && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new(plan.total_runs() as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} runs, {elapsed} elapsed, ETA {eta}  {msg}",
                )
                .expect("valid template"),
            );
            b
        });
        CliProgress {
            bar,
            quiet: args.quiet || args.json,
            total: 0,
            pos: 0,
        }
    }
}

/// What the run did: its JSON (`--json`), or the counts, the statistics and the report's
/// path.
fn print_outcome(
    args: &RunArgs,
    store: &Store,
    summary: &nsperf_plan::RunSummary,
    report_path: Option<&str>,
) -> anyhow::Result<()> {
    if args.json {
        print_json(&serde_json::json!({
            "report": report_path,
            "experiment": summary.experiment,
            "label": args.label,
            "lab": summary.lab,
            "db": args.db.display().to_string(),
            "measured": summary.measured,
            "skipped": summary.skipped,
            "failed": summary.failed,
            "already_done": summary.already_done,
            "interrupted": summary.interrupted,
            "skip_reasons": summary.skip_reasons,
        }))?;
    } else {
        println!(
            "experiment {}: {} measured, {} skipped, {} failed{}",
            summary.experiment,
            summary.measured,
            summary.skipped,
            summary.failed,
            if summary.already_done > 0 {
                format!(", {} stored before", summary.already_done)
            } else {
                String::new()
            }
        );
        for r in &summary.skip_reasons {
            println!("skipped {r}");
        }
        println!();
        crate::cmd::results::print_stats(store, summary.experiment)?;
        if let Some(p) = &report_path {
            println!("\nreport: {p}");
        }
    }
    Ok(())
}

/// The report's path: `--report`, else `nsperf-report.html` in the store's directory.
fn report_path(args: &RunArgs) -> PathBuf {
    args.report
        .clone()
        .unwrap_or_else(|| crate::cmd::report::beside(&args.db))
}

fn print_dry_run(plan: &Plan) {
    println!(
        "plan {}: {} cells, {} runs ({} repetitions)",
        plan.name,
        plan.cells.len(),
        plan.total_runs(),
        plan.repetitions
    );
    if let Some(l) = &plan.lab {
        use nsperf_lab::Topology;
        let mut shape = match &l.shape.topology {
            Topology::Mesh => "mesh".to_string(),
            Topology::Star { server } => {
                format!("star, port of {}", server.as_deref().unwrap_or("?"))
            }
            Topology::Dumbbell { left } => format!("dumbbell, left {}", left.join(",")),
        };
        if let Some(m) = l.shape.memory_bytes {
            shape.push_str(&format!(", memory {}", nsperf_core::Bytes(m)));
        }
        if let Some(seed) = l.shape.seed {
            shape.push_str(&format!(", seed {seed}"));
        }
        println!(
            "lab {}: sites {}; {shape}",
            l.name.as_deref().unwrap_or("(a new name for each run)"),
            l.sites.join(", ")
        );
    }
    if let Some(h) = &plan.hosts {
        for host in &h.hosts {
            let allow: Vec<String> = host.allow.iter().map(ToString::to_string).collect();
            println!(
                "host {}: address {}, agent {}, runs {}",
                host.name,
                host.address,
                match &host.launch {
                    nsperf_plan::agent::Launch::Tcp { addr } => format!("at {addr}"),
                    nsperf_plan::agent::Launch::Ssh(t) =>
                        format!("started through ssh {}", t.destination),
                    nsperf_plan::agent::Launch::Local => "started on this host".into(),
                    nsperf_plan::agent::Launch::Batch { group, index } =>
                        format!("{index} of batch group {group}"),
                    nsperf_plan::agent::Launch::Site { site } =>
                        format!("started in lab site {site} once the lab is up"),
                },
                allow.join(", ")
            );
        }
        for (g, members) in &h.groups {
            println!("group {g}: {}", members.join(", "));
        }
    }
    for svc in &plan.services {
        println!("service {}", svc.describe());
    }
    for c in &plan.cells {
        let link = c
            .link
            .as_ref()
            .map(|l| format!("  link: {}", nsperf_plan::plan::describe_link(l)))
            .unwrap_or_default();
        println!("cell {}{link}", c.key());
        for s in &c.steps {
            let phases: Vec<&str> = s.phases.iter().map(|p| p.as_str()).collect();
            let on =
                s.on.as_ref()
                    .map(|o| {
                        format!(
                            " on {}{}{}",
                            o.name,
                            if o.concurrent {
                                ""
                            } else {
                                " one after another"
                            },
                            o.server
                                .as_ref()
                                .map(|sv| format!(", server {sv}"))
                                .unwrap_or_default()
                        )
                    })
                    .unwrap_or_default();
            let through = s
                .service()
                .map(|n| format!(" through service {n}"))
                .unwrap_or_default();
            println!(
                "  {} ({}) phases {}{on}{through}",
                s.name,
                s.kind,
                phases.join(",")
            );
            if let Some(l) = &s.load {
                println!("    load: {l}");
            }
            for (what, cmd) in [("setup", &s.setup), ("teardown", &s.teardown)] {
                if let Some(c) = cmd {
                    println!("    {what} (once in this cell): {}", c.join(" "));
                }
            }
        }
    }
}
