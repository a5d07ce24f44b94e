//! `nsperf results list|show`: the experiments in the result store and their statistics.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use nsperf_core::table::Table;
use nsperf_results::Store;
use nsperf_results::stats::group_stats;

use crate::output::print_json;

/// Arguments of `nsperf results`.
#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// Result store (SQLite).
    #[arg(long, global = true, default_value = "nsperf-results.db")]
    pub db: PathBuf,
    #[command(subcommand)]
    pub command: ResultsCommand,
}

/// `nsperf results` subcommands.
#[derive(Debug, Subcommand)]
pub enum ResultsCommand {
    /// List the experiments in the store.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Statistics over the repetitions of each step and cell of one experiment.
    /// Export an experiment to CSV, JSON, XLSX (one sheet per test) or HTML.
    Export {
        /// Experiment id, `latest`, or a label.
        #[arg(default_value = "latest")]
        experiment: String,
        /// Output file.
        #[arg(short = 'o', long)]
        output: PathBuf,
        /// csv, json, xlsx or html; default: from the output's extension.
        #[arg(long)]
        format: Option<nsperf_report::ExportFormat>,
    },
    /// Compare two experiments: per step and parameters, the ratio of means B/A with its
    /// 95 % interval.
    Compare {
        /// Experiment A (the baseline): an id, `latest` or a label.
        a: String,
        /// Experiment B: an id, `latest` or a label.
        b: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Also write the chart of the ratios with their intervals: an HTML page with the
        /// chart and the table (`.html`), or the chart alone (`.svg`).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// Statistics over the repetitions of each step and cell of one experiment.
    Show {
        /// Experiment id, `latest`, or a label.
        #[arg(default_value = "latest")]
        experiment: String,
        /// Print JSON: the experiment and its statistics.
        #[arg(long)]
        json: bool,
        /// Also list every run.
        #[arg(long)]
        runs: bool,
    },
}

fn time_of(ns: u64) -> String {
    // UTC, to the second, without a date crate: days since the epoch to a civil date.
    let secs = (ns / 1_000_000_000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Runs `nsperf results`.
pub fn run(args: ResultsArgs) -> anyhow::Result<()> {
    let store = super::report::open_store(&args.db)?;
    match args.command {
        ResultsCommand::List { json } => {
            let exps = store.experiments()?;
            if json {
                let mut v = Vec::new();
                for e in &exps {
                    let (ok, skipped, failed) = store.counts(e.id)?;
                    v.push(serde_json::json!({
                        "id": e.id, "label": e.label, "plan": e.plan_name, "status": e.status,
                        "started_unix_ns": e.started_unix_ns, "total_runs": e.total_runs,
                        "ok": ok, "skipped": skipped, "failed": failed,
                    }));
                }
                return print_json(&v);
            }
            let mut t = Table::new([
                "id",
                "label",
                "plan",
                "started (UTC)",
                "status",
                "runs",
                "skipped",
                "failed",
            ]);
            for e in &exps {
                let (ok, skipped, failed) = store.counts(e.id)?;
                t.row([
                    e.id.to_string(),
                    e.label.clone().unwrap_or_default(),
                    e.plan_name.clone(),
                    time_of(e.started_unix_ns),
                    e.status.to_string(),
                    format!("{ok}/{}", e.total_runs),
                    skipped.to_string(),
                    failed.to_string(),
                ]);
            }
            print!("{}", t.render());
            Ok(())
        }
        ResultsCommand::Export {
            experiment,
            output,
            format,
        } => {
            let format = match format {
                Some(f) => f,
                None => nsperf_report::ExportFormat::of_path(&output).ok_or_else(|| {
                    crate::exit::usage(format!(
                        "cannot tell the format of {} (give --format csv|json|xlsx|html)",
                        output.display()
                    ))
                })?,
            };
            crate::cmd::report::export_to(&store, &experiment, format, &output)?;
            println!("wrote {}", output.display());
            Ok(())
        }
        ResultsCommand::Compare { a, b, json, output } => {
            compare(&store, (&a, &b), json, output.as_deref())
        }
        ResultsCommand::Show {
            experiment,
            json,
            runs,
        } => {
            let e = store.experiment(&experiment)?;
            if json {
                let rs = store.runs(e.id)?;
                let stats = group_stats(&rs, &|id| store.series(id).unwrap_or_default());
                return print_json(&serde_json::json!({
                    "experiment": e,
                    "stats": stats,
                    "runs": if runs { serde_json::to_value(&rs)? } else { serde_json::Value::Null },
                }));
            }
            let (ok, skipped, failed) = store.counts(e.id)?;
            println!(
                "experiment {}{}: plan {}, {} (started {} UTC), {ok}/{} runs measured, {skipped} skipped, {failed} failed",
                e.id,
                label_of(&e),
                e.plan_name,
                e.status,
                time_of(e.started_unix_ns),
                e.total_runs
            );
            for n in e.notes.lines() {
                println!("skipped {n}");
            }
            println!();
            print_stats(&store, e.id)?;
            if runs {
                println!();
                let mut t = Table::new([
                    "run",
                    "step",
                    "parameters",
                    "phase",
                    "rep",
                    "status",
                    "value",
                    "note",
                ]);
                for r in store.runs(e.id)? {
                    t.row([
                        r.id.to_string(),
                        r.step.clone(),
                        params_text(&r.params),
                        r.phase.to_string(),
                        r.repetition.to_string(),
                        r.status.to_string(),
                        match (&r.metric, r.value) {
                            (Some(m), Some(v)) => m.format(v),
                            _ => String::new(),
                        },
                        r.error.clone().unwrap_or_default(),
                    ]);
                }
                print!("{}", t.render());
            }
            Ok(())
        }
    }
}

/// ` "native"` after an experiment id when it has a label.
fn label_of(e: &nsperf_results::ExperimentRecord) -> String {
    e.label
        .as_deref()
        .map(|l| format!(" \"{l}\""))
        .unwrap_or_default()
}

/// A run's parameters for the terminal: `rtt=50 ms, window=275 KiB` (`-` when none).
fn params_text(p: &nsperf_results::Params) -> String {
    if p.is_empty() {
        "-".into()
    } else {
        nsperf_results::params_label(p, "")
    }
}

/// Prints the statistics table of an experiment.
pub fn print_stats(store: &Store, id: i64) -> anyhow::Result<()> {
    let rs = store.runs(id)?;
    let stats = group_stats(&rs, &|rid| store.series(rid).unwrap_or_default());
    if stats.is_empty() {
        println!("no measured runs");
        return Ok(());
    }
    let mut t = Table::new([
        "step",
        "parameters",
        "phase",
        "n",
        "mean",
        "95% CI",
        "median",
        "stddev",
        "peak interval",
        "sustained",
        "outliers",
        "noise",
    ]);
    for g in &stats {
        let f = |v: f64| g.metric.format(v);
        t.row([
            g.step.clone(),
            params_text(&g.params),
            g.phase.to_string(),
            g.summary.n.to_string(),
            f(g.summary.mean),
            format!("{} .. {}", f(g.summary.ci95_lo), f(g.summary.ci95_hi)),
            f(g.summary.median),
            f(g.summary.stddev),
            g.peak_interval.map(f).unwrap_or_default(),
            g.sustained_mean.map(f).unwrap_or_default(),
            g.outlier_repetitions
                .iter()
                .map(|r| format!("#{r}"))
                .collect::<Vec<_>>()
                .join(" "),
            g.summary.noise_note().unwrap_or_default(),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}

/// Compares the groups of two experiments that have the same step, parameters and phase;
/// with `output`, writes the chart of the ratios too.
fn compare(
    store: &Store,
    (a, b): (&str, &str),
    json: bool,
    output: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let ea = store.experiment(a)?;
    let eb = store.experiment(b)?;
    let ra = store.runs(ea.id)?;
    let rb = store.runs(eb.id)?;
    let ga = group_stats(&ra, &|id| store.series(id).unwrap_or_default());
    let gb = group_stats(&rb, &|id| store.series(id).unwrap_or_default());
    let rows = nsperf_results::stats::compare_groups((&ra, &ga), (&rb, &gb));
    let bonnie = bonnie_tables((&ra, &ga), (&rb, &gb));
    if let Some(path) = output {
        let doc = match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => nsperf_report::compare_svg(&ea, &eb, &rows),
            Some("html" | "htm") => nsperf_report::compare_html(&ea, &eb, &rows),
            _ => {
                return Err(crate::exit::usage(format!(
                    "cannot tell the format of {} (give a .html or .svg file)",
                    path.display()
                )));
            }
        };
        std::fs::write(path, doc).with_context(|| format!("cannot write {}", path.display()))?;
        if !json {
            println!("wrote {}", path.display());
        }
    }
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|c| {
                serde_json::json!({
                    "step": c.step, "params": c.params, "phase": c.phase, "metric": c.metric,
                    "mean_a": c.mean_a, "mean_b": c.mean_b, "ratio": c.ratio.map(|r| r.ratio),
                    "ratio_ci95_lo": c.ratio.map(|r| r.lo), "ratio_ci95_hi": c.ratio.map(|r| r.hi),
                })
            })
            .collect();
        let bonnie: Vec<_> = bonnie
            .iter()
            .map(|(g, cols)| {
                serde_json::json!({
                    "step": g.step, "params": g.params, "phase": g.phase, "columns": cols,
                })
            })
            .collect();
        return print_json(&serde_json::json!({
            "a": ea.id, "a_label": ea.label, "b": eb.id, "b_label": eb.label, "comparisons": v,
            "bonnie": bonnie,
        }));
    }
    if rows.is_empty() {
        println!(
            "experiments {} and {} have no step, parameters and phase in common",
            ea.id, eb.id
        );
        return Ok(());
    }
    println!(
        "B/A: experiment {}{} ({}) against experiment {}{} ({})",
        eb.id,
        label_of(&eb),
        eb.plan_name,
        ea.id,
        label_of(&ea),
        ea.plan_name
    );
    let mut t = Table::new([
        "step",
        "parameters",
        "phase",
        "mean A",
        "mean B",
        "B/A",
        "95% CI",
    ]);
    for c in &rows {
        t.row([
            c.step.clone(),
            params_text(&c.params),
            c.phase.to_string(),
            c.metric.format(c.mean_a),
            c.metric.format(c.mean_b),
            c.ratio
                .map(|r| format!("{:.3}", r.ratio))
                .unwrap_or_else(|| "none".into()),
            c.ratio
                .map(|r| format!("{:.3} .. {:.3}", r.lo, r.hi))
                .unwrap_or_else(|| "a mean is 0".into()),
        ]);
    }
    print!("{}", t.render());
    for (g, cols) in &bonnie {
        println!(
            "\nbonnie step {}{}{}: A = experiment {}{}, B = experiment {}{}",
            g.step,
            match params_text(&g.params).as_str() {
                "-" => String::new(),
                p => format!(", {p}"),
            },
            match g.phase {
                nsperf_results::Phase::None => String::new(),
                p => format!(" ({p})"),
            },
            ea.id,
            label_of(&ea),
            eb.id,
            label_of(&eb)
        );
        print!("{}", bonnie_layout(cols, &side_name(&ea), &side_name(&eb)));
    }
    Ok(())
}

/// `A native` / `B 2`: a line's name in a bonnie table.
fn side_name(e: &nsperf_results::ExperimentRecord) -> String {
    e.label.clone().unwrap_or_else(|| e.id.to_string())
}

/// The bonnie steps the two experiments share (same step, parameters and phase), each with
/// its columns side by side.
fn bonnie_tables<'a>(
    (ra, ga): (
        &[nsperf_results::RunRecord],
        &'a [nsperf_results::stats::GroupStats],
    ),
    (rb, gb): (
        &[nsperf_results::RunRecord],
        &[nsperf_results::stats::GroupStats],
    ),
) -> Vec<(
    &'a nsperf_results::stats::GroupStats,
    Vec<nsperf_results::stats::bonnie::BonnieColumn>,
)> {
    let of = |rs: &'_ [nsperf_results::RunRecord], ids: &[i64]| -> Vec<nsperf_results::RunRecord> {
        rs.iter().filter(|r| ids.contains(&r.id)).cloned().collect()
    };
    ga.iter()
        .filter(|x| x.kind == nsperf_results::StepKind::Bonnie)
        .filter_map(|x| {
            let y = gb
                .iter()
                .find(|y| y.step == x.step && y.params == x.params && y.phase == x.phase)?;
            let (a, b) = (of(ra, &x.run_ids), of(rb, &y.run_ids));
            let cols = nsperf_results::stats::bonnie::compare(
                &a.iter().collect::<Vec<_>>(),
                &b.iter().collect::<Vec<_>>(),
            );
            Some((x, cols))
        })
        .collect()
}

/// bonnie++'s layout: the throughput tests (K/sec and %CP each) and random seeks (/sec and
/// %CP) in one table, the metadata phases (files/sec) in a second, a line per experiment and
/// the ratio B/A per column.
fn bonnie_layout(cols: &[nsperf_results::stats::bonnie::BonnieColumn], a: &str, b: &str) -> String {
    use nsperf_results::stats::bonnie::ColumnUnit;
    let mut out = String::new();
    let meta = |c: &&nsperf_results::stats::bonnie::BonnieColumn| c.group.ends_with("Create");
    let parts: [Vec<&nsperf_results::stats::bonnie::BonnieColumn>; 2] = [
        cols.iter().filter(|c| !meta(c)).collect(),
        cols.iter().filter(meta).collect(),
    ];
    for part in parts.iter().filter(|p| !p.is_empty()) {
        let mut head = vec![String::new()];
        let mut sub = vec![String::new()];
        for c in part {
            let group = match c.group.as_str() {
                "Sequential Output" => "Seq Out",
                "Sequential Input" => "Seq In",
                "Sequential Create" => "Seq Create",
                "Random Create" => "Rnd Create",
                g => g,
            };
            head.push(match c.unit {
                ColumnUnit::CpuPct => String::new(),
                _ => format!("{group} {}", c.test),
            });
            sub.push(
                match c.unit {
                    ColumnUnit::BytesPerS => "K/sec",
                    ColumnUnit::PerS => "/sec",
                    ColumnUnit::CpuPct => "%CP",
                }
                .into(),
            );
        }
        let mut t = Table::new(head);
        t.row(sub);
        let value = |c: &nsperf_results::stats::bonnie::BonnieColumn, v: Option<f64>| {
            v.map(|v| match c.unit {
                ColumnUnit::BytesPerS => format!("{:.0}", v / 1024.0),
                ColumnUnit::PerS | ColumnUnit::CpuPct => format!("{v:.0}"),
            })
            .unwrap_or_else(|| "-".into())
        };
        for (name, pick) in [
            (format!("A {a}"), 0),
            (format!("B {b}"), 1),
            ("B/A".to_string(), 2),
        ] {
            let mut row = vec![name];
            for c in part {
                row.push(match pick {
                    0 => value(c, c.a),
                    1 => value(c, c.b),
                    _ => c
                        .ratio
                        .map(|r| format!("{r:.2}"))
                        .unwrap_or_else(|| "-".into()),
                });
            }
            t.row(row);
        }
        out.push_str(&t.render());
    }
    out
}
