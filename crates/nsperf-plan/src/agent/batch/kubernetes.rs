//! Kubernetes: one agent per pod of an Indexed Job, found by DNS through a headless Service.
//!
//! The manifests ([`K8sAgents::manifests`], a `v1` `List` in JSON, which `kubectl apply -f -`
//! takes): a headless Service named like the Job (`clusterIP: None`, selecting the Job's pods
//! by their labels), the Indexed Job itself (`completions` = `parallelism` = N, each pod's
//! `subdomain` the Service, so pod `NAME-INDEX` is `NAME-INDEX.NAME.NAMESPACE.svc`), and,
//! when the key is given, the Secret the agents read it from. Each pod runs `nsperf agent
//! --listen 0.0.0.0:PORT --psk-file /etc/nsperf/psk`; a TCP startup probe on the port makes a
//! pod ready once its agent listens (and then stops probing). The agents never end by themselves: the coordinator
//! deletes what it applied when the plan is done ([`K8sDeployment`]), and the Job's
//! `activeDeadlineSeconds` ends a forgotten one.

use std::io::Write;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::fleet::{AgentLink, HostFailure};
use crate::agent::launch::{AgentOptions, Launch, open};
use crate::agent::proto::StepClass;

/// Where the pods find the key.
pub const K8S_PSK_PATH: &str = "/etc/nsperf/psk";
/// The agents' port unless told otherwise.
pub const K8S_AGENT_PORT: u16 = 5400;

/// A setting the manifests cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kubernetes: {field} {value:?} is not {expected}")]
pub struct K8sError {
    /// Which setting.
    pub field: &'static str,
    /// Its value (the first 80 characters).
    pub value: String,
    /// What it should be.
    pub expected: &'static str,
}

/// N agents as an Indexed Job with its headless Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K8sAgents {
    /// The Job's and the Service's name (a DNS label).
    pub name: String,
    /// Their namespace.
    pub namespace: String,
    /// Pods, so agents.
    pub count: NonZeroU32,
    /// The container image, holding nsperf.
    pub image: String,
    /// The nsperf binary in the image (a name on its `PATH`, or a path).
    pub nsperf: String,
    /// The port every agent listens on.
    pub port: u16,
    /// Step classes the agents run.
    pub allow: Vec<StepClass>,
    /// Seconds after which Kubernetes ends the Job whatever happens (a forgotten Job does not
    /// hold its nodes forever).
    pub deadline_s: u64,
}

/// DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric.
fn dns_label(field: &'static str, v: &str, max: usize, letter_first: bool) -> Result<(), K8sError> {
    let b = v.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= max
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && (if letter_first {
            b[0].is_ascii_lowercase()
        } else {
            b[0] != b'-'
        })
        && b[b.len() - 1] != b'-';
    ok.then_some(()).ok_or_else(|| K8sError {
        field,
        value: v.chars().take(80).collect(),
        expected: if letter_first {
            "a DNS label that starts with a letter (a-z, 0-9, '-')"
        } else {
            "a DNS label (a-z, 0-9, '-')"
        },
    })
}

