//! PodGC, run by the coordinator leader cluster-wide: upstream's four passes (terminated over the
//! threshold, terminating on out-of-service nodes, orphaned after quarantine, unscheduled
//! terminating), and the policies beyond them (docs/beyond-upstream.md). Pure decisions (`core`,
//! `policy`), a compact pod cache, and the shell that runs them.

pub mod cache;
pub mod controller;
pub mod core;
pub mod pod_facts;
pub mod policy;
