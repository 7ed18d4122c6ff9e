//! The process metrics every Prometheus client library exports (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_open_fds`, `process_start_time_seconds`, …), which
//! the usual dashboards and alerts read.

use prometheus::Registry;

/// Registers this process's metrics in `registry`, read from /proc at each scrape. Elsewhere than
/// on Linux there is no /proc to read them from, and nothing is registered.
pub fn register_process_metrics(registry: &Registry) -> prometheus::Result<()> {
    #[cfg(target_os = "linux")]
    registry.register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))?;
    #[cfg(not(target_os = "linux"))]
    let _ = registry;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_process_metrics_have_their_usual_names_and_real_values() {
        let registry = Registry::new();
        register_process_metrics(&registry).unwrap();
        let families = registry.gather();
        let value = |name: &str| {
            let family = families.iter().find(|f| f.name() == name).unwrap_or_else(|| panic!("{name} missing"));
            let metric = &family.get_metric()[0];
            if metric.get_gauge().has_value() { metric.get_gauge().value() } else { metric.get_counter().value() }
        };
        assert!(value("process_resident_memory_bytes") > 0.0);
        assert!(value("process_open_fds") >= 3.0, "stdin, stdout and stderr at least");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(started > now - 3600.0 && started <= now + 1.0, "started {started}, now {now}");
        assert!(value("process_cpu_seconds_total") >= 0.0);
    }
}
