//! The `nsperf` command line: parses arguments, calls an engine, prints. Exit codes are
//! listed in `exit.rs` and `docs/exit-codes.md`.

mod cmd;
mod exit;
mod metrics;
mod output;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// `nsperf --version`: the version, the commit and the target it was built for.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("NSPERF_COMMIT"),
    ", ",
    env!("NSPERF_TARGET"),
    ")"
);

/// Network-storage performance: measure every layer of the path with one clock, and say
/// where the throughput goes.
#[derive(Debug, Parser)]
#[command(
    name = "nsperf",
    version = VERSION,
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
    /// The storage workload a capture holds (NFS, SMB), per client, and its predicted
    /// duration at other RTTs, link rates and windows.
    Replay(cmd::replay::ReplayArgs),
    /// Serve `nsperf net` clients (many at once), with caps and optional key authentication.
    Server(cmd::server::ServerArgs),
    /// Measure TCP/UDP throughput, request/response latency or a message-size sweep against
    /// an `nsperf server` (or `--loopback`), with TCP_INFO and CPU of both ends.
    Net(Box<cmd::net::NetArgs>),
    /// File-system and block I/O: workloads (fio), matrix (iozone), suite (bonnie++).
    Io(cmd::io::IoArgs),
    /// Measure the storage at a file server, the network to it and the protocol end to end,
    /// and name the layer that limits reads and writes.
    Doctor(Box<cmd::doctor::DoctorArgs>),
    /// Run plan steps on this host for a coordinator (`nsperf run` with `[hosts]`): over
    /// stdin/stdout (started by ssh or srun) or on a listening port with a key.
    Agent(cmd::agent::AgentArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::completions::CompletionsArgs),
    /// Print the manual page, or write one page per command into a directory.
    Man(cmd::completions::ManArgs),
    /// (internal) One step of a plan: a step spec (JSON) on stdin, its report on stdout.
    #[command(hide = true)]
    Step,
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
        Command::Replay(a) => cmd::replay::run(a),
        Command::Server(a) => cmd::server::run(a),
        Command::Agent(a) => cmd::agent::run(a),
        Command::Net(a) => cmd::net::run(*a),
        Command::Io(a) => cmd::io::run(a),
        Command::Doctor(a) => cmd::doctor::run(*a),
        Command::Completions(a) => cmd::completions::completions(a, Cli::command()),
        Command::Man(a) => cmd::completions::man(a, Cli::command()),
        Command::Step => cmd::step::run(),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// True when stdout is a pipe or socket whose reader has gone (`nsperf … | head` after head
/// exited): `poll` reports `POLLERR`/`POLLHUP` on it.
fn stdout_is_broken() -> bool {
    let mut p = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// Keeps large freed allocations in the process instead of handing them back to the kernel.
///
/// glibc serves an allocation above its mmap threshold (128 KiB, raised as such blocks are
/// freed) with a fresh mapping and unmaps it on free, and trims its heap when more than
/// twice that is free at the top. The smb2 crate allocates every message it receives: a
/// 1 MiB READ reply is read into one vector and copied into three more, so each reply
/// faulted in about 1000 fresh pages and gave them back (measured: 330 000 minor faults to read
/// 256 MiB twice, half of the process's time in the kernel's fault path, 320 MiB/s against
/// smbclient's 950). With blocks up to 32 MiB taken from the heap and 64 MiB of free heap
/// kept, the same read takes 19 000 faults at about twice the rate, for about 20 MiB more
/// resident memory. A user's own `GLIBC_TUNABLES` or `MALLOC_*_` settings win. Other C
/// libraries (the static musl build) have no such knob: there, large messages stay mapped
/// per message.
fn keep_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let user_set = std::env::var_os("GLIBC_TUNABLES")
            .is_some_and(|t| t.to_string_lossy().contains("malloc"))
            || std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with("MALLOC_"));
        if !user_set {
            // SAFETY: mallopt only sets the allocator's parameters; called first thing in
            // main, before any other thread exists.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
            }
        }
    }
}

