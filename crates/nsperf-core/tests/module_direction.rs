//! The modules of every crate of the workspace depend in one direction (issue 13 for
//! nsperf-net, issue 24 for all): no file uses a module that uses it back, directly or through
//! others. Read from the sources: the `crate::…` and `super::…` paths of each file outside its
//! `#[cfg(test)]` module. A crate's modules may use the crate root's items (`crate::Error`
//! from `lib.rs`); the root declares its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("the source folder") {
        let p = e.expect("a folder entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file (`iperf3/mod.rs` → `["iperf3"]`, `lib.rs` → `[]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a file: without its unit-test module and without its comment lines (a doc
/// link to another module is a reference for the reader, not a dependency).
fn code_of(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i]);
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths a file names: `crate::a::b::C` and `super::x`, with `{…}` groups of a
/// `use` opened one level.
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("::") {
        let start = text[..i]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |j| j + 1);
        let root = &text[start..i];
        if !(root == "crate" || root == "super") || text[..start].ends_with("::") {
            continue;
        }
        let mut base: Vec<String> = if root == "crate" {
            Vec::new()
        } else {
            module[..module.len().saturating_sub(1)].to_vec()
        };
        let rest = &text[i + 2..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            for item in body.split(',') {
                let first = item.trim().split("::").next().unwrap_or("").to_string();
                let mut p = base.clone();
                p.push(first);
                out.push(p);
            }
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        base.extend(
            rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        out.push(base);
    }
    out
}

/// Which module of the crate at `src` uses which (module paths joined by `::`).
fn uses_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut paths = Vec::new();
    files(src, &mut paths);
    let modules: BTreeMap<Vec<String>, PathBuf> = paths
        .iter()
        .map(|p| (module_of(src, p), p.clone()))
        .collect();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, path) in &modules {
        let text = std::fs::read_to_string(path).expect("a readable source file");
        let entry = uses.entry(m.join("::")).or_default();
        for named in named_paths(m, &code_of(&text)) {
            // The longest prefix that is a file of its own.
            let Some(target) = (1..=named.len())
                .rev()
                .map(|k| &named[..k])
                .find(|k| modules.contains_key(*k))
            else {
                continue;
            };
            // A parent declares its children; a child may use its parent's items.
            if target != m.as_slice() && !m.starts_with(target) {
                entry.insert(target.join("::"));
            }
        }
    }
    uses
}

/// The modules of `uses` that reach themselves, each with the uses that lead back.
fn cycles(uses: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for start in uses.keys() {
        if reaches_through(uses, start) {
            out.push(format!(
                "{start} reaches itself through {:?}",
                uses[start]
                    .iter()
                    .filter(|n| reaches(uses, n, start))
                    .collect::<Vec<_>>()
            ));
        }
    }
    out
}

/// Whether `start` reaches itself through one use or more.
fn reaches_through(uses: &BTreeMap<String, BTreeSet<String>>, start: &str) -> bool {
    uses[start].iter().any(|n| reaches(uses, n, start))
}

/// The `src` folders of the workspace's crates.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf();
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&crates)
        .expect("the crates folder")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.join("Cargo.toml").is_file() && p.join("src").is_dir())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, p.join("src"))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_module_of_every_crate_depends_one_way() {
    let crates = crate_sources();
    assert!(
        crates.len() >= 12 && crates.iter().any(|(n, _)| n == "nsperf-io"),
        "the scan finds the workspace's crates: {crates:?}"
    );
    let net = uses_of(&crates.iter().find(|(n, _)| n == "nsperf-net").unwrap().1);
    assert!(
        net.contains_key("client") && net["client"].contains("config"),
        "the scan finds the modules' uses: {net:?}"
    );
    let mut found = Vec::new();
    for (name, src) in &crates {
        found.extend(
            cycles(&uses_of(src))
                .into_iter()
                .map(|c| format!("{name}: {c}")),
        );
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_scan_finds_a_cycle() {
    let dir = std::env::temp_dir().join(format!("nsperf-direction-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use super::{a::A, lib};\npub struct B;\n").unwrap();
    let uses = uses_of(&dir);
    let found = cycles(&uses);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 2, "{uses:?}");
    assert!(
        found[0].starts_with("a reaches itself through"),
        "{found:?}"
    );
}

/// Whether `from` reaches `to` through `uses`.
fn reaches(uses: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(m) = todo.pop() {
        if m == to {
            return true;
        }
        if seen.insert(m.clone()) {
            todo.extend(uses.get(&m).into_iter().flatten().cloned());
        }
    }
    false
}