/// Standard base64 (RFC 4648 §4), as a Secret's `data` holds bytes.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl K8sAgents {
    /// `count` agents named `name` in namespace `default`, on port [`K8S_AGENT_PORT`],
    /// running the default step classes, ended by Kubernetes after a day at most.
    pub fn new(name: &str, count: NonZeroU32, image: &str) -> Self {
        K8sAgents {
            name: name.into(),
            namespace: "default".into(),
            count,
            image: image.into(),
            nsperf: "nsperf".into(),
            port: K8S_AGENT_PORT,
            allow: StepClass::DEFAULT.to_vec(),
            deadline_s: 86_400,
        }
    }

    /// Checks every value (names are DNS labels, and pod `NAME-INDEX` must be one too).
    pub fn validate(&self) -> Result<(), K8sError> {
        let index_digits = (self.count.get() - 1).to_string().len();
        dns_label("name", &self.name, 62 - index_digits, true)?;
        dns_label("namespace", &self.namespace, 63, false)?;
        let bad = |field, value: &str, expected| K8sError {
            field,
            value: value.chars().take(80).collect(),
            expected,
        };
        if self.image.is_empty()
            || self
                .image
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad("image", &self.image, "an image reference"));
        }
        if self.nsperf.is_empty() || self.nsperf.chars().any(char::is_control) {
            return Err(bad("nsperf", &self.nsperf, "a binary's name or path"));
        }
        if self.port == 0 {
            return Err(bad("port", "0", "a port from 1 to 65535"));
        }
        if self.deadline_s == 0 {
            return Err(bad("deadline", "0", "a number of seconds above 0"));
        }
        Ok(())
    }

    /// The Secret holding the key.
    pub fn secret_name(&self) -> String {
        format!("{}-psk", self.name)
    }

    /// The labels of the pods (and what the Service selects).
    pub fn labels(&self) -> Value {
        json!({
            "app.kubernetes.io/name": "nsperf-agent",
            "app.kubernetes.io/instance": self.name,
        })
    }

    /// The agents' control addresses, `NAME-INDEX.NAME.NAMESPACE.svc:PORT`, in index order
    /// (resolved by the cluster's DNS: the coordinator runs in the cluster, or where its DNS
    /// answers).
    pub fn agent_addrs(&self) -> Vec<String> {
        (0..self.count.get())
            .map(|i| {
                format!(
                    "{n}-{i}.{n}.{ns}.svc:{p}",
                    n = self.name,
                    ns = self.namespace,
                    p = self.port
                )
            })
            .collect()
    }

    fn command(&self) -> Vec<String> {
        let mut v = vec![
            self.nsperf.clone(),
            "agent".into(),
            "--listen".into(),
            format!("0.0.0.0:{}", self.port),
            "--psk-file".into(),
            K8S_PSK_PATH.into(),
        ];
        if !self.allow.is_empty() {
            v.push("--allow".into());
            v.push(
                self.allow
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        v
    }

    fn metadata(&self, name: &str) -> Value {
        json!({ "name": name, "namespace": self.namespace, "labels": self.labels() })
    }

    /// The headless Service the pods' DNS names hang on.
    pub fn service(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.metadata(&self.name),
            "spec": {
                "clusterIP": "None",
                "selector": self.labels(),
                "ports": [{ "name": "control", "port": self.port, "targetPort": self.port, "protocol": "TCP" }],
            },
        })
    }

    /// The Indexed Job: one agent per pod.
    pub fn job(&self) -> Value {
        let n = self.count.get();
        let pod = json!({
            "subdomain": self.name,
            "restartPolicy": "Never",
            "containers": [{
                "name": "agent",
                "image": self.image,
                "command": self.command(),
                "ports": [{ "name": "control", "containerPort": self.port, "protocol": "TCP" }],
                // Ready once the agent listens; a startup probe stops probing then (a readiness
                // probe would open a session every period for the pod's life).
                "startupProbe": {
                    "tcpSocket": { "port": self.port },
                    "periodSeconds": 1,
                    "failureThreshold": 300,
                },
                "volumeMounts": [{ "name": "psk", "mountPath": "/etc/nsperf", "readOnly": true }],
            }],
            "volumes": [{
                "name": "psk",
                "secret": {
                    "secretName": self.secret_name(),
                    "defaultMode": 0o400,
                    "items": [{ "key": "psk", "path": "psk" }],
                },
            }],
            // One agent per node where the cluster allows it: clients on one node share its NIC.
            "affinity": { "podAntiAffinity": { "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": { "matchLabels": self.labels() },
                    "topologyKey": "kubernetes.io/hostname",
                },
            }]}},
        });
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.metadata(&self.name),
            "spec": {
                "completionMode": "Indexed",
                "completions": n,
                "parallelism": n,
                "backoffLimit": 0,
                "activeDeadlineSeconds": self.deadline_s,
                "ttlSecondsAfterFinished": 600,
                "template": { "metadata": { "labels": self.labels() }, "spec": pod },
            },
        })
    }

    /// The Secret with the key (its bytes as they are in the key file).
    pub fn secret(&self, psk: &[u8]) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": self.metadata(&self.secret_name()),
            "type": "Opaque",
            "data": { "psk": base64(psk) },
        })
    }

    /// Everything to apply: the Secret (when the key is given), the Service and the Job, as
    /// one `v1` `List`.
    pub fn manifests(&self, psk: Option<&[u8]>) -> Value {
        let mut items = Vec::new();
        if let Some(k) = psk {
            items.push(self.secret(k));
        }
        items.push(self.service());
        items.push(self.job());
        json!({ "apiVersion": "v1", "kind": "List", "items": items })
    }
}

/// How to run kubectl: the program and the kubeconfig context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubectl {
    /// The program (`kubectl`).
    pub program: PathBuf,
    /// `--context`, when not the current one.
    pub context: Option<String>,
}

impl Default for Kubectl {
    fn default() -> Self {
        Kubectl {
            program: "kubectl".into(),
            context: None,
        }
    }
}

fn k8s_failure(host: &str, reason: String) -> HostFailure {
    HostFailure::Unreachable {
        host: host.to_string(),
        reason,
    }
}

