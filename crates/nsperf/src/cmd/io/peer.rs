//! `nsperf io peer DIR`: the receiving side of `nsperf io run --replicate`, writing each
//! mirrored file into DIR (`nsperf_io::mirror::peer`). Prints one line when it listens (its
//! address, for scripts), then one per connection unless `-q`.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use nsperf_core::Failure;

use crate::exit::classified;

/// Arguments of `nsperf io peer`.
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// Directory the mirrored files are written into (it must exist).
    pub dir: PathBuf,
    /// Address and port to listen on (port 0: any free port, printed).
    #[arg(long, short = 'l', default_value = "0.0.0.0:7789")]
    pub listen: SocketAddr,
    /// Exit once this many connections (one per job of a run) have been served.
    #[arg(long, value_name = "N")]
    pub connections: Option<u64>,
    /// Keep each copy after its run (default: removed when the writer closes the
    /// connection).
    #[arg(long)]
    pub keep: bool,
    /// No line per connection.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Runs `nsperf io peer`.
pub fn run(a: PeerArgs) -> anyhow::Result<()> {
    if !a.dir.is_dir() {
        return Err(classified(
            Failure::Input,
            format!("io peer: {} is not a directory", a.dir.display()),
        ));
    }
    if a.connections == Some(0) {
        return Err(classified(
            Failure::Usage,
            "io peer: --connections must be at least 1",
        ));
    }
    let listener = TcpListener::bind(a.listen).map_err(|e| {
        classified(
            Failure::Refused,
            format!("io peer: cannot listen on {}: {e}", a.listen),
        )
    })?;
    let addr = listener
        .local_addr()
        .context("io peer: the listening address")?;
    let mut out = std::io::stdout();
    writeln!(
        out,
        "nsperf io peer: listening on {addr} (writing into {})",
        a.dir.display()
    )?;
    out.flush()?;
    let quiet = a.quiet;
    let log = Arc::new(move |line: &str| {
        if !quiet {
            eprintln!("nsperf io peer: {line}");
        }
    });
    nsperf_io::mirror::peer::serve(listener, &a.dir, a.connections, a.keep, log)
        .context("io peer: accepting connections")
}
