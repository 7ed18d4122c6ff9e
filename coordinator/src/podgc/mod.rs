//! PodGC, run by the coordinator leader cluster-wide: upstream's four passes (terminated over the
//! threshold, terminating on out-of-service nodes, orphaned after quarantine, unscheduled
//! terminating). The decision core is here; the shell that caches pods and writes comes with the
//! coordinator's leader loop.

pub mod core;
