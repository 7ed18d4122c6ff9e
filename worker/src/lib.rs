//! The batchfleet worker. The reconcilers land here in later issues.
