//! The example plan `examples/replication.toml` run as root (issue 26): the HA pair's native
//! against mirrored comparison and the two-site mirrored writes across a T3, trimmed to one
//! repetition, 0/50/100 ms and smaller files so it runs in well under a minute. Every cell is
//! stored, protocol C's rate falls as the RTT grows and stays under its ceiling, the stored
//! ratios are those of the stored figures, the report has the Replication table, and the
//! peers leave nothing behind. Then a mirror whose link a step's `load` shares: what the two
//! moved together stays within the link, and the finding counts both.

use crate::common;
use common::lab::timing_lock;
use common::*;

use std::path::Path;
use std::time::Duration;

/// The example with `edits` (each `from` must be in it: the test follows the example).
fn trimmed(dir: &Path, edits: &[(&str, &str)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/replication.toml");
    let mut text = std::fs::read_to_string(path).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "the example no longer has {from:?}");
        text = text.replace(from, to);
    }
    let p = dir.join("replication.toml");
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

fn metric(r: &serde_json::Value, name: &str) -> f64 {
    r["metrics"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {r}"))
}

#[test]
fn the_replication_example_stores_every_cell_and_c_falls_with_rtt() {
    if !require_lab("replication example plan") {
        return;
    }
    let _serial = timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let data_dir = format!("dir = \"{}\"", data.display());
    let plan = trimmed(
        tmp.path(),
        &[
            ("repetitions = 3", "repetitions = 1"),
            (
                "rtt = [\"0ms\", \"50ms\", \"100ms\", \"150ms\"]",
                "rtt = [\"0ms\", \"50ms\", \"100ms\"]",
            ),
            ("dir = \"/var/tmp\"", &data_dir),
            ("size = \"32m\"", "size = \"4m\""),
            ("size = \"8m\"", "size = \"2m\""),
        ],
    );
    // The shared-WAN step is the last: cut (its own test below runs a load).
    let text = std::fs::read_to_string(&plan).unwrap();
    let cut = text
        .find("# The two sites, the WAN shared")
        .expect("the example's last step is the shared one");
    std::fs::write(&plan, &text[..cut]).unwrap();
    let db = tmp.path().join("r.db");
    let db = db.to_str().unwrap();
    run_with_limit(
        nsperf(["run", &plan, "--db", db, "--no-report"]),
        Duration::from_secs(240),
    )
    .ok();
    let j = run(&["results", "show", "1", "--db", db, "--json", "--runs"])
        .ok()
        .json();
    let runs = j["runs"].as_array().unwrap();
    let cell = |r: &serde_json::Value| r["cell"].as_str().unwrap().to_string();
    let mut cells: Vec<(String, String)> = runs
        .iter()
        .map(|r| (r["step"].as_str().unwrap().to_string(), cell(r)))
        .collect();
    cells.sort();
    let mut want: Vec<(String, String)> = Vec::new();
    // The HA pair crosses only the access links: once, not once per WAN RTT.
    want.push(("ha-pair".into(), "rtt=0ms,protocol=A".into()));
    for rtt in ["0ms", "50ms", "100ms"] {
        for p in ["A", "C"] {
            want.push(("two-site".into(), format!("rtt={rtt},protocol={p}")));
        }
    }
    want.sort();
    assert_eq!(cells, want, "every cell, once");
    for r in runs {
        assert_eq!(r["status"], "ok", "{r}");
        // The ratio the report shows is the stored figures' own.
        let mirrored = metric(r, "throughput_bytes_per_s");
        let native = metric(r, "replication.native.throughput_bytes_per_s");
        assert!(mirrored > 0.0 && native > 0.0, "{r}");
        let lat = metric(r, "lat_mean_ns") / metric(r, "replication.native.lat_mean_ns");
        assert!(
            lat > 1.0,
            "a mirrored write takes longer than a native one: {r}"
        );
        assert_eq!(metric(r, "replication.bytes"), metric(r, "bytes"));
    }
    // Protocol C across the T3: one 64 KiB write per round trip, plus its transfer (11.65 ms
    // at 45 Mbit/s) and the peer's write: the rate falls as the RTT grows and stays under
    // bs / (RTT + transfer).
    let c: Vec<(f64, f64, f64)> = ["0ms", "50ms", "100ms"]
        .iter()
        .map(|rtt| {
            let r = runs
                .iter()
                .find(|r| r["step"] == "two-site" && cell(r) == format!("rtt={rtt},protocol=C"))
                .unwrap();
            let rtt_s = metric(r, "replication.rtt_us") / 1e6;
            let w_s = metric(r, "replication.peer_write_mean_ns") / 1e9;
            let ceiling = 65536.0 / (rtt_s + 65536.0 * 8.0 / 45e6 + w_s);
            (metric(r, "throughput_bytes_per_s"), ceiling, rtt_s)
        })
        .collect();
    eprintln!("protocol C (rate, ceiling, measured rtt): {c:?}");
    assert!(
        c[0].0 > c[1].0 && c[1].0 > c[2].0,
        "C falls with RTT: {c:?}"
    );
    for (rate, ceiling, _) in &c[1..] {
        assert!(*rate <= ceiling * 1.1, "{rate} above {ceiling}");
        assert!(*rate >= ceiling * 0.5, "{rate} far below {ceiling}");
    }
    for (i, want_s) in [(1, 0.05), (2, 0.1)] {
        let rtt_s = c[i].2;
        assert!(rtt_s >= want_s * 0.98 && rtt_s < want_s + 0.03, "{c:?}");
    }
    // The report: native and mirrored side by side for each of the 7 groups.
    let html = tmp.path().join("r.html");
    run(&["report", "1", "--db", db, "-o", html.to_str().unwrap()]).ok();
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<h2>Replication: native against mirrored</h2>"));
    assert_eq!(html.matches("<tr class=\"ratio\">").count(), 7);
    // Under each group the copies' check and the finding that named the limit.
    assert_eq!(
        html.matches("copies equal to their originals (1 of 1 runs checked); last run: mirror_")
            .count(),
        7,
        "{html}"
    );
    assert_eq!(html.matches("mirrored, protocol C").count(), 4);
    // Each group's throughput ratio is its stored mirrored / native (one run per group).
    for r in runs {
        let want = metric(r, "throughput_bytes_per_s")
            / metric(r, "replication.native.throughput_bytes_per_s");
        let digits = (2 - want.log10().floor() as i32).clamp(0, 6) as usize;
        let cell = format!(
            "<tr class=\"ratio\"><td class=\"t\">mirrored / native</td><td>{want:.digits$}</td>"
        );
        assert!(html.contains(&cell), "{cell} not in the report");
    }
    // The peers removed their directories, the runs their files.
    let left: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A mirror (protocol B, 8 writes in flight) through 50 Mbit/s at 10 ms, alone and with two
/// Cubic streams on its link (`load`): alone it fills the link; with the load, the load's
/// figures over the step's own window and the mirror's add up to no more than the link, the
/// mirror has a fraction of what it had alone, and the finding names the full link with both
/// shares.
#[test]
fn a_load_on_the_mirrors_link_is_counted_beside_it() {
    if !require_lab("a load on a mirror's link") {
        return;
    }
    let _serial = timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let step = |name: &str, load: &str| {
        format!(
            "[[step]]\nname = \"{name}\"\ntype = \"io\"\nsite = \"a\"\ndir = \"{}\"\nworkload = \"seqwrite\"\nsize = \"2m\"\nbs = \"64k\"\niodepth = 8\nreplicate = {{ peer = \"b\", protocol = \"B\", congestion = \"cubic\", check = true }}\n{load}\n",
            data.display()
        )
    };
    let text = format!(
        "name = \"load\"\n[lab]\nsites = [\"a\", \"b\"]\nrate = \"50mbit\"\nrtt = \"10ms\"\n{}{}",
        step("alone", ""),
        step(
            "shared",
            "load = { from = \"a\", to = \"b\", streams = 2, cc = \"cubic\" }"
        )
    );
    let plan = tmp.path().join("load.toml");
    std::fs::write(&plan, text).unwrap();
    let db = tmp.path().join("r.db");
    let db = db.to_str().unwrap();
    run_with_limit(
        nsperf(["run", plan.to_str().unwrap(), "--db", db, "--no-report"]),
        Duration::from_secs(120),
    )
    .ok();
    let j = run(&["results", "show", "1", "--db", db, "--json", "--runs"])
        .ok()
        .json();
    let runs = j["runs"].as_array().unwrap();
    let by = |name: &str| runs.iter().find(|r| r["step"] == name).unwrap();
    let (alone, shared) = (by("alone"), by("shared"));
    for r in [alone, shared] {
        assert_eq!(r["status"], "ok", "{r}");
    }
    let link = 50e6;
    let alone_bps = metric(alone, "throughput_bytes_per_s") * 8.0;
    let mirror_bps = metric(shared, "throughput_bytes_per_s") * 8.0;
    let load_bps = metric(shared, "load.throughput_bps");
    let share = metric(shared, "load.link_share_pct");
    eprintln!(
        "mirror alone {alone_bps:.0} bit/s; with the load: mirror {mirror_bps:.0}, load {load_bps:.0}, {share:.1} % of the link"
    );
    assert!(
        alone_bps >= 0.7 * link,
        "alone, the mirror fills the link: {alone_bps}"
    );
    assert!(
        alone
            .get("metrics")
            .is_some_and(|m| m.get("load.throughput_bps").is_none()),
        "no load figures without a load: {alone}"
    );
    // Both over the step's own window: never more than the link carries.
    assert!(
        mirror_bps + load_bps <= 1.05 * link,
        "mirror {mirror_bps} + load {load_bps} above the {link} link"
    );
    assert!((share - (mirror_bps + load_bps) / link * 100.0).abs() < 0.01);
    assert!(
        mirror_bps < 0.5 * alone_bps,
        "the load takes most of the link: {mirror_bps} against {alone_bps} alone"
    );
    let finding = shared["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"].as_str().is_some_and(|i| i.starts_with("load_")))
        .unwrap_or_else(|| panic!("no load finding: {shared}"));
    let id = if share >= 85.0 {
        "load_link_full"
    } else {
        "load_link_room"
    };
    assert_eq!(finding["id"], id, "{finding}");
    let message = finding["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{share:.0} % of the link")) && message.contains("link a-b"),
        "{message}"
    );
    // The report lists it with the run.
    let html = tmp.path().join("r.html");
    run(&["report", "1", "--db", db, "-o", html.to_str().unwrap()]).ok();
    let html = std::fs::read_to_string(html).unwrap();
    assert!(
        html.contains(&format!("data-finding=\"{id}\"")),
        "no finding in the report"
    );
}
