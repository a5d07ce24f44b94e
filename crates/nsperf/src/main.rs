//! The `nsperf` command line: parses arguments, calls an engine, prints. Exit codes are
//! listed in `exit.rs` and `docs/exit-codes.md`.

mod cmd;
mod exit;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Network-storage performance: measure every layer of the path with one clock, and say
/// where the throughput goes.
#[derive(Debug, Parser)]
#[command(
    name = "nsperf",
    version,
    about,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the host facts recorded with every result, and CPU use per core.
    Host(cmd::host::HostArgs),
    /// Run an experiment plan (the embedded default plan without one) into the result store.
    Run(cmd::run::RunArgs),
    /// List, show and export the experiments in the result store.
    Results(cmd::results::ResultsArgs),
    /// Write the self-contained HTML report of an experiment (charts and tables).
    Report(cmd::report::ReportArgs),
    /// WAN labs: network namespaces joined by an emulated link (rate, delay, loss, partitions).
    Lab(cmd::lab::LabArgs),
    /// Analyse a pcap/pcapng capture: TCP conversations, retransmissions, windows, RTT, and
    /// what limited each connection.
    Trace(cmd::trace::TraceArgs),
    /// Serve `nsperf net` clients (many at once), with caps and optional key authentication.
    Server(cmd::server::ServerArgs),
    /// Measure TCP/UDP throughput, request/response latency or a message-size sweep against
    /// an `nsperf server` (or `--loopback`), with TCP_INFO and CPU of both ends.
    Net(Box<cmd::net::NetArgs>),
    /// File-system and block I/O: workloads (fio), matrix (iozone), suite (bonnie++).
    Io(cmd::io::IoArgs),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    nsperf_core::signal::install_interrupt_handler();
    match cli.command {
        Command::Host(a) => cmd::host::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Results(a) => cmd::results::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Server(a) => cmd::server::run(a),
        Command::Net(a) => cmd::net::run(*a),
        Command::Io(a) => cmd::io::run(a),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    // Printing into a closed pipe (`nsperf ... | head`) must end quietly, not panic.
    // SAFETY: setting SIGPIPE to its default action before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nsperf: {}", one_line(&e));
            ExitCode::from(exit::failure_of(&e).exit_code())
        }
    }
}

/// The error and its causes on one line: `outer: inner: root cause`.
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in e.chain() {
        let s = c.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}
