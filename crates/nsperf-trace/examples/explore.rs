use nsperf_trace::testkit::pcap;
use nsperf_trace::testkit::sim::{PathSim, simulate};
use nsperf_trace::{TraceConfig, analyze_bytes};

fn main() {
    let base = PathSim {
        bytes: 8 << 20,
        max_ns: 8_000_000_000,
        ..PathSim::default()
    };
    let cases: Vec<(&str, PathSim)> = vec![
        (
            "window64k",
            PathSim {
                rcv_buf: 64 << 10,
                ..base.clone()
            },
        ),
        (
            "saturate",
            PathSim {
                bytes: 16 << 20,
                initial_ssthresh: Some(150),
                ..base.clone()
            },
        ),
        (
            "app",
            PathSim {
                app_bps: Some(10e6),
                ..base.clone()
            },
        ),
        (
            "loss1",
            PathSim {
                loss: 0.01,
                queue_packets: 200,
                ..base.clone()
            },
        ),
        (
            "slowread",
            PathSim {
                rcv_buf: 256 << 10,
                read_bps: Some(5e6),
                bytes: 4 << 20,
                ..base.clone()
            },
        ),
        (
            "nots64k",
            PathSim {
                rcv_buf: 64 << 10,
                timestamps: false,
                ..base.clone()
            },
        ),
        (
            "nots_sat",
            PathSim {
                timestamps: false,
                bytes: 16 << 20,
                initial_ssthresh: Some(150),
                ..base.clone()
            },
        ),
    ];
    let only = std::env::args().nth(1);
    for (name, c) in cases {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        for v in [0.0, 0.5, 1.0] {
            let p = PathSim {
                vantage: v,
                ..c.clone()
            };
            let frames = simulate(&p);
            let cap = pcap(false, true, 1, &frames);
            let (s, _) = analyze_bytes(&cap, TraceConfig::default()).unwrap();
            let cn = &s.connections[0];
            let d = &cn.diagnosis;
            println!(
                "{name:9} v={v:.1} {:15} rw {:4.0} loss {:4.0} cg {:4.0} app {:4.0} unk {:3.0} | {:?} path {:.1}/{:.1} ms up {:.1}({}) down {:.1} | gp {:.1} Mb/s ceil {:?} lost {} rex {} zwp {} ifl {} zw {}",
                d.limit,
                d.receiver_window_pct,
                d.loss_pct,
                d.congestion_pct,
                d.application_pct,
                d.window_unknown_pct,
                d.vantage,
                d.path_rtt.min_ns as f64 / 1e6,
                d.path_rtt.median_ns as f64 / 1e6,
                d.path_rtt.upstream_min_ns as f64 / 1e6,
                d.path_rtt.upstream_samples,
                d.path_rtt.downstream_min_ns as f64 / 1e6,
                d.goodput_bps / 1e6,
                d.window_ceiling_bps.map(|x| (x / 1e5).round() / 10.0),
                (d.loss_rate * cn.a_to_b.data_packets as f64).round(),
                cn.a_to_b.retransmitted_packets,
                cn.a_to_b.zero_window_probes,
                cn.a_to_b.in_flight_max_bytes,
                cn.b_to_a.zero_window_adverts
            );
        }
    }
}
