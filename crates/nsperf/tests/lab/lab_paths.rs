//! What nsperf says about the path to a file server in a lab site (issue 20 items 2 and 4):
//! `doctor` knows the server runs on this host and does not call the cold read's source
//! unknown; `io run nfs://…` from another site quotes the lab link's configured rate, not the
//! speed the site's device reports. Root (a lab); skipped with a printed reason otherwise.

use crate::common;
use common::lab::{Lab, lab_name, timing_lock};
use common::scratch::{Scratch, disk_base};
use common::*;

use std::time::Duration;

#[test]
fn a_server_in_a_lab_site_is_known_to_share_the_cache_and_the_link_rate_is_the_labs() {
    let _serial = timing_lock();
    if !require_lab("lab path test") {
        return;
    }
    let lab = lab_name("lp");
    let _g = Lab(lab.clone());
    run(&["lab", "up", &lab, "--sites", "a,b", "--rate", "200mbit"]).ok();
    let dir = Scratch::new(&disk_base(), "lab-path");
    run(&["lab", "serve", &lab, "b", "nfs", dir.path()]).ok();
    let url = format!(
        "nfs://10.77.0.2{}",
        std::fs::canonicalize(&dir.0).unwrap().display()
    );
    let bin = nsperf_bin();

    // Item 4: the rate quoted is the lab's, in the table and in the JSON.
    let io = |json: bool| {
        let mut c = nsperf(["lab", "exec", &lab, "a", "--", bin, "io", "run", &url]);
        c.args(["-w", "seqwrite", "-s", "8m", "-b", "256k"]);
        if json {
            c.arg("--json");
        }
        run_with_limit(c, Duration::from_secs(120)).ok()
    };
    let text = io(false).stdout;
    let target = text
        .lines()
        .find(|l| l.starts_with("target"))
        .unwrap_or_else(|| panic!("no target line: {text}"));
    assert!(
        target.contains("the lab link's configured rate 200 Mbit/s"),
        "{target}"
    );
    assert!(!target.contains("10000 Mbit/s"), "{target}");
    let j = io(true).json();
    let path = &j["spec"]["network_path"];
    assert_eq!(path["server_on_this_host"], true, "{path}");
    assert_eq!(path["ceiling"]["source"], "lab_link", "{path}");
    assert_eq!(path["ceiling"]["rate_bps"], 200e6, "{path}");

    // Item 2: doctor names the server's place, so its cold read is not "unknown".
    let mut c = nsperf(["doctor", &url, "-s", "8m", "-b", "256k", "-t", "2s"]);
    c.args(["--net-time", "1s", "--json"]);
    let j = run_with_limit(c, Duration::from_secs(240)).ok().json();
    assert_eq!(j["spec"]["place"]["site"], "b");
    assert_eq!(j["spec"]["read_cache"], "cold");
    let ids: Vec<&str> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(
        !ids.iter().any(|i| i.ends_with("server_cache_unknown")),
        "doctor knew where the server runs: {ids:?}"
    );
    assert!(dir.leftovers().is_empty(), "{:?}", dir.leftovers());
}
