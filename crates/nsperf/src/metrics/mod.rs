//! `--metrics-listen ADDR`: the live interval figures of `net`, `io run`, `server` and `run`
//! in the OpenMetrics text format at `http://ADDR/metrics`, for Prometheus and dashboards.
//!
//! Each command keeps its figures in a small state updated by the interval callback it
//! already has (the same figures `--json-stream` prints: nothing is measured twice, nothing
//! is touched per packet or per I/O); a [`Collector`] encodes that state when scraped. The
//! HTTP side is one blocking thread (`tiny_http`); the listener is bound before the command
//! starts, so a bad address or a port in use is a one-line error before anything runs.
//! Every metric is listed in docs/metrics.md.

mod io;
mod net;
mod run;
mod server;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use clap::Args;
use nsperf_core::Failure;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

pub use io::IoMetrics;
pub use net::NetMetrics;
pub use run::{Counting, RunMetrics};
pub use server::ServerMetrics;

/// The `--metrics-listen` flag of the measuring commands.
#[derive(Debug, Clone, Args)]
pub struct MetricsArgs {
    /// Serve the live figures in OpenMetrics text at http://ADDR/metrics while the command
    /// runs (e.g. 127.0.0.1:9464; port 0 picks a free port; the address is printed on
    /// stderr). See docs/metrics.md.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
}

impl MetricsArgs {
    /// Binds the listener when one was asked for: a one-line error (exit 4 without the
    /// permission, 1 otherwise: a port in use) before the command starts.
    pub fn bind(&self) -> anyhow::Result<Option<MetricsListener>> {
        let Some(addr) = self.metrics_listen else {
            return Ok(None);
        };
        let listener = TcpListener::bind(addr).map_err(|e| {
            let class = if e.kind() == std::io::ErrorKind::PermissionDenied {
                Failure::Permission
            } else {
                Failure::Runtime
            };
            crate::exit::classified(
                class,
                format!("--metrics-listen {addr}: cannot listen: {e}"),
            )
        })?;
        let addr = listener.local_addr()?;
        Ok(Some(MetricsListener { listener, addr }))
    }
}

/// A bound, not yet serving, metrics listener (bound before a daemon forks; served after).
#[derive(Debug)]
pub struct MetricsListener {
    listener: TcpListener,
    addr: SocketAddr,
}

/// The running endpoint: serves until dropped.
pub struct MetricsEndpoint {
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The content type of the OpenMetrics text format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

impl MetricsListener {
    /// Starts serving `collector`'s figures on a thread of its own and says where on stderr.
    pub fn serve(self, collector: impl Collector) -> anyhow::Result<MetricsEndpoint> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector));
        let server = tiny_http::Server::from_listener(self.listener, None)
            .map_err(|e| anyhow::anyhow!("--metrics-listen {}: {e}", self.addr))?;
        let server = Arc::new(server);
        let s = server.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || answer_scrapes(&s, &registry))?;
        eprintln!("nsperf: metrics at http://{}/metrics", self.addr);
        Ok(MetricsEndpoint {
            server,
            thread: Some(thread),
        })
    }
}

impl std::fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsEndpoint")
            .field("addr", &self.server.server_addr().to_ip())
            .finish()
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers requests until the server is unblocked: `GET /metrics` (any query) with the
/// registry's text, 404 for other paths, 405 for other methods.
fn answer_scrapes(server: &tiny_http::Server, registry: &Registry) {
    let mut body = String::with_capacity(16 * 1024);
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or_default();
        let response = if path != "/metrics" {
            tiny_http::Response::from_string("not found: the metrics are at /metrics\n")
                .with_status_code(404)
        } else if *request.method() != tiny_http::Method::Get {
            tiny_http::Response::from_string("only GET\n").with_status_code(405)
        } else {
            body.clear();
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => tiny_http::Response::from_string(body.as_str()).with_header(
                    tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE)
                        .expect("a valid header"),
                ),
                Err(_) => {
                    tiny_http::Response::from_string("encoding failed\n").with_status_code(500)
                }
            }
        };
        // A client that went away is its own problem.
        let _ = request.respond(response);
    }
}

/// A label set: `(name, value)` pairs.
type Labels = Vec<(&'static str, String)>;

/// One metric family being written: its descriptor, then one sample per label set.
struct Family<'a> {
    enc: MetricEncoder<'a>,
}

impl<'a> Family<'a> {
    fn new(
        enc: &'a mut DescriptorEncoder,
        name: &'a str,
        help: &str,
        unit: Option<&'a Unit>,
        ty: MetricType,
    ) -> Result<Self, std::fmt::Error> {
        Ok(Family {
            enc: enc.encode_descriptor(name, help, unit, ty)?,
        })
    }

    /// A counter sample (`_total` is added to the name).
    fn counter(&mut self, labels: &Labels, v: u64) -> std::fmt::Result {
        ConstCounter::new(v).encode(self.enc.encode_family(labels)?)
    }

    /// A counter sample of a real quantity (seconds).
    fn counter_f64(&mut self, labels: &Labels, v: f64) -> std::fmt::Result {
        ConstCounter::new(v).encode(self.enc.encode_family(labels)?)
    }

    /// A gauge sample.
    fn gauge(&mut self, labels: &Labels, v: f64) -> std::fmt::Result {
        ConstGauge::new(v).encode(self.enc.encode_family(labels)?)
    }

    /// A histogram sample from per-bucket counts `(upper bound, count)`, the last bound
    /// infinite (the encoder makes them cumulative).
    fn histogram(
        &mut self,
        labels: &Labels,
        sum: f64,
        count: u64,
        buckets: &[(f64, u64)],
    ) -> std::fmt::Result {
        self.enc
            .encode_family(labels)?
            .encode_histogram::<Labels>(sum, count, buckets, None)
    }
}

/// Bits per second from bytes over seconds (0 for an empty interval).
fn bits_per_s(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// The unit `bits_per_second`.
fn bits_per_second() -> Unit {
    Unit::Other("bits_per_second".into())
}

/// The unit `bytes_per_second`.
fn bytes_per_second() -> Unit {
    Unit::Other("bytes_per_second".into())
}
