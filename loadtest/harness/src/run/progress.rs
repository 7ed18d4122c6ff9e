//! The live progress of a run on the terminal (indicatif): Jobs created, Jobs finished, and a
//! status line for the phase and the last fault. When stderr is not a terminal (a CI log, a file)
//! the bars are hidden, and a plain line with the same counts is written every 30 s instead.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use batchfleet_audits::objects::ObjectsSeen;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;

use super::workload::Sent;

/// How often the plain progress line is written when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(30);

pub struct Progress {
    created: ProgressBar,
    finished: ProgressBar,
    status: ProgressBar,
    ticker: tokio::task::JoinHandle<()>,
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

pub(crate) fn bar(progress: &MultiProgress, len: usize, what: &str) -> ProgressBar {
    let bar = progress.add(ProgressBar::new(len as u64));
    let style = ProgressStyle::with_template("{prefix:>9} [{bar:40}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar
}

impl Progress {
    /// Bars over `planned` Jobs, updated from what was sent and what the watches saw.
    pub fn start(planned: usize, sent: Arc<Sent>, seen: Arc<Mutex<ObjectsSeen>>) -> Self {
        let progress = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let created = bar(&progress, planned, "created");
        let finished = bar(&progress, planned, "finished");
        let status = progress.add(ProgressBar::new_spinner());
        status.enable_steady_tick(Duration::from_millis(200));
        let plain = !std::io::stderr().is_terminal();
        let ticker = {
            let (created, finished, status) = (created.clone(), finished.clone(), status.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(250));
                let mut last_plain = tokio::time::Instant::now();
                loop {
                    tick.tick().await;
                    created.set_position(sent.created() as u64);
                    let (seen_jobs, done) = {
                        let seen = seen.lock();
                        (seen.jobs.len(), seen.jobs.values().filter(|j| j.finished.is_some()).count())
                    };
                    // CronJobs add Jobs beyond the planned ones.
                    finished.set_length(seen_jobs.max(planned) as u64);
                    finished.set_position(done as u64);
                    if plain && last_plain.elapsed() >= PLAIN_EVERY {
                        last_plain = tokio::time::Instant::now();
                        eprintln!(
                            "progress: created {}/{planned}, finished {done}/{}; {}",
                            created.position(),
                            finished.length().unwrap_or_default(),
                            status.message()
                        );
                    }
                }
            })
        };
        Self { created, finished, status, ticker }
    }

    pub fn status(&self, message: String) {
        self.status.set_message(message);
    }

    pub fn finish(&self, message: &'static str) {
        self.ticker.abort();
        self.created.finish();
        self.finished.finish();
        self.status.finish_with_message(message);
    }
}
