//! Reaching agents: a running agent over TCP, or one started for the plan through ssh or on
//! this host, its control session carried by the launching process's standard input and
//! output (`nsperf agent --stdio`). The launchers use the engines people already run
//! (OpenSSH with the user's own configuration, Slurm's `srun`), never a home-made one.
//!
//! ssh runs in batch mode (never a password prompt). When the host lacks this very nsperf
//! binary, it is copied over the same ssh connection to `~/.cache/nsperf/nsperf-HASH` (the
//! hash of the binary's bytes, so hosts sharing a home directory share one copy, and a copy is
//! made whole before it is renamed into place).

use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::fleet::{AgentLink, HostFailure};
use super::proto::StepClass;

/// How long to wait for a TCP connection or an ssh login.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where an agent is and how to get one there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// An agent already listening (`nsperf agent --listen`), at `host:port`.
    Tcp {
        /// Its control address.
        addr: String,
    },
    /// Started through ssh for the plan: `ssh DEST nsperf agent --stdio`.
    Ssh(SshTarget),
    /// Started on this host for the plan (a child `nsperf agent --stdio`).
    Local,
    /// Started in a site of the plan's lab once the lab is up (`ip netns exec` of the site's
    /// namespace running `nsperf agent --stdio`), stopped before the lab goes down.
    Site {
        /// The site's name.
        site: String,
    },
    /// One agent of a batch group (Slurm tasks, Kubernetes pods), started with its group.
    Batch {
        /// The group's name in the plan.
        group: String,
        /// This agent's index in the group.
        index: u32,
    },
}

/// An ssh destination, options from the user's configuration plus these.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SshTarget {
    /// `[user@]host` (or a `Host` alias of `~/.ssh/config`).
    pub destination: String,
    /// Port, when not the configured one.
    pub port: Option<u16>,
    /// Identity file, when not the configured one.
    pub identity: Option<PathBuf>,
    /// Further `-o` options (`StrictHostKeyChecking=accept-new`, a `UserKnownHostsFile`…).
    pub options: Vec<String>,
}

impl SshTarget {
    /// The `ssh` command to this target running `remote` (a shell command line).
    pub fn command(&self, remote: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args(["-o", "BatchMode=yes"])
            .arg("-o")
            .arg(format!("ConnectTimeout={}", CONNECT_TIMEOUT.as_secs()));
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        if let Some(p) = self.port {
            c.arg("-p").arg(p.to_string());
        }
        if let Some(i) = &self.identity {
            c.arg("-i").arg(i);
        }
        c.arg("--").arg(&self.destination).arg(remote);
        c
    }
}

/// The arguments of `nsperf agent` for the plan's agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOptions {
    /// Step classes allowed.
    pub allow: Vec<StepClass>,
}

