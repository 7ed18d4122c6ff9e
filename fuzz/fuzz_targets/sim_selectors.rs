//! The sim's `labelSelector`, `fieldSelector` and `shardSelector` parsers on arbitrary query
//! text, and matching with what parsed. A parsed shard selector's echo must parse back to the
//! same selector (the list's `metadata.shardInfo.selector` is what clients see applied).
//!
//! Input (text): the same line is tried as all three selectors; a second line is the namespace
//! and label value matched against.
#![no_main]

use batchfleet_sim::selector::{FieldSelector, LabelSelector, ShardSelector, check_fields, field_value};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (selector, other) = text.split_once('\n').unwrap_or((text, "default"));
    if let Ok(parsed) = LabelSelector::parse(selector) {
        let mut labels = Map::new();
        labels.insert("job-name".to_string(), Value::from(other));
        labels.insert(other.to_string(), Value::from("x"));
        let _ = parsed.matches(Some(&labels));
        let _ = parsed.matches(None);
        let _ = parsed.requires_exact_match("job-name");
    }
    if let Ok(parsed) = FieldSelector::parse(selector) {
        let pod = json!({"metadata": {"name": other, "namespace": other},
                         "spec": {"nodeName": other}, "status": {"phase": "Running"}});
        let _ = check_fields("", "pods", &parsed);
        let _ = check_fields("batch", "jobs", &parsed);
        let _ = check_fields("", "events", &parsed);
        let _ = parsed.matches(|f| field_value("", "pods", &pod, f));
    }
    if let Ok(parsed) = ShardSelector::parse(selector) {
        let _ = parsed.matches(other, other);
        let echo = parsed.canonical();
        let again = ShardSelector::parse(&echo)
            .unwrap_or_else(|e| panic!("the echo {echo:?} of {selector:?} does not parse: {e}"));
        assert_eq!(again.canonical(), echo, "the echo of {selector:?} is not stable");
        assert_eq!(again.ranges(), parsed.ranges(), "the echo {echo:?} of {selector:?} selects other ranges");
    }
});
