//! Coordinator-side steps shared by the agent tests (local agents, Slurm agents).

use std::net::SocketAddr;
use std::time::Duration;

use nsperf_plan::agent::{Fleet, StepId};
use nsperf_plan::step::{StepReport, StepSpec};

/// Starts an `nsperf server` step on agent `agent` bound to `bind` (any port) and returns
/// the step and the address it listens on; panics with the step's outcome if it does not.
pub fn start_server(fleet: &mut Fleet, agent: usize, bind: &str) -> (StepId, SocketAddr) {
    let server = fleet.start(
        agent,
        StepSpec::NetServer {
            site: None,
            server: nsperf_net::ServerConfig {
                bind: bind.parse().expect("an IP address"),
                port: 0,
                ..nsperf_net::ServerConfig::default()
            },
        },
        None,
    );
    let Some(StepReport::Listening { addr }) =
        fleet.wait_report(server, Duration::from_secs(20), |r| {
            matches!(r, StepReport::Listening { .. })
        })
    else {
        panic!(
            "the server step did not listen: {:?}",
            fleet.outcome(server)
        );
    };
    (server, addr)
}
