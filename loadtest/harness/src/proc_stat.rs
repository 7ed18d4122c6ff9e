//! CPU time of a process, from `/proc/PID/stat`, for benchmarks that report cores used.

use anyhow::Context;

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