impl Kubectl {
    /// `kubectl [--context C] ARGS`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.program);
        if let Some(ctx) = &self.context {
            c.arg("--context").arg(ctx);
        }
        c.args(args);
        c
    }

    /// Runs kubectl with `input` on its standard input; its last error line on failure.
    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<String, String> {
        let mut c = self.command(args);
        c.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
            // kubectl reads all of it before it answers; a write error shows in its status.
            let _ = stdin.write_all(data);
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("kubectl: {e}"))?;
        crate::agent::stdout_or_last_error(out, &format!("kubectl {}", args.first().unwrap_or(&"")))
    }

    /// `kubectl apply -f -` of `manifests`.
    pub fn apply(&self, manifests: &Value) -> Result<(), HostFailure> {
        self.run(
            &["apply", "--request-timeout=60s", "-f", "-"],
            Some(manifests.to_string().as_bytes()),
        )
        .map(drop)
        .map_err(|e| k8s_failure("kubernetes", e))
    }

    /// Waits until every pod of the Job is ready (its agent listens), at most `timeout`.
    pub fn wait_ready(&self, agents: &K8sAgents, timeout: Duration) -> Result<(), HostFailure> {
        let job = format!("job/{}", agents.name);
        let cond = format!("--for=jsonpath={{.status.ready}}={}", agents.count);
        let limit = format!("--timeout={}s", timeout.as_secs().max(1));
        self.run(
            &[
                "wait",
                "--namespace",
                &agents.namespace,
                &job,
                &cond,
                &limit,
            ],
            None,
        )
        .map(drop)
        .map_err(|e| HostFailure::Timeout {
            host: agents.name.clone(),
            seconds: timeout.as_secs_f64(),
            waiting_for: format!("{} pods to be ready: {e}", agents.count),
        })
    }

    /// `kubectl delete -f -` of `manifests` (what is already gone is not an error; the Job's
    /// pods go with it).
    pub fn delete(&self, manifests: &Value) -> Result<(), HostFailure> {
        self.run(
            &[
                "delete",
                "--request-timeout=60s",
                "--ignore-not-found",
                "--wait=false",
                "-f",
                "-",
            ],
            Some(manifests.to_string().as_bytes()),
        )
        .map(drop)
        .map_err(|e| k8s_failure("kubernetes", e))
    }
}

/// What was applied for the agents; dropping it deletes it.
#[derive(Debug)]
pub struct K8sDeployment {
    kubectl: Kubectl,
    manifests: Value,
    deleted: bool,
}

impl K8sDeployment {
    /// Deletes the Job, its pods, the Service and the Secret.
    pub fn delete(&mut self) -> Result<(), HostFailure> {
        if self.deleted {
            return Ok(());
        }
        self.deleted = true;
        self.kubectl.delete(&self.manifests)
    }
}

impl Drop for K8sDeployment {
    fn drop(&mut self) {
        if let Err(e) = self.delete() {
            eprintln!("nsperf: {e}");
        }
    }
}

