//! Exports of an experiment made with the mock executor: every format, exact contents, and
//! the HTML report opened in headless Chromium.

use std::path::Path;
use std::process::Command;

use calamine::{Reader, Xlsx, open_workbook};
use nsperf_plan::exec::mock::MockExecutor;
use nsperf_plan::runner::NoProgress;
use nsperf_plan::{Plan, RunOptions, run_plan};
use nsperf_report::{ExperimentData, ExportFormat};
use nsperf_results::{Metric, Store};

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
fn experiment_with(dir: &Path, ex: MockExecutor) -> Store {
    let mut store = Store::open(&dir.join("r.db")).unwrap();
    run_into(&mut store, ex);
    store
}

/// Runs `PLAN` through `ex` into `store`: one more experiment.
fn run_into(store: &mut Store, ex: MockExecutor) {
    run_plan_into(store, ex, PLAN);
}

/// Runs the plan `text` through `ex` into `store`.
fn run_plan_into(store: &mut Store, mut ex: MockExecutor, text: &str) {
    let plan = Plan::parse(text.as_bytes()).unwrap();
    run_plan(
        &plan,
        store,
        &mut ex,
        &RunOptions::default(),
        &mut NoProgress,
    )
    .unwrap();
}

#[test]
fn csv_json_xlsx_exports() {
    let dir = tempfile::tempdir().unwrap();
    let store = experiment(dir.path());
    let data = ExperimentData::load(&store, "latest").unwrap();
    assert_eq!(data.runs.len(), (6 + 4) * 3);

    let csv = String::from_utf8(ExportFormat::Csv.exporter().export(&data).unwrap()).unwrap();
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
        serde_json::from_slice(&ExportFormat::Json.exporter().export(&data).unwrap()).unwrap();
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
    let bytes = ExportFormat::Xlsx.exporter().export(&data).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let mut wb: Xlsx<_> = open_workbook(&path).unwrap();
    assert_eq!(
        wb.sheet_names(),
        ["summary", "tcp", "seqread", "iozone seqread"]
    );
    let tcp = wb.worksheet_range("tcp").unwrap();
    assert_eq!(tcp.height(), 1 + 18);
    // Labelled headers with units; typed parameters and values are numbers.
    let head: Vec<String> = (0..12)
        .map(|c| tcp.get((0, c)).map(|v| v.to_string()).unwrap_or_default())
        .collect();
    assert_eq!(&head[..3], ["run", "rtt, s", "window, bytes"], "{head:?}");
    assert_eq!(head[7], "throughput, Mbit/s", "{head:?}");
    assert!(matches!(tcp.get((1, 1)), Some(calamine::Data::Float(r)) if *r == 0.01));
    assert!(matches!(tcp.get((1, 7)), Some(calamine::Data::Float(v)) if *v > 1.0 && *v < 46.0));
    let summary = wb.worksheet_range("summary").unwrap();
    assert_eq!(summary.height(), 1 + 10);
    assert_eq!(summary.get((0, 6)).unwrap().to_string(), "mean");
    // One unit per metric down the sheet, so a column sorts by value.
    let mut units = std::collections::BTreeMap::new();
    for r in 1..summary.height() as u32 {
        let cell = |c| summary.get((r as usize, c)).unwrap().to_string();
        units
            .entry((cell(0), cell(3)))
            .or_insert_with(Vec::new)
            .push(cell(4));
    }
    assert_eq!(units.len(), 2, "tcp and seqread throughput: {units:?}");
    assert!(
        units.values().all(|u| u.iter().all(|x| *x == u[0])),
        "{units:?}"
    );
    // The iozone matrix: file sizes down, record sizes across, numbers in MiB/s.
    let io = wb.worksheet_range("iozone seqread").unwrap();
    assert_eq!((io.height(), io.width()), (3, 3));
    assert_eq!(io.get((0, 2)).unwrap().to_string(), "1 MiB");
    assert_eq!(io.get((2, 0)).unwrap().to_string(), "32 MiB");
    assert!(matches!(io.get((1, 1)), Some(calamine::Data::Float(_))));
    // Native charts: one per step sheet with typed means, two per io matrix (its lines and
    // its iozone surface); every sheet has a frozen header row and autofilters.
    let parts = xlsx_parts(&bytes);
    let charts: Vec<&String> = parts
        .iter()
        .filter(|(n, _)| n.starts_with("xl/charts/chart"))
        .map(|(_, x)| x)
        .collect();
    assert_eq!(charts.len(), 4, "{:?}", parts.keys());
    let surface = charts
        .iter()
        .find(|x| x.contains("<c:surface3DChart>"))
        .expect("a surface chart");
    assert_eq!(surface.matches("<c:ser>").count(), 2, "one per file size");
    assert!(
        surface.contains("<a:t>seqread seqread: iozone surface (file size × record size)</a:t>")
    );
    assert!(
        surface.contains("<c:f>'iozone seqread'!$B$3:$C$3</c:f>"),
        "{surface}"
    );
    assert!(surface.contains("<c:serAx>") && surface.contains("<c:view3D>"));
    // Its cached values are the sheet's cells.
    let cell = match io.get((2, 2)) {
        Some(calamine::Data::Float(v)) => *v,
        v => panic!("{v:?}"),
    };
    assert!(surface.contains(&format!("<c:v>{cell}</c:v>")), "{cell}");
    assert!(!charts.iter().any(|x| x.contains("placeholder")));
    for (n, x) in parts
        .iter()
        .filter(|(n, _)| n.starts_with("xl/worksheets/sheet"))
    {
        assert!(
            x.contains(r#"ySplit="1""#) && x.contains("<autoFilter "),
            "{n}"
        );
    }
}

/// The XML parts of an XLSX package, by name.
fn xlsx_parts(bytes: &[u8]) -> std::collections::BTreeMap<String, String> {
    use std::io::Read;
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    (0..z.len())
        .filter_map(|i| {
            let mut f = z.by_index(i).unwrap();
            let name = f.name().unwrap().into_owned();
            let mut s = String::new();
            f.read_to_string(&mut s).ok()?;
            Some((name, s))
        })
        .collect()
}

/// Issue #13: a field holding a comma, a quote and a line break survives the CSV export.
#[test]
fn csv_quotes_what_needs_quoting() {
    let dir = tempfile::tempdir().unwrap();
    let store = experiment(dir.path());
    let mut data = ExperimentData::load(&store, "latest").unwrap();
    let nasty = "refused, \"politely\"\nthen closed";
    data.runs[0].error = Some(nasty.into());
    let csv = ExportFormat::Csv.exporter().export(&data).unwrap();
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
    let html = String::from_utf8(ExportFormat::Html.exporter().export(&data).unwrap()).unwrap();
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

/// NFS steps through a lab service at two RTTs, as the default plan has them: one series per
/// cache phase named by the phase alone, and no file size × record size surface, since each
/// of its cells would hold the runs of every RTT.
#[test]
fn nfs_steps_draw_a_series_per_phase_and_no_surface() {
    const NFS: &str = r#"
name = "nfs-report"
repetitions = 2

[lab]
name = "rptnfs"
sites = ["client", "server"]
rate = "45mbit"
rtt = "{rtt}"

[matrix]
rtt = ["50ms", "150ms"]

[[service]]
name = "nfs"
site = "server"
dir = "/srv/x"

[[step]]
name = "nfs-read"
type = "io"
service = "nfs"
site = "client"
workload = "seqread"
size = "384k"
bs = "64k"
iodepth = 1
phases = ["cold", "remote-warm"]

[[step]]
name = "nfs-write"
type = "io"
service = "nfs"
site = "client"
workload = "seqwrite"
size = "384k"
bs = "64k"
iodepth = 1
"#;
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    run_plan_into(&mut store, MockExecutor::new(Box::new(value)), NFS);
    let data = ExperimentData::load(&store, "latest").unwrap();
    let html = String::from_utf8(ExportFormat::Html.exporter().export(&data).unwrap()).unwrap();
    for text in [
        "window/RTT cold",
        "window/RTT remote-warm",
        "window/RTT nfs-write",
    ] {
        assert!(html.contains(text), "no {text}");
    }
    assert!(!html.contains("all (cold)") && !html.contains(">all<"));
    assert!(!html.contains("data-chart=\"heatmap\""));
    let bytes = ExportFormat::Xlsx.exporter().export(&data).unwrap();
    let path = dir.path().join("x.xlsx");
    std::fs::write(&path, &bytes).unwrap();
    let wb: Xlsx<_> = open_workbook(&path).unwrap();
    assert!(
        wb.sheet_names().iter().all(|n| !n.starts_with("iozone")),
        "{:?}",
        wb.sheet_names()
    );
}

/// Measures every text of every chart in the browser: the box of each (its glyphs' box
/// through its transform, so rotated labels are exact quadrilaterals), then counts pairs of
/// texts of one chart that overlap by more than a pixel (separating axis test) and texts not
/// wholly inside their chart. Added to the page by the test only.
const LAYOUT_SCRIPT: &str = r#"<script>
window.addEventListener('load',function(){
function quad(t){var b=t.getBBox(),m=t.getScreenCTM();
 return [[b.x,b.y],[b.x+b.width,b.y],[b.x+b.width,b.y+b.height],[b.x,b.y+b.height]].map(function(p){
  return [m.a*p[0]+m.c*p[1]+m.e,m.b*p[0]+m.d*p[1]+m.f];});}
function overlap(a,b){var min=1e9;[a,b].forEach(function(q){for(var i=0;i<4;i++){
 var p=q[i],r=q[(i+1)%4],ax=-(r[1]-p[1]),ay=r[0]-p[0],l=Math.hypot(ax,ay);if(l==0)continue;ax/=l;ay/=l;
 var pa=a.map(function(v){return v[0]*ax+v[1]*ay;}),pb=b.map(function(v){return v[0]*ax+v[1]*ay;});
 var o=Math.min(Math.max.apply(null,pa),Math.max.apply(null,pb))-Math.max(Math.min.apply(null,pa),Math.min.apply(null,pb));
 if(o<min)min=o;}});return min;}
var over=0,cut=0,texts=0,bad=[];
document.querySelectorAll('figure.chart svg').forEach(function(svg,si){
 var box=svg.getBoundingClientRect();var ts=[].slice.call(svg.querySelectorAll('text')).filter(function(t){return t.textContent.trim()!=='';});
 var qs=ts.map(quad);texts+=ts.length;
 qs.forEach(function(q,i){if(q.some(function(p){return p[0]<box.left-0.5||p[0]>box.right+0.5||p[1]<box.top-0.5||p[1]>box.bottom+0.5;})){cut++;bad.push('cut #'+si+': '+ts[i].textContent);}
  for(var j=i+1;j<qs.length;j++){if(overlap(q,qs[j])>1.0){over++;bad.push('overlap #'+si+': '+ts[i].textContent+' / '+ts[j].textContent);}}});});
document.body.setAttribute('data-texts',String(texts));document.body.setAttribute('data-overlaps',String(over));
document.body.setAttribute('data-cut',String(cut));
var pre=document.createElement('pre');pre.id='layout-problems';pre.textContent=bad.slice(0,40).join('\n');document.body.appendChild(pre);});
</script>"#;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).any(|d| d.join(b).is_file()))
                .unwrap_or(false)
        })
}

