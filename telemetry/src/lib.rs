//! What every batchfleet binary sets up the same way: how it writes its log (`--log-format`,
//! colour only on a terminal) and the process metrics it serves beside its own.

mod logging;
mod process_metrics;

pub use logging::{LogFormat, colour_wanted, init_logging, init_logging_to, log_exit};
pub use process_metrics::register_process_metrics;