impl AgentOptions {
    /// `agent --stdio -q [--allow …]`.
    pub fn args(&self) -> Vec<String> {
        let mut v = vec!["agent".to_string(), "--stdio".to_string(), "-q".to_string()];
        if !self.allow.is_empty() {
            v.push("--allow".into());
            v.push(
                self.allow
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        v
    }
}

/// Quotes `s` for a POSIX shell.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The first 16 hex digits of the SHA-256 of a file.
pub fn file_hash(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn run_ssh(t: &SshTarget, remote: &str, input: Option<&Path>) -> Result<String, String> {
    let mut c = t.command(remote);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    match input {
        Some(p) => {
            let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            c.stdin(f);
        }
        None => {
            c.stdin(Stdio::null());
        }
    }
    let out = c.output().map_err(|e| format!("cannot run ssh: {e}"))?;
    super::stdout_or_last_error(out, &format!("ssh {}", t.destination))
}

/// Makes sure the host has this binary (copying it over ssh when not) and returns its path
/// there.
pub fn ensure_binary(t: &SshTarget, exe: &Path) -> Result<String, String> {
    let hash = file_hash(exe).map_err(|e| format!("reading {}: {e}", exe.display()))?;
    let path = format!(".cache/nsperf/nsperf-{hash}");
    let probe = format!("test -x \"$HOME\"/{path} && echo present || echo missing");
    if run_ssh(t, &probe, None)? == "present" {
        return Ok(format!("\"$HOME\"/{path}"));
    }
    run_ssh(t, &copy_script(&path), Some(exe))?;
    Ok(format!("\"$HOME\"/{path}"))
}

/// The shell command that stores the binary read from standard input at `$HOME/PATH`.
///
/// Hosts that share a home directory (one NFS home, or lab sites on one machine) upload at
/// the same time. The copy goes to a private temporary name and is hard-linked into place:
/// `ln` fails when the name exists, so a binary already there (same name, same hash, same
/// content) is never replaced under an agent that runs from it — a replaced file would
/// leave that agent's own path "… (deleted)" for the step processes it starts.
fn copy_script(path: &str) -> String {
    format!(
        "umask 022 && mkdir -p \"$HOME\"/.cache/nsperf && tmp=\"$HOME\"/{path}.$$ && cat > \"$tmp\" && chmod 755 \"$tmp\" && {{ ln \"$tmp\" \"$HOME\"/{path} 2>/dev/null || test -x \"$HOME\"/{path}; }}; rc=$?; rm -f \"$tmp\"; exit $rc"
    )
}

/// A process whose standard input and output carry an agent session.
pub(crate) fn stdio_link(
    name: &str,
    mut cmd: Command,
    psk: Option<Vec<u8>>,
) -> Result<AgentLink, HostFailure> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().map_err(|e| HostFailure::Unreachable {
        host: name.to_string(),
        reason: format!("cannot start {:?}: {e}", cmd.get_program()),
    })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err(HostFailure::Unreachable {
            host: name.to_string(),
            reason: "no pipes to the launching process".into(),
        });
    };
    Ok(AgentLink {
        name: name.to_string(),
        reader: Box::new(stdout),
        writer: Box::new(stdin),
        process: Some(child),
        psk,
    })
}

/// Opens the link to host `name`: connects, or launches its agent. `exe` is this nsperf (the
/// binary an ssh host gets and a local agent runs).
pub fn open(
    name: &str,
    launch: &Launch,
    opts: &AgentOptions,
    psk: Option<Vec<u8>>,
    exe: &Path,
) -> Result<AgentLink, HostFailure> {
    let unreachable = |reason: String| HostFailure::Unreachable {
        host: name.to_string(),
        reason,
    };
    match launch {
        Launch::Tcp { addr } => {
            let sa = addr
                .to_socket_addrs()
                .map_err(|e| unreachable(format!("{addr}: {e}")))?
                .next()
                .ok_or_else(|| unreachable(format!("{addr}: no address")))?;
            let s = TcpStream::connect_timeout(&sa, CONNECT_TIMEOUT)
                .map_err(|e| unreachable(format!("{addr}: {e}")))?;
            let _ = s.set_nodelay(true);
            let r = s
                .try_clone()
                .map_err(|e| unreachable(format!("{addr}: {e}")))?;
            Ok(AgentLink {
                name: name.to_string(),
                reader: Box::new(r),
                writer: Box::new(s),
                process: None,
                psk,
            })
        }
        Launch::Ssh(t) => {
            let remote_exe = ensure_binary(t, exe).map_err(unreachable)?;
            let mut line = remote_exe;
            for a in opts.args() {
                line.push(' ');
                line.push_str(&shell_quote(&a));
            }
            stdio_link(name, t.command(&line), psk)
        }
        Launch::Local => {
            let mut c = Command::new(exe);
            c.args(opts.args());
            stdio_link(name, c, psk)
        }
        Launch::Site { site } => Err(unreachable(format!(
            "the agent of lab site {site} starts in the lab once it is up, not alone"
        ))),
        Launch::Batch { group, .. } => Err(unreachable(format!(
            "an agent of batch group {group} starts with its group (slurm or kubernetes), not alone"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_runs_in_batch_mode_with_the_targets_options() {
        let t = SshTarget {
            destination: "root@10.77.0.2".into(),
            port: Some(2222),
            identity: Some("/tmp/k".into()),
            options: vec!["StrictHostKeyChecking=accept-new".into()],
        };
        let c = t.command("true");
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(c.get_program(), "ssh");
        assert!(args.windows(2).any(|w| w == ["-o", "BatchMode=yes"]));
        assert!(args.windows(2).any(|w| w == ["-p", "2222"]));
        assert!(args.windows(2).any(|w| w == ["-i", "/tmp/k"]));
        assert!(
            args.windows(2)
                .any(|w| w == ["-o", "StrictHostKeyChecking=accept-new"])
        );
        assert_eq!(&args[args.len() - 3..], ["--", "root@10.77.0.2", "true"]);
    }

    #[test]
    fn agent_arguments_and_quoting() {
        let o = AgentOptions {
            allow: vec![StepClass::Net, StepClass::Server],
        };
        assert_eq!(
            o.args(),
            ["agent", "--stdio", "-q", "--allow", "net,server"]
        );
        assert_eq!(shell_quote("net,server"), "net,server");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn the_hash_names_the_bytes() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, b"one").unwrap();
        std::fs::write(&b, b"two").unwrap();
        let (ha, hb) = (file_hash(&a).unwrap(), file_hash(&b).unwrap());
        assert_eq!(ha.len(), 16);
        assert_ne!(ha, hb);
        assert_eq!(ha, file_hash(&a).unwrap());
    }

    /// The upload as a second host sharing the home runs it: the first copy stays (same
    /// inode, so an agent running from it keeps a valid path), the temporary goes, and a
    /// first upload into an empty home works.
    #[test]
    fn an_upload_never_replaces_a_cached_binary() {
        use std::os::unix::fs::MetadataExt;
        use std::process::{Command, Stdio};
        let home = tempfile::tempdir().unwrap();
        let upload = |bytes: &[u8]| {
            let mut c = Command::new("sh")
                .args(["-c", &copy_script(".cache/nsperf/nsperf-0123")])
                .env("HOME", home.path())
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            c.stdin.take().unwrap().write_all(bytes).unwrap();
            c.wait().unwrap().success()
        };
        let cached = home.path().join(".cache/nsperf/nsperf-0123");
        assert!(upload(b"#!/bin/sh\n"));
        let first = std::fs::metadata(&cached).unwrap();
        assert_eq!(first.mode() & 0o777, 0o755);
        assert!(upload(b"#!/bin/sh\n"));
        assert_eq!(std::fs::metadata(&cached).unwrap().ino(), first.ino());
        let left: Vec<_> = std::fs::read_dir(home.path().join(".cache/nsperf"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("nsperf-0123")]);
    }
}
