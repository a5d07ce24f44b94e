//! The `sbatch` script that runs a plan's coordinator on a Slurm allocation
//! (`nsperf agent slurm-script`): the allocation's shape in `#SBATCH` directives, then
//! `nsperf run PLAN` on the batch host. The plan's Slurm hosts are started by that coordinator
//! with `srun` inside the allocation ([`super::slurm_links`]), one agent per task, so the
//! script holds no second copy of the agents' command line.

use std::fmt;
use std::num::NonZeroU32;
use std::path::PathBuf;

use crate::agent::launch::shell_quote;

/// A value the script cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("slurm script: {field} {value:?} is not {expected}")]
pub struct SlurmScriptError {
    /// Which setting.
    pub field: &'static str,
    /// Its value (the first 80 characters).
    pub value: String,
    /// What it should be.
    pub expected: &'static str,
}

/// An `sbatch` script running `nsperf run PLAN` on an allocation of `nodes` ×
/// `tasks_per_node` tasks (one agent per task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmScript {
    /// The job's name (`--job-name`).
    pub job_name: String,
    /// Nodes (`--nodes`).
    pub nodes: NonZeroU32,
    /// Tasks, so agents, per node (`--ntasks-per-node`).
    pub tasks_per_node: NonZeroU32,
    /// Time limit in Slurm's form (`30`, `1:00:00`, `2-0`).
    pub time: Option<String>,
    /// Partition.
    pub partition: Option<String>,
    /// Account to charge.
    pub account: Option<String>,
    /// The nodes are the job's alone (`--exclusive`), so no other job disturbs a measurement.
    pub exclusive: bool,
    /// The job's output file (`--output`; sbatch's `%j` is the job id); default
    /// `JOB_NAME-%j.out`.
    pub output: Option<String>,
    /// The nsperf binary, at a path every node reads.
    pub nsperf: PathBuf,
    /// The plan.
    pub plan: PathBuf,
    /// Further arguments of `nsperf run` (`--db`, `--resume`, …).
    pub run_args: Vec<String>,
}

fn word(field: &'static str, v: &str) -> Result<(), SlurmScriptError> {
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    ok.then_some(()).ok_or_else(|| SlurmScriptError {
        field,
        value: v.chars().take(80).collect(),
        expected: "1 to 128 letters, digits, '-', '_' or '.'",
    })
}

impl SlurmScript {
    /// Checks every value that goes into a directive (a newline there would be a directive of
    /// its own).
    pub fn validate(&self) -> Result<(), SlurmScriptError> {
        word("job name", &self.job_name)?;
        if let Some(p) = &self.partition {
            word("partition", p)?;
        }
        if let Some(a) = &self.account {
            word("account", a)?;
        }
        if let Some(t) = &self.time {
            let ok = !t.is_empty()
                && t.len() <= 16
                && t.bytes().all(|b| b.is_ascii_digit() || b":-".contains(&b));
            if !ok {
                return Err(SlurmScriptError {
                    field: "time",
                    value: t.chars().take(80).collect(),
                    expected: "a Slurm time (minutes, [D-]HH:MM:SS, …)",
                });
            }
        }
        if let Some(o) = &self.output {
            let ok = !o.is_empty()
                && o.len() <= 4096
                && !o.chars().any(|c| c.is_whitespace() || c.is_control());
            if !ok {
                return Err(SlurmScriptError {
                    field: "output",
                    value: o.chars().take(80).collect(),
                    expected: "a path without spaces or control characters",
                });
            }
        }
        Ok(())
    }
}

