//! io and bonnie steps of plans through the real binary, into a temporary store and out
//! through `results`: each workload's headline in its own unit (issue 20 item 3). No root:
//! the steps run in a temporary directory with the page cache as it is.

use crate::common;
use common::*;

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// Two experiments of one plan, labelled `native` and `replicated`; returns the store's path.
fn two_experiments(dir: &std::path::Path, plan: &str) -> String {
    let plan = write(dir, "p.toml", plan);
    let db = dir.join("r.db").to_string_lossy().into_owned();
    for label in ["native", "replicated"] {
        run(&[
            "run",
            &plan,
            "--db",
            &db,
            "-q",
            "--no-report",
            "--label",
            label,
        ])
        .ok();
    }
    db
}

/// Issue 20 item 3: an io step with `workload = "meta"` stored "0.0 KiB/s" as its headline
/// and `results compare` dropped its row without a word.
#[test]
fn meta_and_seeks_steps_have_their_own_units_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let plan = format!(
        r#"
name = "units"
repetitions = 1

[[step]]
name = "files"
type = "io"
dir = "{d}"
workload = "meta"

[[step]]
name = "seek"
type = "io"
dir = "{d}"
workload = "seeks"
size = "4m"
bs = "8k"

[[step]]
name = "read"
type = "io"
dir = "{d}"
workload = "seqread"
size = "4m"
"#,
        d = data.display()
    );
    let db = two_experiments(dir.path(), &plan);
    let j = run(&["results", "show", "native", "--db", &db, "--json", "--runs"])
        .ok()
        .json();
    let runs = j["runs"].as_array().unwrap();
    let of = |step: &str| runs.iter().find(|r| r["step"] == step).unwrap().clone();
    for (step, metric) in [
        ("files", "files_per_s"),
        ("seek", "seeks_per_s"),
        ("read", "throughput_bytes_per_s"),
    ] {
        let r = of(step);
        assert_eq!(r["metric"], metric, "{r}");
        assert!(r["value"].as_f64().unwrap() > 0.0, "{r}");
    }
    let text = run(&["results", "show", "native", "--db", &db]).ok().stdout;
    assert!(
        text.contains(" files/s") && text.contains(" seeks/s"),
        "{text}"
    );
    let cmp = run(&["results", "compare", "native", "replicated", "--db", &db])
        .ok()
        .stdout;
    for step in ["files", "seek", "read"] {
        assert!(
            cmp.lines().any(|l| l.starts_with(step)),
            "no {step} row: {cmp}"
        );
    }
    assert!(cmp.contains(" files/s"), "{cmp}");
    let j = run(&[
        "results",
        "compare",
        "native",
        "replicated",
        "--db",
        &db,
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(j["comparisons"].as_array().unwrap().len(), 3, "{j}");
}

/// Issue 20 item 16: a `bonnie` step in a plan, and `results compare` of two bonnie runs
/// laid out as bonnie++'s table, side by side, with the ratio per column (the HA-cluster
/// builder's native against replicated).
#[test]
fn bonnie_steps_compare_in_bonnies_layout() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let plan = format!(
        r#"
name = "bonnie"
repetitions = 1

[[step]]
name = "disk"
type = "bonnie"
dir = "{d}"
size = "4m"
bs = "8k"
files = 64
cache = "warm"
"#,
        d = data.display()
    );
    let db = two_experiments(dir.path(), &plan);
    let j = run(&["results", "show", "native", "--db", &db, "--json", "--runs"])
        .ok()
        .json();
    let r = &j["runs"][0];
    assert_eq!(r["kind"], "bonnie", "{r}");
    assert_eq!(r["metric"], "throughput_bytes_per_s", "{r}");
    assert!(r["value"].as_f64().unwrap() > 0.0, "{r}");
    let text = run(&["results", "compare", "native", "replicated", "--db", &db])
        .ok()
        .stdout;
    assert!(text.contains("bonnie step disk"), "{text}");
    for want in [
        "Seq Out Per Chr",
        "Seq Out Block",
        "Seq In Block",
        "Random Seeks",
        "Seq Create Create",
        "Rnd Create Delete",
        "K/sec",
        "%CP",
        "A native",
        "B replicated",
    ] {
        assert!(text.contains(want), "{want:?} not in {text}");
    }
    let ratios = text
        .lines()
        .filter(|l| l.starts_with("B/A ") && !l.starts_with("B/A:"))
        .collect::<Vec<_>>();
    assert_eq!(ratios.len(), 2, "a ratio line per table: {text}");
    let j = run(&[
        "results",
        "compare",
        "native",
        "replicated",
        "--db",
        &db,
        "--json",
    ])
    .ok()
    .json();
    let cols = j["bonnie"][0]["columns"].as_array().unwrap();
    assert_eq!(cols.len(), 5 * 2 + 2 + 8, "{j}");
    for c in cols {
        let (a, b, ratio) = (c["a"].as_f64(), c["b"].as_f64(), c["ratio"].as_f64());
        if let (Some(a), Some(b), Some(x)) = (a, b, ratio) {
            assert!((x - b / a).abs() < 1e-9 * x.max(1.0), "{c}");
        }
    }
}
