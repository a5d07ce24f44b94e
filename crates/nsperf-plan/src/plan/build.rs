//! From the raw plan to the validated [`Plan`]: the lab (checked by the lab's own rules),
//! the matrix, and every cell expanded and resolved.

use nsperf_lab::topology::TopologyKind;
use nsperf_lab::{LinkSetup, Topology};

use super::ctx::{Ctx, check_name, invalid};
use super::raw::{Param, RawLab, RawPlan, used_variables, value_text, variable_kinds};
use super::resolve::resolve_step;
use super::route::CellLinks;
use std::collections::{BTreeMap, BTreeSet};

use super::{
    Action, Cell, Hosts, LabShape, LabSpec, LinkSettings, MAX_RUNS, Plan, Record, ServiceSpec,
    bdp_bytes,
};
use crate::agent::StepClass;
use crate::error::PlanError;

pub(super) fn build(raw: RawPlan, text: &str) -> Result<Plan, PlanError> {
    check_name("plan name", &raw.name)?;
    let repetitions = raw.repetitions.unwrap_or(3);
    if !(1..=1000).contains(&repetitions) {
        return Err(invalid("repetitions must be between 1 and 1000"));
    }
    let lab = raw.lab.as_ref().map(lab_spec).transpose()?;
    let sites = lab.as_ref().map(|l| super::hosts::LabSites {
        sites: l.sites.clone(),
        clients: l.sites
            [l.sites.len() - raw.lab.as_ref().and_then(|r| r.clients).unwrap_or(0) as usize..]
            .to_vec(),
    });
    let mut hosts = super::hosts::hosts(
        &raw.hosts,
        &raw.groups,
        (raw.slurm.as_ref(), raw.kubernetes.as_ref()),
        sites.as_ref(),
    )?;
    let matrix = matrix(&raw.matrix)?;
    if raw.step.is_empty() {
        return Err(invalid("the plan has no [[step]]"));
    }
    let services = super::service::services(&raw.service, lab.as_ref())?;
    for (i, s) in raw.step.iter().enumerate() {
        check_name("step name", &s.name)?;
        if raw.step[..i].iter().any(|o| o.name == s.name) {
            return Err(invalid(format!("step name \"{}\" appears twice", s.name)));
        }
    }
    let ncells = matrix
        .iter()
        .try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()))
        .filter(|&n| n <= MAX_RUNS)
        .ok_or_else(|| invalid(format!("the matrix has more than {MAX_RUNS} cells")))?;
    let mut cells = Vec::with_capacity(ncells);
    for index in 0..ncells {
        let mut rem = index;
        let mut params = vec![(String::new(), String::new()); matrix.len()];
        for (j, (k, vals)) in matrix.iter().enumerate().rev() {
            params[j] = (k.clone(), vals[rem % vals.len()].clone());
            rem /= vals.len();
        }
        let cell = resolve_cell(
            index,
            params,
            &raw,
            (lab.as_ref(), hosts.as_ref()),
            &services,
        )?;
        if !cell.steps.is_empty() {
            cells.push(cell);
        }
    }
    if let Some(h) = hosts.as_mut() {
        super::hosts::settle_allow(h, &host_needs(&cells))?;
    }
    let hosts = super::hosts::settled(hosts);
    super::service::check_used(&services, &raw.step)?;
    let peers = super::service::mirror_peers(&cells, &services, lab.as_ref())?;
    let mut services = services;
    services.extend(peers);
    let plan = Plan {
        name: raw.name,
        description: raw.description,
        repetitions,
        lab,
        hosts,
        services,
        matrix,
        record: Record {
            cpu: raw.record.cpu,
            nic: raw.record.nic,
        },
        cells,
        source: text.to_string(),
    };
    if plan.total_runs() > MAX_RUNS {
        return Err(invalid(format!(
            "the plan expands to {} runs, more than {MAX_RUNS}",
            plan.total_runs()
        )));
    }
    Ok(plan)
}

