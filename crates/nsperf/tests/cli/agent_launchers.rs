//! The launchers' side of `nsperf agent`: `--announce` (how srun's tasks say where they
//! listen), the sbatch script of `nsperf agent slurm-script`, and the Kubernetes manifests of
//! `nsperf agent k8s-manifest` checked against the API types (`k8s-openapi`): no cluster here,
//! so what is checked is that every field is one Kubernetes knows, with the values that make
//! the agents findable.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Secret, Service};
use nsperf_plan::agent::Announcement;

#[test]
fn an_announcing_agent_prints_its_host_and_the_port_it_bound() {
    let mut c = common::nsperf(["agent", "--listen", "127.0.0.1:0", "--announce", "-q"]);
    c.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut agent = common::KillOnDrop(c.spawn().unwrap());
    let out = agent.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("no announcement within 20 s");
    let a: Announcement = line.parse().unwrap();
    assert_eq!(a.host, Announcement::here(1).host);
    assert_ne!(a.port, 0);
    // The port announced is the one listening.
    TcpStream::connect(("127.0.0.1", a.port)).unwrap();

    let r = common::run(&["agent", "--stdio", "--announce"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

fn plan_file(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("one step.toml");
    std::fs::write(
        &p,
        "name = \"t\"\n[[step]]\nname = \"nothing\"\ntype = \"exec\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    p
}

#[test]
fn the_slurm_script_asks_for_the_allocation_and_runs_the_plan() {
    let d = tempfile::tempdir().unwrap();
    let plan = plan_file(d.path());
    let script = d.path().join("job.sh");
    let (plan_s, script_s) = (plan.to_str().unwrap(), script.to_str().unwrap());
    common::run(&[
        "agent",
        "slurm-script",
        plan_s,
        "--nodes",
        "4",
        "--tasks-per-node",
        "2",
        "--time",
        "1:00:00",
        "--partition",
        "perf",
        "--exclusive",
        "-o",
        script_s,
        "--",
        "--db",
        "r.db",
    ])
    .ok();
    let text = std::fs::read_to_string(&script).unwrap();
    for d in [
        "#SBATCH --nodes=4\n",
        "#SBATCH --ntasks-per-node=2\n",
        "#SBATCH --time=1:00:00\n",
        "#SBATCH --partition=perf\n",
        "#SBATCH --exclusive\n",
    ] {
        assert!(text.contains(d), "{d} missing:\n{text}");
    }
    let canonical = std::fs::canonicalize(&plan).unwrap();
    assert!(
        text.contains(&format!("plan='{}'\n", canonical.display())),
        "{text}"
    );
    assert!(
        text.ends_with("exec \"$nsperf\" run \"$plan\" --db r.db\n"),
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&script).unwrap().permissions().mode() & 0o111,
        0o111
    );
    // bash reads it.
    if common::require_program("bash", "bash -n of the generated script") {
        let st = std::process::Command::new("bash")
            .arg("-n")
            .arg(&script)
            .status()
            .unwrap();
        assert!(st.success());
    }
    // The plan is checked when the script is written, and values are checked.
    let r = common::run(&["agent", "slurm-script", "/no/such/plan.toml"]);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("plan.toml"), "{}", r.stderr);
    let r = common::run(&["agent", "slurm-script", plan_s, "--partition", "a b"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("partition"), "{}", r.stderr);
}

fn manifests(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["agent", "k8s-manifest"];
    all.extend_from_slice(args);
    let list = common::run(&all).ok().json();
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["kind"], "List");
    list["items"].as_array().unwrap().clone()
}

/// Deserializes `v` as `T` and checks nothing was lost: a misspelt field would be dropped by
/// the API types (and by the API server) and show here as a difference.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(v: &serde_json::Value) -> T {
    let t: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v:#}"));
    assert_eq!(
        &serde_json::to_value(&t).unwrap(),
        v,
        "fields lost in the API types"
    );
    t
}

#[test]
fn the_kubernetes_manifests_are_an_indexed_job_behind_a_headless_service() {
    let d = tempfile::tempdir().unwrap();
    let key = d.path().join("psk");
    std::fs::write(&key, "s3cret-key\n").unwrap();
    let items = manifests(&[
        "--name",
        "nsperf-clients",
        "--count",
        "3",
        "--image",
        "registry.example/nsperf:0.1",
        "--namespace",
        "perf",
        "--psk-file",
        key.to_str().unwrap(),
    ]);
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Secret", "Service", "Job"]);
    let secret: Secret = typed(&items[0]);
    let service: Service = typed(&items[1]);
    let job: Job = typed(&items[2]);

    // The key, as the key file holds it (trimmed, as nsperf reads it).
    let secret_name = secret.metadata.name.clone().unwrap();
    assert_eq!(secret_name, "nsperf-clients-psk");
    assert_eq!(secret.data.as_ref().unwrap()["psk"].0, b"s3cret-key");

    // A headless Service, named like the Job, selecting exactly the Job's pods.
    let svc = service.spec.as_ref().unwrap();
    assert_eq!(service.metadata.name.as_deref(), Some("nsperf-clients"));
    assert_eq!(service.metadata.namespace.as_deref(), Some("perf"));
    assert_eq!(svc.cluster_ip.as_deref(), Some("None"));
    let spec = job.spec.as_ref().unwrap();
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    let selector = svc.selector.clone().unwrap();
    assert!(!selector.is_empty());
    assert!(selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));

    // An Indexed Job of 3 pods at once, never restarted, each pod's hostname under the
    // Service: nsperf-clients-I.nsperf-clients.perf.svc.
    assert_eq!(job.metadata.name.as_deref(), Some("nsperf-clients"));
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!(spec.completions, Some(3));
    assert_eq!(spec.parallelism, Some(3));
    assert_eq!(spec.backoff_limit, Some(0));
    assert!(spec.active_deadline_seconds.unwrap() > 0);
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.subdomain.as_deref(), Some("nsperf-clients"));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));

    // The agent listens where the Service and the probe look, with the Secret's key.
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("registry.example/nsperf:0.1"));
    let cmd = c.command.clone().unwrap();
    assert_eq!(&cmd[..4], ["nsperf", "agent", "--listen", "0.0.0.0:5400"]);
    let psk_arg = &cmd[cmd.iter().position(|a| a == "--psk-file").unwrap() + 1];
    let port = c.ports.as_ref().unwrap()[0].container_port;
    assert_eq!(port, 5400);
    assert_eq!(svc.ports.as_ref().unwrap()[0].port, port);
    let probe = c
        .startup_probe
        .as_ref()
        .unwrap()
        .tcp_socket
        .as_ref()
        .unwrap();
    assert_eq!(
        probe.port,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port)
    );
    let mount = &c.volume_mounts.as_ref().unwrap()[0];
    let volume = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == mount.name)
        .unwrap();
    let from = volume.secret.as_ref().unwrap();
    assert_eq!(from.secret_name.as_deref(), Some(secret_name.as_str()));
    let item = &from.items.as_ref().unwrap()[0];
    assert_eq!(item.key, "psk");
    assert_eq!(format!("{}/{}", mount.mount_path, item.path), *psk_arg);

    // Without a key file there is no Secret (the docs say how to make it).
    let items = manifests(&["--name", "a", "--count", "1", "--image", "i"]);
    assert_eq!(items.len(), 2);
    let _: Service = typed(&items[0]);
    let _: Job = typed(&items[1]);

    // A name that cannot be a pod's DNS label is a usage error.
    let r = common::run(&[
        "agent",
        "k8s-manifest",
        "--name",
        "Bad_Name",
        "--count",
        "1",
        "--image",
        "i",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("name"), "{}", r.stderr);
}
