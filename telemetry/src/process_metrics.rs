//! The process metrics every Prometheus client library exports (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_open_fds`, `process_start_time_seconds`, …), which
//! the usual dashboards and alerts read, from /proc at each scrape.
//!
//! Not the `prometheus` crate's `process` feature: its `process_cpu_seconds_total` is an integer
//! counter that drops the fraction of every second (0 for a process that used 0.9 s), too coarse
//! for `rate()` over a dashboard's minute; and it brings `procfs` and a second `rustix`. What
//! client_golang reads is a few lines of /proc.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, Opts, Registry};

/// Clock ticks per second of /proc's times: USER_HZ, 100 in Linux's ABI on every architecture.
const TICKS_PER_SECOND: f64 = 100.0;

/// Registers this process's metrics in `registry`. Elsewhere than on Linux there is no /proc to
/// read, and the series stay absent.
pub fn register_process_metrics(registry: &Registry) -> prometheus::Result<()> {
    registry.register(Box::new(ProcessCollector::new()?))
}

struct ProcessCollector {
    /// One scrape at a time: the counter is brought up to /proc's total by adding the difference.
    collecting: std::sync::Mutex<()>,
    cpu: Counter,
    resident: Gauge,
    virtual_memory: Gauge,
    open_fds: Gauge,
    max_fds: Gauge,
    start_time: Gauge,
    threads: Gauge,
}

impl ProcessCollector {
    fn new() -> prometheus::Result<Self> {
        let gauge = |name: &str, help: &str| Gauge::with_opts(Opts::new(name, help));
        Ok(Self {
            collecting: std::sync::Mutex::new(()),
            cpu: Counter::with_opts(Opts::new(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
            ))?,
            resident: gauge("process_resident_memory_bytes", "Resident memory size in bytes.")?,
            virtual_memory: gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.")?,
            open_fds: gauge("process_open_fds", "Number of open file descriptors.")?,
            max_fds: gauge("process_max_fds", "Maximum number of open file descriptors.")?,
            start_time: gauge(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
            )?,
            threads: gauge("process_threads", "Number of OS threads in the process.")?,
        })
    }

    fn gauges(&self) -> [&Gauge; 6] {
        [&self.resident, &self.virtual_memory, &self.open_fds, &self.max_fds, &self.start_time, &self.threads]
    }
}

/// What /proc says of this process now; `None` for what could not be read.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    start_time_seconds: Option<f64>,
    threads: Option<f64>,
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces and parens):
/// index 0 is field 3 (`state`), so field N of proc(5) is index N - 3.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(") ").map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default()
}

/// A `Key:   value kB` line of `/proc/PID/status`, in bytes (or the bare number without `kB`).
fn status_value(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?;
    let mut words = line.split_whitespace();
    let number: f64 = words.next()?.parse().ok()?;
    Some(if words.next() == Some("kB") { number * 1024.0 } else { number })
}

/// The soft limit of `Max open files` in `/proc/PID/limits`.
fn max_open_files(limits: &str) -> Option<f64> {
    let line = limits.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The boot time, `btime` of `/proc/stat`, in seconds since the epoch.
fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

fn parse(stat: &str, status: &str, limits: &str, proc_stat: &str, open_fds: Option<usize>) -> Reading {
    let fields = stat_fields(stat);
    let ticks = |field: usize| fields.get(field - 3).and_then(|v| v.parse::<f64>().ok());
    Reading {
        cpu_seconds: ticks(14).zip(ticks(15)).map(|(user, system)| (user + system) / TICKS_PER_SECOND),
        resident_bytes: status_value(status, "VmRSS"),
        virtual_bytes: status_value(status, "VmSize"),
        open_fds: open_fds.map(|n| n as f64),
        max_fds: max_open_files(limits),
        start_time_seconds: ticks(22).zip(boot_time(proc_stat)).map(|(t, boot)| boot + t / TICKS_PER_SECOND),
        threads: status_value(status, "Threads"),
    }
}

fn read() -> Reading {
    let file = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|dir| dir.count());
    parse(
        &file("/proc/self/stat"),
        &file("/proc/self/status"),
        &file("/proc/self/limits"),
        &file("/proc/stat"),
        open_fds,
    )
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        let mut descs = self.cpu.desc();
        for gauge in self.gauges() {
            descs.extend(gauge.desc());
        }
        descs
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _one_at_a_time = self.collecting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = read();
        let mut families = Vec::new();
        if let Some(total) = now.cpu_seconds {
            // A counter only grows; /proc's total does too.
            self.cpu.inc_by((total - self.cpu.get()).max(0.0));
            families.extend(self.cpu.collect());
        }
        let values = [
            now.resident_bytes,
            now.virtual_bytes,
            now.open_fds,
            now.max_fds,
            now.start_time_seconds,
            now.threads,
        ];
        for (gauge, value) in self.gauges().into_iter().zip(values) {
            if let Some(value) = value {
                gauge.set(value);
                families.extend(gauge.collect());
            }
        }
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_as_client_golang_reads_them() {
        // A command name with a space and a paren, as a process may name itself.
        let stat = "4242 (fleet worker) ) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    123 45 0 0 20 0 7 0 35000 1257324544 8444 18446744073709551615";
        let status = "Name:\tfleet-worker\nVmSize:\t 1228832 kB\nVmRSS:\t   33776 kB\nThreads:\t7\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            20000                1048576              files\n";
        let proc_stat = "cpu  1 2 3\nbtime 1795000000\nprocesses 9\n";
        let reading = parse(stat, status, limits, proc_stat, Some(19));
        assert_eq!(
            reading,
            Reading {
                cpu_seconds: Some(1.68),
                resident_bytes: Some(33776.0 * 1024.0),
                virtual_bytes: Some(1228832.0 * 1024.0),
                open_fds: Some(19.0),
                max_fds: Some(20000.0),
                start_time_seconds: Some(1795000350.0),
                threads: Some(7.0),
            }
        );
        assert_eq!(parse("", "", "", "", None), Reading::default(), "unreadable /proc: no values, no panic");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_metrics_have_their_usual_names_and_real_values() {
        let registry = Registry::new();
        register_process_metrics(&registry).unwrap();
        // Some CPU time to see, with its fraction of a second.
        let started = std::time::Instant::now();
        let mut spin = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(30) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let families = registry.gather();
        let value = |name: &str| {
            let family =
                families.iter().find(|f| f.name() == name).unwrap_or_else(|| panic!("{name} missing"));
            let metric = &family.get_metric()[0];
            if metric.get_gauge().has_value() {
                metric.get_gauge().value()
            } else {
                metric.get_counter().value()
            }
        };
        assert!(value("process_resident_memory_bytes") > 1024.0 * 1024.0);
        assert!(value("process_open_fds") >= 3.0, "stdin, stdout and stderr at least");
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_threads") >= 1.0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let start = value("process_start_time_seconds");
        assert!(start > now - 3600.0 && start <= now + 1.0, "started {start}, now {now}");
        let cpu = value("process_cpu_seconds_total");
        assert!(cpu > 0.0 && cpu < 3600.0, "{cpu}");
    }
}
