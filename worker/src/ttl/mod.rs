//! The TTL-after-finished controller: deletes finished Jobs once their `ttlSecondsAfterFinished`
//! has passed.

pub mod controller;
pub mod core;
