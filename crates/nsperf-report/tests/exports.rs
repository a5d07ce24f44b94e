//! Exports of an experiment made with the mock executor: every format, exact contents, and
//! the HTML report opened in headless Chromium.

use std::path::Path;
use std::process::Command;

use calamine::{Reader, Xlsx, open_workbook};
use nsperf_plan::exec::mock::MockExecutor;
use nsperf_plan::runner::NoProgress;
use nsperf_plan::{Plan, RunOptions, run_plan};
use nsperf_report::{ExperimentData, exporter};
use nsperf_results::Store;

#[path = "../../nsperf/tests/common/skip.rs"]
mod skip;

const PLAN: &str = r#"
name = "report-test"
description = "mocked WAN window and io matrix"
repetitions = 3

[lab]
name = "rptmock"
sites = ["client", "server"]
rate = "45mbit"
rtt = "{rtt}"

[matrix]
rtt = ["10ms", "50ms", "100ms"]
window = ["64k", "{bdp}"]
file_size = ["8m", "32m"]
record = ["4k", "1m"]

[[step]]
name = "tcp"
type = "net"
client = "client"
server = "server"
window = "{window}"

[[step]]
name = "seqread"
type = "io"
workload = "seqread"
size = "{file_size}"
bs = "{record}"
"#;

/// Throughput of a window-limited TCP transfer, min(link, window/RTT), and an io figure.
fn value(ctx: &nsperf_plan::exec::RunContext<'_>, step: &nsperf_plan::plan::ResolvedStep) -> f64 {
    match &step.action {
        nsperf_plan::plan::Action::Net(n) => {
            let rtt: f64 = ctx
                .cell
                .split(',')
                .find_map(|kv| kv.strip_prefix("rtt="))
                .and_then(|v| v.trim_end_matches("ms").parse().ok())
                .unwrap_or(10.0)
                / 1e3;
            let w = n.params.window.map(|w| w as f64).unwrap_or(1e9);
            (w * 8.0 / rtt).min(45e6) * (1.0 - 0.01 * ctx.repetition as f64)
        }
        nsperf_plan::plan::Action::Io(io) => {
            (io.config.bs_bytes as f64).ln() * 1e8 / (io.config.size_bytes as f64).ln()
                + ctx.repetition as f64 * 1e6
        }
        _ => 1.0,
    }
}

fn experiment(dir: &Path) -> Store {
    experiment_with(dir, MockExecutor::new(Box::new(value)))
}

/// The experiment of `PLAN` run through `ex`.
fn experiment_with(dir: &Path, mut ex: MockExecutor) -> Store {
    let mut store = Store::open(&dir.join("r.db")).unwrap();
    let plan = Plan::parse(PLAN.as_bytes()).unwrap();
    run_plan(
        &plan,
        &mut store,
        &mut ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
    store
}

#[test]
fn csv_json_xlsx_exports() {
    let dir = tempfile::tempdir().unwrap();
    let store = experiment(dir.path());
    let data = ExperimentData::load(&store, "latest").unwrap();
    assert_eq!(data.runs.len(), (6 + 4) * 3);

    let csv = String::from_utf8(exporter("csv").unwrap().export(&data).unwrap()).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 30);
    assert!(lines[0].starts_with(
        "experiment,run,step,type,file_size,file_size_bytes,record,record_bytes,rtt,rtt_s,window,window_bytes,phase"
    ));
    assert!(lines[1].contains(",tcp,net,,,,,10ms,0.01,64k,65536,-,1,ok,throughput_bps,"));
    // {bdp} is written as the byte count it stood for (45 Mbit/s x 100 ms, in whole KiB).
    assert!(
        csv.contains(",100ms,0.1,563200,563200,"),
        "{}",
        lines.iter().find(|l| l.contains("100ms,0.1,5")).unwrap()
    );
    assert!(!csv.contains("{bdp}"));

    let json: serde_json::Value =
        serde_json::from_slice(&exporter("json").unwrap().export(&data).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 30);
    assert_eq!(json["runs"][0]["intervals"].as_array().unwrap().len(), 4);
    assert_eq!(json["stats"].as_array().unwrap().len(), 10);
    let g = json["stats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["params"]["rtt"]["value"] == "100ms" && g["params"]["window"]["value"] == "64k")
        .unwrap();
    // 64 KiB / 100 ms = 5.24288 Mbit/s, times 0.99, 0.98, 0.97.
    let mean = g["summary"]["mean"].as_f64().unwrap();
    assert!((mean - 65536.0 * 8.0 / 0.1 * 0.98).abs() < 1e-6, "{mean}");

    let path = dir.path().join("x.xlsx");
    std::fs::write(&path, exporter("xlsx").unwrap().export(&data).unwrap()).unwrap();
    let mut wb: Xlsx<_> = open_workbook(&path).unwrap();
    assert_eq!(wb.sheet_names(), ["summary", "tcp", "seqread"]);
    let tcp = wb.worksheet_range("tcp").unwrap();
    assert_eq!(tcp.height(), 1 + 18);
    let summary = wb.worksheet_range("summary").unwrap();
    assert_eq!(summary.height(), 1 + 10);
    assert_eq!(summary.get((0, 5)).unwrap().to_string(), "mean");
}

/// Issue #13: a field holding a comma, a quote and a line break survives the CSV export.
#[test]
fn csv_quotes_what_needs_quoting() {
    let dir = tempfile::tempdir().unwrap();
    let store = experiment(dir.path());
    let mut data = ExperimentData::load(&store, "latest").unwrap();
    let nasty = "refused, \"politely\"\nthen closed";
    data.runs[0].error = Some(nasty.into());
    let csv = exporter("csv").unwrap().export(&data).unwrap();
    let mut r = csv::ReaderBuilder::new().from_reader(csv.as_slice());
    let head = r.headers().unwrap().clone();
    let at = head.iter().position(|h| h == "error").unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 30);
    assert_eq!(&rows[0][at], nasty);
    assert!(rows.iter().all(|x| x.len() == head.len()));
}

