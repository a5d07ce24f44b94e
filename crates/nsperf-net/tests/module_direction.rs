//! The modules of nsperf-net depend in one direction (issue 13, build 4): no file uses a
//! module that uses it back, directly or through others. Read from the sources: the
//! `crate::…` and `super::…` paths of each file outside its `#[cfg(test)]` module.

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

/// The text of a file without its unit-test module.
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i])
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

#[test]
fn every_module_depends_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    let modules: BTreeMap<Vec<String>, PathBuf> = paths
        .iter()
        .map(|p| (module_of(&src, p), p.clone()))
        .collect();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, path) in &modules {
        let text = std::fs::read_to_string(path).expect("a readable source file");
        let entry = uses.entry(m.join("::")).or_default();
        for named in named_paths(m, without_tests(&text)) {
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
    assert!(
        uses.contains_key("client") && uses["client"].contains("config"),
        "the scan finds the modules' uses: {uses:?}"
    );
    // A module in a cycle reaches itself.
    let mut cycles = Vec::new();
    for start in uses.keys() {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = uses[start].iter().collect();
        while let Some(m) = todo.pop() {
            if m == start {
                cycles.push(format!(
                    "{start} reaches itself through {:?}",
                    uses[start]
                        .iter()
                        .filter(|n| reaches(&uses, n, start))
                        .collect::<Vec<_>>()
                ));
                break;
            }
            if seen.insert(m) {
                todo.extend(uses.get(m).into_iter().flatten());
            }
        }
    }
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
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