/// Runs headless Chromium on `url` with `args`, in a new profile under `dir`.
fn run_chromium(browser: &str, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(args)
        .env("HOME", dir)
        .output()
        .expect("run chromium")
}

/// The numbers of `data-NAME="N"` attributes in a dumped DOM.
fn attr(dom: &str, name: &str) -> Vec<u64> {
    dom.match_indices(&format!("{name}=\""))
        .map(|(i, m)| {
            let rest = &dom[i + m.len()..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

/// Opens `page` in headless Chromium with the layout script and returns the dumped DOM after
/// checking that it ran and that every one of its charts drew something.
fn layout_of(browser: &str, dir: &Path, page: &Path) -> String {
    let out = run_chromium(
        browser,
        dir,
        &[
            "--virtual-time-budget=5000",
            "--dump-dom",
            &format!("file://{}", page.display()),
        ],
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains("data-charts=") && dom.contains("data-overlaps="),
        "chromium did not run the page: {}\n{}",
        dom.chars().take(500).collect::<String>(),
        String::from_utf8_lossy(&out.stderr)
    );
    let charts = attr(&dom, "data-charts")[0];
    assert_eq!(
        attr(&dom, "data-charts-drawn"),
        vec![charts],
        "a chart drew nothing"
    );
    let drawn = attr(&dom, "data-drawn");
    assert_eq!(drawn.len() as u64, charts);
    assert!(drawn.iter().all(|&n| n > 0), "{drawn:?}");
    dom
}

/// Asserts that the layout script found no two texts of a chart overlapping and none cut by
/// its chart's edge.
fn assert_clean_layout(dom: &str) {
    let problems = dom
        .split("<pre id=\"layout-problems\">")
        .nth(1)
        .and_then(|p| p.split("</pre>").next())
        .unwrap_or("");
    assert_eq!(
        attr(dom, "data-overlaps"),
        [0],
        "overlapping texts:\n{problems}"
    );
    assert_eq!(
        attr(dom, "data-cut"),
        [0],
        "texts cut by a chart's edge:\n{problems}"
    );
}

/// Writes `html` to `dir/name` with the layout script added.
fn with_layout_script(dir: &Path, name: &str, html: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        html.replace("</body>", &format!("{LAYOUT_SCRIPT}</body>")),
    )
    .unwrap();
    path
}

/// The page of `results compare` for the experiment in `store` and a second run of the same
/// plan (every ratio near 1).
fn compare_page(mut store: Store) -> String {
    run_into(&mut store, MockExecutor::new(Box::new(value)));
    let (ea, eb) = (
        store.experiment("1").unwrap(),
        store.experiment("2").unwrap(),
    );
    let (ra, rb) = (store.runs(1).unwrap(), store.runs(2).unwrap());
    let series = |id| store.series(id).unwrap();
    let (ga, gb) = (
        nsperf_results::stats::group_stats(&ra, &series),
        nsperf_results::stats::group_stats(&rb, &series),
    );
    let rows = nsperf_results::stats::compare_groups((&ra, &ga), (&rb, &gb));
    assert_eq!(rows.len(), 10);
    nsperf_report::compare_html(&ea, &eb, &rows)
}

/// A capture analysis as `nsperf trace --json` writes it, of one NFSv3 connection: 64 WRITEs
/// of 64 KiB, its verdict, and 300 bins of requests in flight.
fn nfs_trace() -> serde_json::Value {
    use nsperf_trace::model::{
        AppProtocol, InFlightSeries, OpSummary, ProtocolDiagnosis, ProtocolLimit, ProtocolStats,
    };
    let mean: Vec<f64> = (0..300)
        .map(|i| 2.0 + 2.0 * (f64::from(i) / 20.0).sin())
        .collect();
    let p = ProtocolStats {
        protocol: AppProtocol::OncRpc,
        nfs_versions: vec![3],
        client: "a".into(),
        ops: vec![OpSummary {
            program: "nfs".into(),
            version: 3,
            procedure: 7,
            op: "WRITE".into(),
            calls: 64,
            replies: 64,
            data_bytes: 64 << 16,
            size_min: Some(65536),
            size_max: Some(65536),
            ..OpSummary::default()
        }],
        in_flight_max: 4,
        in_flight_mean: 2.0,
        in_flight_series: Some(InFlightSeries {
            first_unix_ns: 1_000_000_000,
            bin_s: 512e-6,
            max: mean.iter().map(|m| m.ceil() as u32).collect(),
            mean,
        }),
        diagnosis: Some(ProtocolDiagnosis {
            limit: ProtocolLimit::RequestsInFlight,
            message: "4.0 WRITE in flight on average, 64 KiB each, path RTT 50.1 ms: the requests in flight allowed 41.9 Mbit/s; measured 40.2 Mbit/s (96 % of it): protocol-bound".into(),
            ..ProtocolDiagnosis::default()
        }),
        ..ProtocolStats::default()
    };
    serde_json::json!({"summary": {
        "packets": 3000,
        "first_packet_unix_ns": 900_000_000,
        "connections": [{"id": 1, "a": "10.77.0.1:800", "b": "10.77.0.2:2049",
            "a_to_b": {"unique_bytes": 4_200_000}, "b_to_a": {"unique_bytes": 9000},
            "protocol": serde_json::to_value(p).unwrap()}]}})
}

/// Opens the report in headless Chromium: its check script counts the drawn shapes of every
/// chart, the test's layout script measures every text (issue #14: no two texts of a chart
/// overlap, none is cut by the chart's edge), the same for the page of `results compare`, and
/// a screenshot is saved under target/.
#[test]
fn browser_renders_every_chart_without_overlapping_or_cut_text() {
    let Some(browser) = chromium() else {
        skip::skip("browser test: no chromium on PATH (.ci/run installs the Debian package)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = experiment(dir.path());
    let mut data = ExperimentData::load(&store, "latest").unwrap();
    // One run's capture carried NFS: its protocol table and requests-in-flight chart are
    // laid out with the rest.
    let first = data.runs[0].id;
    data.traces.insert(first, nfs_trace());
    let html = String::from_utf8(ExportFormat::Html.exporter().export(&data).unwrap()).unwrap();
    assert_eq!(html.matches("data-chart=\"requests-in-flight\"").count(), 1);
    let report = dir.path().join("report.html");
    std::fs::write(&report, &html).unwrap();
    let checked = with_layout_script(dir.path(), "checked.html", &html);
    let dom = layout_of(browser, dir.path(), &checked);
    assert!(attr(&dom, "data-charts")[0] >= 6);
    assert!(
        attr(&dom, "data-texts")[0] > 100,
        "the texts were not measured"
    );
    assert_clean_layout(&dom);
    // No template is left unresolved outside the plan's own text.
    let body = html.split("<h2>Plan</h2>").next().unwrap();
    assert!(
        !body.contains("{bdp}"),
        "an unresolved template in the report"
    );

    let cmp = with_layout_script(dir.path(), "compare.html", &compare_page(store));
    let dom = layout_of(browser, dir.path(), &cmp);
    assert_eq!(attr(&dom, "data-charts"), [1], "the compare chart");
    assert_clean_layout(&dom);

    // The layout script finds what it looks for: the report with two texts on one another
    // and one past the chart's left edge.
    let bad = r#"<text x="300" y="200">overlap</text><text x="302" y="201">overlap</text><text x="-40" y="30">cut</text></svg>"#;
    let broken = with_layout_script(dir.path(), "broken.html", &html.replacen("</svg>", bad, 1));
    let dom = layout_of(browser, dir.path(), &broken);
    assert!(
        attr(&dom, "data-overlaps")[0] >= 1,
        "an overlap went unseen"
    );
    assert!(attr(&dom, "data-cut")[0] >= 1, "a cut text went unseen");

    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let url = format!("file://{}", report.display());
    let out = run_chromium(
        browser,
        dir.path(),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,4000",
            &url,
        ],
    );
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
    let html = String::from_utf8(ExportFormat::Html.exporter().export(&data).unwrap()).unwrap();
    assert!(html.contains("<g class=\"outage\">"), "shaded");
    assert!(html.contains("down: 0s down"));
    assert!(html.contains("Link events and findings"));
    assert!(html.contains("data-finding=\"link_outage\""));
    let json: serde_json::Value =
        serde_json::from_slice(&ExportFormat::Json.exporter().export(&data).unwrap()).unwrap();
    let r = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap();
    assert_eq!(r["events"][0]["kind"], "down");
    assert_eq!(r["findings"][0]["id"], "link_outage");
}

/// The `<figure>` of each chart of `kind` in a report.
fn figures<'a>(html: &'a str, kind: &str) -> Vec<&'a str> {
    html.split("<figure")
        .filter(|f| f.contains(&format!("data-chart=\"{kind}\"")))
        .map(|f| f.split("</figure>").next().unwrap_or(f))
        .collect()
}

/// Issue 20 item 5: with RTTs of 0 and 50 ms the window/RTT ceiling exists at one point
/// only, and none was drawn (only the link rate).
#[test]
fn a_window_ceiling_at_one_rtt_is_drawn() {
    const ONE: &str = r#"
name = "one-rtt"
repetitions = 2

[lab]
name = "rptone"
sites = ["client", "server"]
rate = "45mbit"
rtt = "{rtt}"

[matrix]
rtt = ["0ms", "50ms"]

[[step]]
name = "tcp"
type = "net"
client = "client"
server = "server"
window = "128k"
"#;
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    run_plan_into(&mut store, MockExecutor::new(Box::new(value)), ONE);
    let data = ExperimentData::load(&store, "latest").unwrap();
    let html = String::from_utf8(ExportFormat::Html.exporter().export(&data).unwrap()).unwrap();
    let chart = figures(&html, "throughput-vs-parameter");
    assert_eq!(chart.len(), 1);
    assert!(
        chart[0].contains("window/RTT"),
        "no ceiling named: {}",
        chart[0]
    );
    assert!(
        chart[0].contains("class=\"ceiling-point\""),
        "no ceiling drawn: {}",
        chart[0]
    );
}

/// Issue 20 items 7 and 8: the iozone sheets are in the one unit that fits their data, named
/// in the corner cell (docs/report.md said MiB/s where the sheet was in GiB/s), and the
/// latency chart of an iozone report with 18 groups names every group whole (it labelled
/// every other one and cut the first, `workload=seqr…`).
#[test]
fn iozone_sheets_name_their_unit_and_every_latency_group_is_named() {
    const IOZONE: &str = r#"
name = "iozone"
repetitions = 1

[matrix]
workload = ["seqread", "seqwrite"]
file_size = ["8m", "32m", "128m"]
record = ["4k", "64k", "1m"]

[[step]]
name = "io"
type = "io"
workload = "{workload}"
size = "{file_size}"
bs = "{record}"
"#;
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    // Page-cache figures: GiB/s for reads, hundreds of MiB/s for writes.
    let gib = |ctx: &nsperf_plan::exec::RunContext<'_>, _: &nsperf_plan::plan::ResolvedStep| {
        if ctx.cell.contains("seqread") {
            10.7 * 1073741824.0
        } else {
            688.0 * 1048576.0
        }
    };
    run_plan_into(&mut store, MockExecutor::new(Box::new(gib)), IOZONE);
    let data = ExperimentData::load(&store, "latest").unwrap();
    let html = String::from_utf8(ExportFormat::Html.exporter().export(&data).unwrap()).unwrap();
    let lat = figures(&html, "latency");
    assert_eq!(lat.len(), 1);
    assert!(!lat[0].contains('…'), "a label was cut: {}", lat[0]);
    assert_eq!(lat[0].matches(">workload=").count(), 18, "{}", lat[0]);

    let bytes = ExportFormat::Xlsx.exporter().export(&data).unwrap();
    let path = dir.path().join("x.xlsx");
    std::fs::write(&path, &bytes).unwrap();
    let mut wb: Xlsx<_> = open_workbook(&path).unwrap();
    for (sheet, unit, value) in [
        ("iozone seqread", "GiB/s", 10.7),
        ("iozone seqwrite", "MiB/s", 688.0),
    ] {
        let s = wb.worksheet_range(sheet).unwrap();
        let corner = s.get((0, 0)).unwrap().to_string();
        assert!(corner.ends_with(&format!("({unit})")), "{sheet}: {corner}");
        let v = match s.get((1, 1)) {
            Some(calamine::Data::Float(f)) => *f,
            x => panic!("{sheet}: {x:?}"),
        };
        assert!((v - value).abs() < 1e-6, "{sheet}: {v}");
    }
    // docs/report.md says what the code does.
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.md"))
            .unwrap();
    let xlsx = doc
        .lines()
        .find(|l| l.starts_with("| XLSX |"))
        .expect("the XLSX row of docs/report.md");
    assert!(
        !xlsx.contains("throughput in MiB/s") && xlsx.contains("the one unit that fits"),
        "docs/report.md on the iozone sheets: {xlsx}"
    );

    // In a browser: the charts of this report lay out clean.
    if let Some(browser) = chromium() {
        let checked = with_layout_script(dir.path(), "iozone.html", &html);
        assert_clean_layout(&layout_of(browser, dir.path(), &checked));
    } else {
        skip::skip("iozone layout in a browser: no chromium on PATH");
    }
}

/// A run of `n` clients through a 200 Mbit/s star port as the runner stores it (each
/// client's intervals on the run's clock, the aggregate, the figures the charts read).
fn many_clients_run(dir: &Path, n: usize) -> Store {
    use nsperf_results::{HostPart, Measurement, NewExperiment, Phase, RunHeader, RunKey};
    let mut store = Store::open(&dir.join("many.db")).unwrap();
    let id = store
        .create_experiment(&NewExperiment {
            plan_name: "nfs-many-clients",
            description: None,
            fingerprint: "f",
            plan_toml: "",
            total_runs: 1,
            host_json: "{}",
            label: None,
        })
        .unwrap();
    let pts = |start: f64, v: f64| -> Vec<nsperf_results::SeriesPoint> {
        (0..5)
            .map(|i| nsperf_results::SeriesPoint {
                start_s: start + i as f64,
                length_s: 1.0,
                value: v * (1.0 + 0.05 * (i % 2) as f64),
            })
            .collect()
    };
    let rate =
        |i: usize| 0.9e6 * (1.0 + (i % 4) as f64 * 0.1) / (1.0 + (i == n - 1) as u8 as f64 * 3.0);
    let total: f64 = (0..n).map(rate).sum();
    let hosts = (0..n)
        .map(|i| HostPart {
            host: format!("c{}", i + 1),
            role: nsperf_results::HostRole::Client,
            metric: Metric::THROUGHPUT_BYTES_PER_S,
            value: rate(i),
            series: pts(0.001 * i as f64, rate(i)),
            metrics: [
                (Metric::WINDOW_RATE, rate(i)),
                (Metric::SHARE_PCT, rate(i) / total * 100.0),
            ]
            .into(),
            ..Default::default()
        })
        .collect();
    let metrics = [
        (Metric::PEAK_INTERVAL, total * 1.05),
        (Metric::SUSTAINED_MEAN, total),
        (Metric::STEADY_START_S, 1.0),
        (Metric::FAIRNESS_JAIN, 0.95),
        (Metric::PORT_PAYLOAD_CEILING, 191.28e6 / 8.0),
        (Metric::PORT_RATE_BPS, 200e6),
        (Metric::PORT_PAYLOAD_PCT, total / (191.28e6 / 8.0) * 100.0),
        (Metric::COMMON_WINDOW_START_S, 0.02),
        (Metric::COMMON_WINDOW_S, 4.0),
    ];
    let m = Measurement {
        metric: Metric::THROUGHPUT_BYTES_PER_S,
        value: total,
        metrics: metrics.into_iter().collect(),
        series: pts(0.02, total),
        hosts,
        ..Default::default()
    };
    let key = RunKey {
        cell: "-".into(),
        step: "read".into(),
        phase: Phase::None,
        repetition: 1,
    };
    let header = RunHeader {
        key: &key,
        kind: nsperf_results::StepKind::Io,
        params: &[],
        started_unix_ns: 1,
        conditions: None,
    };
    store.write_run(id, &header, Ok(&m)).unwrap();
    store
}

/// Issue 21 item 3: the charts of 20 clients (a line each, the ceiling, the peak and the
/// sustained mean, 20 bars with the slowest named) lay out in a browser with no text on
/// another and none cut.
#[test]
fn twenty_clients_lay_out_without_overlapping_or_cut_text() {
    let Some(browser) = chromium() else {
        skip::skip("browser test: no chromium on PATH (.ci/run installs the Debian package)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = many_clients_run(dir.path(), 20);
    let data = ExperimentData::load(&store, "latest").unwrap();
    let html = String::from_utf8(ExportFormat::Html.exporter().export(&data).unwrap()).unwrap();
    assert_eq!(figures(&html, "clients-over-time").len(), 1, "{html}");
    assert_eq!(figures(&html, "client-shares").len(), 1);
    assert!(figures(&html, "throughput-over-time").is_empty());
    let checked = with_layout_script(dir.path(), "many.html", &html);
    let dom = layout_of(browser, dir.path(), &checked);
    assert!(
        attr(&dom, "data-texts")[0] > 60,
        "the texts were not measured"
    );
    assert_clean_layout(&dom);
}
