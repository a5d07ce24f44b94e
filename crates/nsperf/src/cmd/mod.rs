//! One module per subcommand: each defines its clap arguments ("low" args that only validate
//! what was typed), turns them into the engine's typed config ("high" args), runs the engine
//! and prints. No measurement logic lives here.

pub mod host;
pub mod io;
pub mod lab;
pub mod net;
pub mod report;
pub mod results;
pub mod run;
pub mod server;
pub mod trace;