#[test]
fn html_report_has_every_chart() {
    let dir = tempfile::tempdir().unwrap();
    let store = experiment(dir.path());
    let data = ExperimentData::load(&store, "latest").unwrap();
    let html = String::from_utf8(exporter("html").unwrap().export(&data).unwrap()).unwrap();
    for kind in [
        "throughput-vs-parameter",
        "throughput-over-time",
        "heatmap",
        "latency",
        "cpu",
    ] {
        assert!(
            html.contains(&format!("data-chart=\"{kind}\"")),
            "chart {kind} missing"
        );
    }
    assert!(html.contains("ceiling: link rate 45.0 Mbit/s"));
    assert!(html.contains("window/RTT window=64 KiB"));
    assert!(html.contains("sustained mean"));
    assert!(html.contains("peak "));
    // Self-contained: nothing is fetched.
    assert!(!html.contains("http://") || !html.contains("src=\"http"));
    assert!(!html.contains("<link") && !html.contains("src="));
}

/// Opens the report in headless Chromium, lets its check script count the drawn shapes of
/// every chart, and saves a screenshot under target/ as an artifact.
#[test]
fn browser_renders_every_chart() {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).any(|d| d.join(b).is_file()))
                .unwrap_or(false)
        });
    let Some(browser) = browser else {
        skip::skip("browser test: no chromium on PATH (.ci/run installs the Debian package)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = experiment(dir.path());
    let data = ExperimentData::load(&store, "latest").unwrap();
    let report = dir.path().join("report.html");
    std::fs::write(&report, exporter("html").unwrap().export(&data).unwrap()).unwrap();
    let url = format!("file://{}", report.display());
    let profile = dir.path().join("profile");
    let base = |c: &mut Command| {
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .env("HOME", dir.path());
    };
    let mut c = Command::new(browser);
    base(&mut c);
    let out = c
        .args(["--virtual-time-budget=3000", "--dump-dom", &url])
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-charts="),
        "chromium did not run the page: {}\n{}",
        dom.chars().take(500).collect::<String>(),
        String::from_utf8_lossy(&out.stderr)
    );
    let attr = |name: &str| -> Vec<u64> {
        dom.match_indices(&format!("{name}=\""))
            .map(|(i, m)| {
                let rest = &dom[i + m.len()..];
                rest[..rest.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    };
    let charts = attr("data-charts")[0];
    assert!(charts >= 6, "{charts} charts");
    assert_eq!(
        attr("data-charts-drawn"),
        vec![charts],
        "a chart drew nothing"
    );
    let drawn = attr("data-drawn");
    assert_eq!(drawn.len() as u64, charts);
    assert!(drawn.iter().all(|&n| n > 0), "{drawn:?}");

    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let mut c = Command::new(browser);
    base(&mut c);
    let out = c
        .arg(format!("--screenshot={}", shot.display()))
        .args(["--window-size=1200,4000", &url])
        .output()
        .expect("run chromium");
    let meta = std::fs::metadata(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(meta.len() > 10_000, "screenshot of {} bytes", meta.len());
    eprintln!("screenshot: {}", shot.display());
}

/// Issue #15: a link outage a run overlapped is stored with it, shaded on its time-series
/// chart, named in its findings, and exported in the JSON.
#[test]
fn an_outage_is_drawn_named_and_exported() {
    use nsperf_lab::events::{EventKind, EventSource, LinkEvent};
    let dir = tempfile::tempdir().unwrap();
    let mut ex = MockExecutor::new(Box::new(value));
    // The link went down half a second before the first run in the lab and stays down.
    let now = nsperf_core::clock::unix_time_ns();
    ex.events = vec![LinkEvent {
        t_s: 10.0,
        t_unix_ns: now - 500_000_000,
        source: EventSource::Schedule,
        kind: EventKind::Down,
        text: "0s down".into(),
        directions: vec!["client -> server".into(), "server -> client".into()],
        links: vec!["client-server".into()],
        change: None,
    }];
    let store = experiment_with(dir.path(), ex);
    let data = ExperimentData::load(&store, "latest").unwrap();
    assert_eq!(data.events.len(), 1, "one run saw it");
    let (&id, ev) = data.events.iter().next().unwrap();
    assert_eq!(ev.len(), 1);
    assert!(ev[0].at_s < -0.4 && ev[0].until_s.is_none(), "{ev:?}");
    let run = data.runs.iter().find(|r| r.id == id).unwrap();
    assert_eq!(run.findings.len(), 1);
    let f = &run.findings[0].message;
    assert!(
        f.starts_with("link client-server partitioned (still at the run's end"),
        "{f}"
    );
    let html = String::from_utf8(exporter("html").unwrap().export(&data).unwrap()).unwrap();
    assert!(html.contains("<g class=\"outage\">"), "shaded");
    assert!(html.contains("down: 0s down"));
    assert!(html.contains("Link events and findings"));
    assert!(html.contains("data-finding=\"link_outage\""));
    let json: serde_json::Value =
        serde_json::from_slice(&exporter("json").unwrap().export(&data).unwrap()).unwrap();
    let r = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap();
    assert_eq!(r["events"][0]["kind"], "down");
    assert_eq!(r["findings"][0]["id"], "link_outage");
}
