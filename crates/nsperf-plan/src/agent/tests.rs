//! The coordinator and agents together, in process: real sessions and framing over socket
//! pairs, steps run by the mock runner.

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use nsperf_core::host::HostFacts;

use super::*;
use crate::step::StepSpec;

/// Starts an agent session on one end of a socket pair and returns the coordinator's link.
pub(crate) fn mock_agent(
    name: &str,
    policy: AgentPolicy,
    runner: Arc<dyn StepRunner>,
    psk: Option<Vec<u8>>,
) -> (AgentLink, std::thread::JoinHandle<SessionEnd>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let reader = theirs.try_clone().unwrap();
    let h = std::thread::spawn(move || {
        serve_session(reader, theirs, policy, &*runner, HostFacts::default())
    });
    let link = AgentLink {
        name: name.into(),
        reader: Box::new(ours.try_clone().unwrap()),
        writer: Box::new(ours),
        process: None,
        psk,
    };
    (link, h)
}

fn io_spec() -> StepSpec {
    StepSpec::Io {
        site: None,
        config: nsperf_io::RunConfig::new(
            nsperf_io::Target::Dir { path: ".".into() },
            nsperf_io::Workload::SeqRead,
            1 << 20,
            4096,
        ),
    }
}

#[test]
fn agents_with_a_key_run_a_step_at_one_instant() {
    let key = b"k3y".to_vec();
    let policy = AgentPolicy {
        psk: Some(key.clone()),
        ..AgentPolicy::default()
    };
    let runner: Arc<dyn StepRunner> = Arc::new(MockStepRunner::default());
    let mut links = Vec::new();
    let mut sessions = Vec::new();
    for i in 0..3 {
        let (l, h) = mock_agent(
            &format!("h{i}"),
            policy.clone(),
            runner.clone(),
            Some(key.clone()),
        );
        links.push(l);
        sessions.push(h);
    }
    let mut fleet = Fleet::new();
    fleet.connect(links, Duration::from_secs(10)).unwrap();
    for a in fleet.agents() {
        // One clock on one host: the offset is within its bound of zero.
        assert_eq!(a.clock.probes, CLOCK_PROBES);
        assert!(
            a.clock.offset_ns.unsigned_abs() <= a.clock.error_ns + 1_000,
            "{:?}",
            a.clock
        );
        assert_eq!(a.allow, StepClass::DEFAULT.to_vec());
    }
    let all: Vec<usize> = (0..3).collect();
    let at = fleet.barrier(&all);
    let ids: Vec<StepId> = all
        .iter()
        .map(|&i| fleet.start(i, io_spec(), Some(at)))
        .collect();
    let out = fleet.wait(&ids, Duration::from_secs(10));
    assert!(
        out.iter().all(|o| o.end.as_ref().is_some_and(StepEnd::ok)),
        "{out:?}"
    );
    fleet.close(Duration::from_secs(1));
    for h in sessions {
        let end = h.join().unwrap();
        assert_eq!(end.reason, "the coordinator said bye");
    }
}

#[test]
fn a_wrong_key_or_none_fails_fast_with_the_reason() {
    let policy = AgentPolicy {
        psk: Some(b"right".to_vec()),
        ..AgentPolicy::default()
    };
    let runner: Arc<dyn StepRunner> = Arc::new(MockStepRunner::default());
    for given in [Some(b"wrong".to_vec()), None] {
        let (l, _h) = mock_agent("h", policy.clone(), runner.clone(), given);
        let mut fleet = Fleet::new();
        let e = fleet.connect(vec![l], Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.class(), nsperf_core::Failure::Auth, "{e}");
    }
}

#[test]
fn a_step_outside_the_allow_list_ends_with_the_flag_to_use() {
    let runner: Arc<dyn StepRunner> = Arc::new(MockStepRunner::default());
    let (l, _h) = mock_agent("h", AgentPolicy::default(), runner, None);
    let mut fleet = Fleet::new();
    fleet.connect(vec![l], Duration::from_secs(5)).unwrap();
    let id = fleet.start(
        0,
        StepSpec::Exec {
            site: None,
            command: vec!["true".into()],
        },
        None,
    );
    let out = fleet.wait(&[id], Duration::from_secs(5));
    let end = out[0].end.as_ref().unwrap();
    assert!(!end.ok());
    assert!(end.error.contains("--allow exec"), "{}", end.error);
}

#[test]
fn a_lost_agent_fails_its_part_and_the_others_finish() {
    let slow: Arc<dyn StepRunner> = Arc::new(MockStepRunner {
        delay: Duration::from_millis(300),
    });
    let (a, _ha) = mock_agent("a", AgentPolicy::default(), slow.clone(), None);
    // Agent b's connection is one we can cut.
    let (ours, theirs) = UnixStream::pair().unwrap();
    let cut = theirs.try_clone().unwrap();
    let reader = theirs.try_clone().unwrap();
    let hb = std::thread::spawn(move || {
        serve_session(
            reader,
            theirs,
            AgentPolicy::default(),
            &*slow,
            HostFacts::default(),
        )
    });
    let b = AgentLink {
        name: "b".into(),
        reader: Box::new(ours.try_clone().unwrap()),
        writer: Box::new(ours),
        process: None,
        psk: None,
    };
    let mut fleet = Fleet::new();
    fleet.connect(vec![a, b], Duration::from_secs(5)).unwrap();
    let ids = [
        fleet.start(0, io_spec(), None),
        fleet.start(1, io_spec(), None),
    ];
    cut.shutdown(std::net::Shutdown::Both).unwrap();
    let out = fleet.wait(&ids, Duration::from_secs(5));
    assert!(out[0].end.as_ref().is_some_and(StepEnd::ok), "{out:?}");
    assert!(out[1].lost.is_some(), "{out:?}");
    assert!(fleet.lost(1).is_some());
    // The agent's session ended and killed the step it ran.
    let end = hb.join().unwrap();
    assert_eq!(end.killed, 1, "{end:?}");
}

#[test]
fn a_server_step_reports_listening_then_stops() {
    let runner: Arc<dyn StepRunner> = Arc::new(MockStepRunner {
        delay: Duration::from_millis(100),
    });
    let (l, _h) = mock_agent("srv", AgentPolicy::default(), runner, None);
    let mut fleet = Fleet::new();
    fleet.connect(vec![l], Duration::from_secs(5)).unwrap();
    let id = fleet.start(
        0,
        StepSpec::NetServer {
            site: None,
            server: nsperf_net::ServerConfig::default(),
        },
        None,
    );
    let r = fleet.wait_report(id, Duration::from_secs(5), |r| {
        matches!(r, crate::step::StepReport::Listening { .. })
    });
    assert!(r.is_some());
    fleet.stop(id);
    let out = fleet.wait(&[id], Duration::from_secs(5));
    assert!(out[0].end.is_some());
}