impl fmt::Display for SlurmScript {
    /// The script (call [`SlurmScript::validate`] first).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "#!/bin/bash")?;
        writeln!(
            f,
            "# An nsperf plan on a Slurm allocation, written by `nsperf agent slurm-script`;\n\
             # submit it with `sbatch FILE`. The coordinator (`nsperf run`) runs on the batch\n\
             # host. It starts the plan's Slurm hosts itself, one agent per task of this job, as\n\
             # one job step: srun ... nsperf agent --listen 0.0.0.0:0 --psk-file KEY --announce\n\
             # (each agent prints `nsperf-agent HOST PORT` once listening), and reaches each\n\
             # over TCP with the key. The binary, the plan and its key file must be at these\n\
             # paths on every node."
        )?;
        writeln!(f, "#SBATCH --job-name={}", self.job_name)?;
        writeln!(f, "#SBATCH --nodes={}", self.nodes)?;
        writeln!(f, "#SBATCH --ntasks-per-node={}", self.tasks_per_node)?;
        if let Some(t) = &self.time {
            writeln!(f, "#SBATCH --time={t}")?;
        }
        if let Some(p) = &self.partition {
            writeln!(f, "#SBATCH --partition={p}")?;
        }
        if let Some(a) = &self.account {
            writeln!(f, "#SBATCH --account={a}")?;
        }
        if self.exclusive {
            writeln!(f, "#SBATCH --exclusive")?;
        }
        match &self.output {
            Some(o) => writeln!(f, "#SBATCH --output={o}")?,
            None => writeln!(f, "#SBATCH --output={}-%j.out", self.job_name)?,
        }
        writeln!(f, "set -euo pipefail")?;
        writeln!(
            f,
            "nsperf={}",
            shell_quote(&self.nsperf.display().to_string())
        )?;
        writeln!(f, "plan={}", shell_quote(&self.plan.display().to_string()))?;
        writeln!(
            f,
            "echo \"nsperf: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, ${{SLURM_NTASKS:-?}} task(s)\""
        )?;
        write!(f, "exec \"$nsperf\" run \"$plan\"")?;
        for a in &self.run_args {
            write!(f, " {}", shell_quote(a))?;
        }
        writeln!(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script() -> SlurmScript {
        SlurmScript {
            job_name: "nsperf".into(),
            nodes: NonZeroU32::new(4).unwrap(),
            tasks_per_node: NonZeroU32::new(2).unwrap(),
            time: Some("00:30:00".into()),
            partition: Some("batch".into()),
            account: None,
            exclusive: true,
            output: None,
            nsperf: "/shared/bin/nsperf".into(),
            plan: "/shared/plans/ten clients.toml".into(),
            run_args: vec!["--db".into(), "/shared/r.db".into(), "--note=it's".into()],
        }
    }

    #[test]
    fn the_script_has_the_allocation_and_runs_the_plan() {
        let s = script();
        s.validate().unwrap();
        let text = s.to_string();
        let directives: Vec<&str> = text.lines().filter(|l| l.starts_with("#SBATCH")).collect();
        assert_eq!(
            directives,
            [
                "#SBATCH --job-name=nsperf",
                "#SBATCH --nodes=4",
                "#SBATCH --ntasks-per-node=2",
                "#SBATCH --time=00:30:00",
                "#SBATCH --partition=batch",
                "#SBATCH --exclusive",
                "#SBATCH --output=nsperf-%j.out",
            ]
        );
        assert!(text.starts_with("#!/bin/bash\n"));
        // sbatch reads directives only before the first command.
        let lines: Vec<&str> = text.lines().collect();
        let first_command = lines.iter().position(|l| !l.starts_with('#')).unwrap();
        let last_directive = lines
            .iter()
            .rposition(|l| l.starts_with("#SBATCH"))
            .unwrap();
        assert!(last_directive < first_command);
        assert!(
            text.contains("plan='/shared/plans/ten clients.toml'\n"),
            "{text}"
        );
        assert!(
            text.ends_with("exec \"$nsperf\" run \"$plan\" --db /shared/r.db '--note=it'\\''s'\n")
        );
    }

    #[test]
    fn values_that_would_break_a_directive_are_refused() {
        for (field, edit) in [
            (
                "job name",
                Box::new(|s: &mut SlurmScript| s.job_name = "a\n#SBATCH --x".into())
                    as Box<dyn Fn(&mut SlurmScript)>,
            ),
            (
                "job name",
                Box::new(|s: &mut SlurmScript| s.job_name = String::new()),
            ),
            (
                "partition",
                Box::new(|s: &mut SlurmScript| s.partition = Some("a b".into())),
            ),
            (
                "account",
                Box::new(|s: &mut SlurmScript| s.account = Some("a;b".into())),
            ),
            (
                "time",
                Box::new(|s: &mut SlurmScript| s.time = Some("1h".into())),
            ),
            (
                "output",
                Box::new(|s: &mut SlurmScript| s.output = Some("a\nb".into())),
            ),
        ] {
            let mut s = script();
            edit(&mut s);
            let e = s.validate().unwrap_err();
            assert_eq!(e.field, field);
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }
}
