//! The batchfleet coordinator. The ownership protocol, placement and PodGC land here in later
//! issues; today it carries the command-line surface so deployments and scripts can rely on it.