/// SIGPIPE is ignored in the whole process, so that a write to a peer that went away (an NFS,
/// SMB or nsperf server killed mid-run) comes back as `EPIPE` and is reported as "peer lost"
/// (exit 12) instead of killing nsperf silently (exit 141). Printing into a closed pipe
/// (`nsperf … | head`) must still end quietly with 0: `print!` panics on `EPIPE`, and this
/// hook turns that panic into a quiet exit when stdout is what broke.
fn ignore_sigpipe() {
    // SAFETY: setting SIGPIPE's disposition before any thread starts. Children get the
    // default action back: std's Command resets SIGPIPE in the child before exec.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && stdout_is_broken() {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    ignore_sigpipe();
    keep_large_allocations();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            let args: Vec<String> = std::env::args().collect();
            eprintln!("nsperf: {}", usage_line(&e, &args));
            return ExitCode::from(nsperf_core::Failure::Usage.exit_code());
        }
        Err(e) => {
            // --help and --version print as clap renders them.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // Only stdout's broken pipe is quiet; a peer's is an error like any other.
        Err(e) if is_broken_pipe(&e) && stdout_is_broken() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nsperf: {}", one_line(&e));
            ExitCode::from(exit::failure_of(&e).exit_code())
        }
    }
}

/// A usage error on one line like every other error: clap's message (without its "error:"
/// prefix, usage block and tip lines), its tip in brackets, and which `--help` to read.
fn usage_line(e: &clap::Error, args: &[String]) -> String {
    let text = e.render().to_string();
    let mut message: Vec<&str> = Vec::new();
    let mut tip = None;
    for l in text.lines().map(str::trim) {
        if let Some(t) = l.strip_prefix("tip: ") {
            tip = Some(t);
        } else if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        } else if !l.is_empty() {
            message.push(l.strip_prefix("error: ").unwrap_or(l));
        }
    }
    let mut line = message.join(" ");
    if let Some(l) = named_value_line(e) {
        line = l;
    }
    if line.is_empty() {
        line = "invalid arguments".into();
    }
    if let Some(t) = tip {
        line.push_str(&format!(" ({t})"));
    }
    format!(
        "{line}; see '{} --help'",
        command_path(Cli::command(), args)
    )
}

/// The (sub)command the arguments name, e.g. `nsperf io run`: the words that match the
/// command tree from the top, skipping flags.
fn command_path(mut cmd: clap::Command, args: &[String]) -> String {
    let mut path = vec![cmd.get_name().to_string()];
    for a in args.iter().skip(1).filter(|a| !a.starts_with('-')) {
        match cmd.find_subcommand(a) {
            Some(sub) => {
                path.push(sub.get_name().to_string());
                let sub = sub.clone();
                cmd = sub;
            }
            None => break,
        }
    }
    path.join(" ")
}

/// The error and its causes on one line: `outer: inner: root cause`.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in e.chain() {
        let s = c.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    without_repeated_names(parts).join(": ").replace('\n', " ")
}

/// Drops from a context the path or address its cause names again (`trace F: cannot read F:
/// …` becomes `trace: cannot read F: …`); a context left empty goes.
fn without_repeated_names(parts: Vec<String>) -> Vec<String> {
    let is_name = |w: &str| w.len() > 2 && (w.contains('/') || w.contains('.'));
    let mut out = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let later = &parts[i + 1..];
        let kept: Vec<&str> = p
            .split(' ')
            .filter(|w| !(is_name(w) && later.iter().any(|l| l.contains(w))))
            .collect();
        let kept = kept.join(" ");
        if !kept.trim().is_empty() {
            out.push(kept);
        }
    }
    out
}

/// A bad flag value whose parser names the value itself (`invalid rate 'fast': …`): said once,
/// as `--rate <RATE>: invalid rate 'fast': …`, not after clap's "invalid value 'fast' for …".
fn named_value_line(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
    ) else {
        return None;
    };
    let why = std::error::Error::source(e)?.to_string();
    (!value.is_empty() && why.contains(value.as_str())).then(|| format!("{arg}: {why}"))
}