/// What each host's agent must run: the classes of the steps `on` it (a network step's
/// server host runs a server).
fn host_needs(cells: &[Cell]) -> BTreeMap<String, BTreeSet<StepClass>> {
    let mut needs: BTreeMap<String, BTreeSet<StepClass>> = BTreeMap::new();
    for step in cells.iter().flat_map(|c| &c.steps) {
        let Some(on) = &step.on else { continue };
        let class = match &step.action {
            Action::Net(_) => StepClass::Net,
            Action::Io(_) | Action::Bonnie(_) | Action::Replay(_) => StepClass::Io,
            Action::Exec(_) => StepClass::Exec,
        };
        for h in &on.hosts {
            needs.entry(h.clone()).or_default().insert(class);
        }
        if let Some(s) = &on.server {
            needs
                .entry(s.clone())
                .or_default()
                .insert(StepClass::Server);
        }
    }
    needs
}

/// The lab's name, sites and shape, checked as `nsperf lab up` checks them (the link of
/// each cell is checked with them in [`cell_link`]).
fn lab_spec(l: &RawLab) -> Result<LabSpec, PlanError> {
    let kind = match &l.topology {
        Some(t) => t
            .parse()
            .map_err(|e| invalid(format!("[lab] topology: {e}")))?,
        None => TopologyKind::Mesh,
    };
    let topology = Topology::of_kind(kind, l.server.clone(), l.left.clone())
        .map_err(|e| invalid(format!("[lab]: {e}")))?;
    let memory_bytes = match &l.memory {
        Some(Param::Str(m)) => Some(
            nsperf_core::Bytes::parse(m)
                .map_err(|e| invalid(format!("[lab] memory: \"{m}\": {}", e.reason)))?
                .0,
        ),
        Some(other) => {
            return Err(invalid(format!(
                "[lab] memory: {other} needs a unit, e.g. \"256m\""
            )));
        }
        None => None,
    };
    let mut spec = LabSpec {
        name: l.name.clone(),
        sites: l.sites.clone(),
        shape: LabShape {
            topology,
            memory_bytes,
            seed: l.seed,
        },
    };
    let clients = l.clients.unwrap_or(0) as usize;
    let (sites, CellLinks { layout, .. }) = check_lab(&spec, clients, &LinkSetup::default(), "")?;
    spec.sites = sites;
    spec.shape.topology = layout.topology;
    Ok(spec)
}

/// Checks a lab with one cell's link by the lab's own rules, as `lab up` will: names, site
/// count, MTU, topology (a star's server, a dumbbell's groups, reserved names), memory, and
/// the links and sites the link settings select. Returns every site, the layout and each
/// direction's parameters.
fn check_lab(
    spec: &LabSpec,
    clients: usize,
    link: &LinkSetup,
    cell_desc: &str,
) -> Result<(Vec<String>, CellLinks), PlanError> {
    /// The highest pid Linux hands out (`PID_MAX_LIMIT`).
    const PID_MAX: u32 = 1 << 22;
    // A name made for a run is valid by construction; check the longest one.
    let name = spec
        .name
        .clone()
        .unwrap_or_else(|| spec.name_for_run(PID_MAX, u64::MAX));
    let mut cfg = super::up_config(&name, &spec.sites, &spec.shape, link);
    cfg.clients = clients;
    nsperf_lab::lab::plan(&cfg)
        .map(|(sites, layout, params)| (sites, CellLinks { layout, params }))
        .map_err(|e| invalid(format!("[lab]{cell_desc}: {e}")))
}

