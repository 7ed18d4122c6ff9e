//! `application/vnd.kubernetes.protobuf` request bodies as the sim decodes them: the `k8s\0`
//! envelope with any kind it knows, DeleteOptions, and bare messages of every kind; whatever
//! decodes must encode again.
#![no_main]

use batchfleet_sim::protobuf::{codec, delete_options, schema};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let schema = schema::schema();
    if let Ok(object) = codec::decode_enveloped(schema, data, 0) {
        let _ = codec::encode_enveloped(schema, &object);
    }
    let _ = delete_options::decode(data);
    let Some((&which, message)) = data.split_first() else { return };
    let mut kinds: Vec<(&str, &str)> = schema.kinds().collect();
    kinds.sort_unstable();
    let (api_version, kind) = kinds[usize::from(which) % kinds.len()];
    let Some(id) = schema.kind(api_version, kind) else { return };
    if let Ok(value) = codec::decode(schema, id, message) {
        let _ = codec::encode(schema, id, &value);
    }
});
