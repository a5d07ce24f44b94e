//! Processes as /proc shows them, to check what a command leaves behind: a process is named
//! by its pid and start time, so a reused pid is never mistaken for it.

use std::collections::BTreeMap;

/// One process: its pid and its start time (clock ticks after boot, /proc/PID/stat field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Proc {
    pub pid: u32,
    pub start: u64,
}

/// The parent pid and start time of `pid`, `None` when it is gone (or a zombie).
fn stat(pid: u32) -> Option<(u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (starttime).
    if f.first() == Some(&"Z") {
        return None;
    }
    Some((f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

/// `root` and every process below it.
pub fn tree(root: u32) -> Vec<Proc> {
    let mut children: BTreeMap<u32, Vec<Proc>> = BTreeMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some((ppid, start)) = stat(pid) {
            children.entry(ppid).or_default().push(Proc { pid, start });
        }
    }
    let mut out: Vec<Proc> = stat(root)
        .map(|(_, start)| Proc { pid: root, start })
        .into_iter()
        .collect();
    let mut i = 0;
    while i < out.len() {
        out.extend(children.get(&out[i].pid).into_iter().flatten().copied());
        i += 1;
    }
    out
}

/// True while the process runs (not a zombie).
pub fn alive(p: Proc) -> bool {
    stat(p.pid).is_some_and(|(_, start)| start == p.start)
}

/// Its command line, arguments joined by spaces.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// True when the process has `path` open.
pub fn holds(pid: u32, path: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == path))
}