fn matrix(raw: &toml::Table) -> Result<Vec<(String, Vec<String>)>, PlanError> {
    let mut matrix = Vec::new();
    for (k, v) in raw {
        check_name("matrix parameter", k)?;
        if k == "bdp" {
            return Err(invalid(
                "matrix parameter \"bdp\" is reserved (it is derived from the lab's rate and rtt)",
            ));
        }
        let arr = v.as_array().ok_or_else(|| {
            invalid(format!(
                "matrix.{k}: expected a list of values, e.g. {k} = [1, 2]"
            ))
        })?;
        if arr.is_empty() {
            return Err(invalid(format!("matrix.{k}: the list is empty")));
        }
        let mut vals = Vec::new();
        for x in arr {
            let s = match x {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => {
                    return Err(invalid(format!(
                        "matrix.{k}: values must be strings, numbers or booleans"
                    )));
                }
            };
            if vals.contains(&s) {
                return Err(invalid(format!("matrix.{k}: value \"{s}\" appears twice")));
            }
            vals.push(s);
        }
        matrix.push((k.clone(), vals));
    }
    Ok(matrix)
}

/// The lab link of one cell: `rate`, `rtt` and the access fields substituted and set by
/// the lab's own per-flag parser, then `link_args` (flags) applied over them; checked with
/// the lab's sites. Beside it, the cell's links as `lab up` sets them.
fn cell_link(
    l: &RawLab,
    spec: &LabSpec,
    base: &Ctx<'_>,
    cell_desc: &str,
) -> Result<(LinkSettings, CellLinks), PlanError> {
    let bad = |e: nsperf_lab::LabError| invalid(format!("[lab]{cell_desc}: {e}"));
    let mut link = LinkSetup::default();
    for (name, p) in l.link_settings() {
        if let Some(p) = p {
            let key = name.replace('-', "_");
            let value = base.sub(&format!("[lab] {key}{cell_desc}"), p)?;
            link.set(name, Some(&value)).map_err(bad)?;
        }
    }
    let mut args: Vec<String> = Vec::new();
    for p in &l.link_args {
        args.push(base.sub(&format!("[lab] link_args{cell_desc}"), p)?);
    }
    link.apply_args(&args).map_err(bad)?;
    let (_, links) = check_lab(spec, 0, &link, cell_desc)?;
    Ok((link, links))
}

fn resolve_cell(
    index: usize,
    params: Vec<(String, String)>,
    raw: &RawPlan,
    (lab, hosts): (Option<&LabSpec>, Option<&Hosts>),
    services: &[ServiceSpec],
) -> Result<Cell, PlanError> {
    let cell_desc = if params.is_empty() {
        String::new()
    } else {
        format!(
            " (cell {})",
            params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let base = Ctx {
        params: &params,
        bdp: None,
        link_rate_bps: None,
        links: None,
        services,
    };
    let (link, links) = match (&raw.lab, lab) {
        (Some(l), Some(spec)) => {
            let (link, links) = cell_link(l, spec, &base, &cell_desc)?;
            (Some(link), Some(links))
        }
        _ => (None, None),
    };
    // {bdp}: rounded up to a KiB, at least 64 KiB (a zero window means nothing).
    let bdp = link
        .as_ref()
        .and_then(bdp_bytes)
        .map(|b| b.div_ceil(1024).max(64) * 1024);
    let ctx = Ctx {
        params: &params,
        bdp,
        link_rate_bps: link.as_ref().and_then(super::link_rate_bps),
        links: links.as_ref(),
        services,
    };
    let mut steps = Vec::new();
    for s in &raw.step {
        let access_only = lab.is_some_and(|l| super::route::crosses_access_only(s, raw, l));
        let used = used_variables(s, raw, access_only);
        let repeats = params.iter().zip(&raw.matrix).any(|((k, v), (_, first))| {
            !used.contains(k)
                && first
                    .as_array()
                    .and_then(|a| a.first())
                    .is_some_and(|f| value_text(f) != *v)
        });
        if !repeats {
            let mut r = resolve_step(s, &ctx, lab, hosts, &cell_desc)?;
            let kinds = variable_kinds(s, raw);
            r.params = params
                .iter()
                .filter(|(k, _)| used.contains(k))
                .map(|(k, v)| (k.clone(), ctx.typed(k, v, kinds.get(k).copied())))
                .collect();
            steps.push(r);
        }
    }
    Ok(Cell {
        index,
        params,
        link,
        steps,
    })
}
