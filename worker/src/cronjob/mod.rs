//! The CronJob controller: robfig-compatible schedules, its decision core and its shell.

pub mod controller;
pub mod core;
pub mod creates_first;
pub mod schedule;
pub mod signals;
