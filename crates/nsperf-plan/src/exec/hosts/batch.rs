//! The batch groups of `[hosts]` (`[slurm]`, `[kubernetes]`): their agents started as one
//! srun step in the allocation or one Indexed Job, and what keeps them running.

use std::path::Path;

use super::CONNECT_WAIT;
use crate::agent::HostFailure;
use crate::plan::Hosts;

/// What keeps a batch group's agents running (dropped after the fleet closed).
pub(super) enum BatchGuard {
    Slurm(crate::agent::SrunStep),
    Kubernetes(crate::agent::K8sDeployment),
}

/// Starts a batch group's agents (srun in the allocation, or an Indexed Job) and returns
/// their links named as the plan names them (`GROUP-I`).
pub(super) fn start_batch(
    g: &crate::plan::BatchGroup,
    hosts: &Hosts,
    exe: &Path,
) -> Result<(Vec<crate::agent::AgentLink>, BatchGuard), HostFailure> {
    use crate::plan::BatchGroup;
    // What the group's agents run: what the plan's steps need of any of them.
    let mut allow: Vec<crate::agent::StepClass> = hosts
        .hosts
        .iter()
        .filter(|h| matches!(&h.launch, crate::agent::Launch::Batch { group, .. } if group == g.group()))
        .flat_map(|h| h.allow.iter().copied())
        .collect();
    allow.sort();
    allow.dedup();
    match g {
        BatchGroup::Slurm {
            group,
            tasks,
            psk_file,
            port,
        } => {
            let mut a = crate::agent::SlurmAgents::new(psk_file.clone(), exe.to_path_buf());
            a.tasks = std::num::NonZeroU32::new(*tasks);
            a.port = *port;
            a.allow = allow;
            let (mut links, srun) = crate::agent::slurm_links(&a)?;
            for (i, l) in links.iter_mut().enumerate() {
                l.name = format!("{group}-{i}");
            }
            Ok((links, BatchGuard::Slurm(srun)))
        }
        BatchGroup::Kubernetes {
            group,
            count,
            image,
            namespace,
            context,
            psk_file,
            nsperf,
        } => {
            let unreachable = |reason: String| HostFailure::Unreachable {
                host: group.clone(),
                reason,
            };
            let n =
                std::num::NonZeroU32::new(*count).ok_or_else(|| unreachable("no pods".into()))?;
            let mut a = crate::agent::K8sAgents::new(group, n, image);
            a.namespace = namespace.clone();
            a.allow = allow;
            if let Some(p) = nsperf {
                a.nsperf = p.clone();
            }
            let psk =
                nsperf_net::read_key_file(psk_file).map_err(|e| unreachable(e.to_string()))?;
            let kubectl = crate::agent::Kubectl {
                context: context.clone(),
                ..crate::agent::Kubectl::default()
            };
            let (links, d) = crate::agent::k8s_links(&a, &kubectl, &psk, CONNECT_WAIT)?;
            Ok((links, BatchGuard::Kubernetes(d)))
        }
    }
}
