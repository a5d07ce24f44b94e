//! `nsperf completions SHELL` and `nsperf man [DIR]`: generated from the same clap
//! definition the binary parses its arguments with, so they cannot drift from it.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use clap_complete::Shell;

/// Arguments of `nsperf completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

/// Arguments of `nsperf man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `nsperf.1` and one `nsperf-COMMAND.1` per command into this directory (created if
    /// absent) instead of printing the top page.
    dir: Option<PathBuf>,
}

/// Prints the completion script of one shell on stdout.
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<()> {
    let name = cmd.get_name().to_string();
    clap_complete::generate(a.shell, &mut cmd, name, &mut std::io::stdout());
    Ok(())
}

/// Prints the top manual page, or writes every page into a directory.
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<()> {
    match a.dir {
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .context("writing the manual page"),
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("writing manual pages into {}", dir.display()))?;
            let mut pages: Vec<String> = std::fs::read_dir(&dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("nsperf") && n.ends_with(".1"))
                .collect();
            pages.sort();
            println!(
                "{} pages in {}: {}",
                pages.len(),
                dir.display(),
                pages.join(" ")
            );
            Ok(())
        }
    }
}
