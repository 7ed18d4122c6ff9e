//! CPU time and peak memory of processes, from `/proc`, for benchmarks and run reports.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use parking_lot::Mutex;

/// User plus system CPU seconds of `pid` (`"self"` for this process).
pub fn cpu_seconds(pid: &str) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may contain spaces) start at ") ".
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).context("stat format")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks =
        |i: usize| -> anyhow::Result<f64> { Ok(fields.get(i).context("stat field")?.parse::<f64>()?) };
    // utime and stime are fields 14 and 15 of /proc/PID/stat (11 and 12 after the name), in
    // clock ticks of 1/100 s.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// This process's CPU seconds; 0 where /proc cannot be read.
pub fn own_cpu_seconds() -> f64 {
    cpu_seconds("self").unwrap_or(0.0)
}

/// The most resident memory `pid` ever used (`VmHWM` of /proc/PID/status), in bytes.
pub fn peak_rss_bytes(pid: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).context("no VmHWM")?;
    let kib: u64 = line.split_whitespace().nth(1).context("VmHWM format")?.parse()?;
    Ok(kib * 1024)
}

/// The last CPU seconds and the peak RSS read of one process.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ProcessUsage {
    pub pid: u32,
    pub cpu_seconds: f64,
    pub peak_rss_bytes: u64,
}

/// Reads every registered process's usage every `period` until dropped, so that processes
/// killed during a run still have their last reading.
pub struct UsageSampler {
    pub usage: Arc<Mutex<BTreeMap<String, ProcessUsage>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for UsageSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl UsageSampler {
    pub fn start(period: Duration) -> Self {
        let usage: Arc<Mutex<BTreeMap<String, ProcessUsage>>> = Arc::default();
        let shared = usage.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            loop {
                tick.tick().await;
                sample(&shared);
            }
        });
        Self { usage, task }
    }

    /// Follows `pid` under `name` from now on (a restarted process under a new name).
    pub fn register(&self, name: &str, pid: Option<u32>) {
        if let Some(pid) = pid {
            self.usage.lock().insert(name.to_string(), ProcessUsage { pid, ..ProcessUsage::default() });
            sample(&self.usage);
        }
    }

    /// One last reading, and what was read.
    pub fn finish(&self) -> BTreeMap<String, ProcessUsage> {
        sample(&self.usage);
        self.usage.lock().clone()
    }
}

fn sample(usage: &Mutex<BTreeMap<String, ProcessUsage>>) {
    let own = std::process::id();
    for u in usage.lock().values_mut() {
        let pid = if u.pid == own { "self".to_string() } else { u.pid.to_string() };
        // A process that exited keeps its last reading.
        if let Ok(cpu) = cpu_seconds(&pid) {
            u.cpu_seconds = cpu;
        }
        if let Ok(rss) = peak_rss_bytes(&pid) {
            u.peak_rss_bytes = u.peak_rss_bytes.max(rss);
        }
    }
}