/// Applies the agents (with a Secret holding `psk`), waits until every pod is ready (at most
/// `timeout`), and connects to each by its DNS name: the links (named `NAME-INDEX`, in index
/// order) and what to delete when the plan is done (dropping it deletes it; so does a failure
/// here).
pub fn k8s_links(
    agents: &K8sAgents,
    kubectl: &Kubectl,
    psk: &[u8],
    timeout: Duration,
) -> Result<(Vec<AgentLink>, K8sDeployment), HostFailure> {
    agents
        .validate()
        .map_err(|e| k8s_failure(&agents.name, e.to_string()))?;
    let manifests = agents.manifests(Some(psk));
    kubectl.apply(&manifests)?;
    let deployment = K8sDeployment {
        kubectl: kubectl.clone(),
        manifests,
        deleted: false,
    };
    kubectl.wait_ready(agents, timeout)?;
    let opts = AgentOptions {
        allow: agents.allow.clone(),
    };
    let mut links = Vec::with_capacity(agents.count.get() as usize);
    for (i, addr) in agents.agent_addrs().into_iter().enumerate() {
        let name = format!("{}-{i}", agents.name);
        links.push(open(
            &name,
            &Launch::Tcp { addr },
            &opts,
            Some(psk.to_vec()),
            std::path::Path::new(&agents.nsperf),
        )?);
    }
    Ok((links, deployment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_rfc_4648() {
        // RFC 4648 §10 test vectors.
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), enc);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn names_must_make_dns_labels() {
        let n = |c| NonZeroU32::new(c).unwrap();
        let ok = K8sAgents::new("clients", n(8), "registry.example/nsperf:0.1");
        ok.validate().unwrap();
        for (name, count, field) in [
            ("Clients", 1, "name"),
            ("9clients", 1, "name"),
            ("clients-", 1, "name"),
            ("", 1, "name"),
            ("a.b", 1, "name"),
        ] {
            let a = K8sAgents::new(name, n(count), "img");
            assert_eq!(a.validate().unwrap_err().field, field, "{name}");
        }
        // Pod NAME-INDEX is a DNS label too: 63 characters at most.
        let long = "a".repeat(61);
        K8sAgents::new(&long, n(10), "img").validate().unwrap();
        assert!(K8sAgents::new(&long, n(11), "img").validate().is_err());
        let mut a = ok.clone();
        a.namespace = "Perf".into();
        assert_eq!(a.validate().unwrap_err().field, "namespace");
        let mut a = ok.clone();
        a.image = "two words".into();
        assert_eq!(a.validate().unwrap_err().field, "image");
        let mut a = ok;
        a.port = 0;
        assert_eq!(a.validate().unwrap_err().field, "port");
    }

    #[test]
    fn agents_are_found_by_their_pods_dns_names() {
        let mut a = K8sAgents::new("nsp", NonZeroU32::new(3).unwrap(), "img");
        a.namespace = "perf".into();
        assert_eq!(
            a.agent_addrs(),
            [
                "nsp-0.nsp.perf.svc:5400",
                "nsp-1.nsp.perf.svc:5400",
                "nsp-2.nsp.perf.svc:5400"
            ]
        );
        let list = a.manifests(None);
        let kinds: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Service", "Job"]);
        let kinds = a.manifests(Some(b"k")).to_string();
        assert!(kinds.contains("\"kind\":\"Secret\""));
        assert_eq!(
            a.job()["spec"]["template"]["spec"]["containers"][0]["command"],
            json!([
                "nsperf",
                "agent",
                "--listen",
                "0.0.0.0:5400",
                "--psk-file",
                "/etc/nsperf/psk",
                "--allow",
                "net,server,io"
            ])
        );
    }
}

#[cfg(test)]
mod kubectl_tests {
    use super::*;

    /// A kubectl that logs its arguments and standard input, and answers as told.
    fn fake_kubectl(dir: &std::path::Path, wait_ok: bool) -> Kubectl {
        let p = dir.join("kubectl");
        let wait = if wait_ok {
            ""
        } else {
            "[ \"$3\" = wait ] || [ \"$1\" = wait ] && { echo 'error: timed out waiting for the condition on jobs/x' >&2; exit 1; }\n"
        };
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\nlog={log}\necho \"ARGS $*\" >> \"$log\"\n{wait}case \"$*\" in *' -f -'*) cat >> \"$log\"; echo >> \"$log\";; esac\nexit 0\n",
                log = dir.join("log").display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Kubectl {
            program: p,
            context: Some("lab".into()),
        }
    }

    fn log(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn applies_waits_for_ready_pods_and_deletes_what_it_applied() {
        let d = tempfile::tempdir().unwrap();
        let kubectl = fake_kubectl(d.path(), true);
        let mut agents = K8sAgents::new("nsptest", NonZeroU32::new(2).unwrap(), "img");
        agents.namespace = "perf".into();
        // No cluster here: the pods' names do not resolve, so connecting fails after the
        // apply and the wait, and what was applied is deleted.
        let err = k8s_links(&agents, &kubectl, b"key", Duration::from_secs(30)).unwrap_err();
        assert!(
            matches!(&err, HostFailure::Unreachable { host, .. } if host == "nsptest-0"),
            "{err}"
        );
        let log = log(d.path());
        let args: Vec<&String> = log.iter().filter(|l| l.starts_with("ARGS ")).collect();
        assert_eq!(
            args,
            [
                "ARGS --context lab apply --request-timeout=60s -f -",
                "ARGS --context lab wait --namespace perf job/nsptest --for=jsonpath={.status.ready}=2 --timeout=30s",
                "ARGS --context lab delete --request-timeout=60s --ignore-not-found --wait=false -f -",
            ]
        );
        // Both the apply and the delete were given the whole List, Secret included.
        let docs: Vec<Value> = log
            .iter()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0], agents.manifests(Some(b"key")));
        assert_eq!(docs[0], docs[1]);
    }

    #[test]
    fn pods_never_ready_is_a_timeout_and_still_deletes() {
        let d = tempfile::tempdir().unwrap();
        let kubectl = fake_kubectl(d.path(), false);
        let agents = K8sAgents::new("nsptest", NonZeroU32::new(1).unwrap(), "img");
        let err = k8s_links(&agents, &kubectl, b"key", Duration::from_secs(1)).unwrap_err();
        assert!(matches!(err, HostFailure::Timeout { .. }), "{err}");
        assert!(err.to_string().contains("timed out waiting"), "{err}");
        assert!(log(d.path()).iter().any(|l| l.contains(" delete ")));
        // A missing kubectl is a one-line error.
        let none = Kubectl {
            program: d.path().join("no-kubectl"),
            context: None,
        };
        let e = none.apply(&agents.manifests(None)).unwrap_err().to_string();
        assert!(e.contains("cannot run") && !e.contains('\n'), "{e}");
    }
}
