//! The CronJob controller: robfig-compatible schedules, previews, and (next) its decision core
//! and shell.

pub mod controller;
pub mod core;
pub mod creates_first;
pub mod preview;
pub mod schedule;
