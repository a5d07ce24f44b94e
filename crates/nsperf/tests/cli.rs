//! Command-line conventions every subcommand follows: help, version, exit codes, JSON output.

mod common;
use common::*;

#[test]
fn version_and_help() {
    let r = run(&["--version"]).ok();
    assert!(r.stdout.starts_with("nsperf "), "{}", r.stdout);
    let r = run(&["--help"]).ok();
    assert!(r.stdout.contains("host"));
}

#[test]
fn unknown_flag_is_usage_error() {
    let r = run(&["host", "--no-such-flag"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("--no-such-flag"));
}

#[test]
fn bad_value_is_usage_error_one_line() {
    let r = run(&["host", "--sample", "soon"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("invalid duration 'soon'"), "{}", r.stderr);
}

#[test]
fn host_json_has_facts_and_cpu() {
    let r = run(&["host", "--sample", "100ms", "--json"]).ok();
    let j = r.json();
    assert_eq!(j["schema_version"], 1);
    assert!(j["facts"]["cpus"].as_u64().unwrap() >= 1);
    assert!(j["facts"]["tcp"]["rmem_bytes"].as_array().unwrap().len() == 3);
    assert!(!j["cpu"]["per_core"].as_array().unwrap().is_empty());
}

#[test]
fn host_human_output() {
    let r = run(&["host", "--sample", "50ms"]).ok();
    assert!(r.stdout.contains("congestion control"));
    assert!(r.stdout.contains("cpu0"));
}
