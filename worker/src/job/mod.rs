//! The Job controller: the pure decision core and the shell that runs it.

pub mod controller;
pub mod core;
pub mod metrics;
