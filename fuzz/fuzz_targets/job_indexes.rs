//! `status.completedIndexes` and `status.failedIndexes` as the Job controller reads them back
//! from the API (`parseIndexesFromString`), merged with new indexes and written out again.
//!
//! Input (text): `completions`, `completedIndexes`, `failedIndexes`, and new indexes separated by
//! spaces, one per line.
#![no_main]

use batchfleet_worker::job::core::OrderedIntervals;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    // `spec.completions` is an int32 in the API.
    let Some(completions) = lines.next().and_then(|c| c.parse::<i32>().ok()) else { return };
    let completions = i64::from(completions);
    let completed = OrderedIntervals::parse(lines.next().unwrap_or_default(), completions);
    let failed = OrderedIntervals::parse(lines.next().unwrap_or_default(), completions);
    let mut new_indexes: Vec<i64> =
        lines.next().unwrap_or_default().split(' ').filter_map(|n| n.parse().ok()).collect();
    new_indexes.sort_unstable();
    let merged = completed.with_ordered_indexes(&new_indexes).merge(&failed);
    for probe in new_indexes.iter().chain(&[0, completions - 1]) {
        let _ = (merged.has(*probe), failed.has(*probe));
    }
    let _ = (merged.total(), completed.total(), failed.total());
    let written = merged.to_string();
    let _ = OrderedIntervals::parse(&written, completions);
});
