//! One module per subcommand: each defines its clap arguments ("low" args that only validate
//! what was typed), turns them into the engine's typed config ("high" args), runs the engine
//! and prints. No measurement logic lives here.

pub mod agent;
pub mod completions;
pub mod daemon;
pub mod doctor;
pub mod host;
pub mod io;
pub mod lab;
pub mod lab_report;
pub mod lab_serve;
pub mod net;
pub mod replay;
mod replay_lab;
pub mod report;
pub mod results;
pub mod run;
pub mod server;
pub mod step;
pub mod trace;
