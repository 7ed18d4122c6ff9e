//! The fleet while this coordinator leads: worker sessions, the shard map and its moves, and the
//! admin API.

pub mod state;
