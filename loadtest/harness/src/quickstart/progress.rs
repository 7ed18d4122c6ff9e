//! `loadtest up`'s live view (indicatif, on stderr; hidden when stderr is no terminal): Jobs
//! created and finished (Complete / Failed), the shard map's owners, and what is happening.

use std::sync::Arc;
use std::time::Duration;

use batchfleet_audits::objects::ObjectsSeen;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;

use super::mix::Sent;
use crate::run::progress::bar;

pub struct UpProgress {
    created: ProgressBar,
    finished: ProgressBar,
    fleet: ProgressBar,
    status: ProgressBar,
    ticker: tokio::task::JoinHandle<()>,
}

impl Drop for UpProgress {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

fn line(progress: &MultiProgress, prefix: &str) -> ProgressBar {
    let line = progress.add(ProgressBar::new_spinner());
    let style = ProgressStyle::with_template("{prefix:>9} {spinner} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    line.set_style(style);
    line.set_prefix(prefix.to_string());
    line.enable_steady_tick(Duration::from_millis(200));
    line
}

impl UpProgress {
    /// Bars over the `planned` Jobs, updated from what was sent and what the watches saw; the
    /// fleet line shows `fleet` as the shard map poller writes it.
    pub fn start(
        planned: usize,
        sent: Arc<Sent>,
        seen: Arc<Mutex<ObjectsSeen>>,
        fleet: Arc<Mutex<String>>,
    ) -> Self {
        let progress = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let created = bar(&progress, planned, "created");
        let finished = bar(&progress, planned, "finished");
        let fleet_line = line(&progress, "shards");
        let status = line(&progress, "now");
        let ticker = {
            let (created, finished, fleet_line) = (created.clone(), finished.clone(), fleet_line.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(250));
                loop {
                    tick.tick().await;
                    created.set_position(sent.created.lock().len() as u64);
                    let (all, complete, failed) = {
                        let seen = seen.lock();
                        let with = |c: &str| {
                            seen.jobs
                                .values()
                                .filter(|j| j.finished.as_ref().is_some_and(|f| f.condition == c))
                                .count()
                        };
                        (seen.jobs.len(), with("Complete"), with("Failed"))
                    };
                    // The CronJob adds Jobs beyond the planned ones.
                    finished.set_length(all.max(planned) as u64);
                    finished.set_position((complete + failed) as u64);
                    finished.set_message(format!("{complete} Complete, {failed} Failed"));
                    fleet_line.set_message(fleet.lock().clone());
                }
            })
        };
        Self { created, finished, fleet: fleet_line, status, ticker }
    }

    pub fn status(&self, message: String) {
        self.status.set_message(message);
    }

    pub fn finish(&self) {
        self.ticker.abort();
        self.created.finish();
        self.finished.finish();
        self.fleet.finish();
        self.status.finish_with_message("done");
    }
}
