//! What the namespace registry strategy does on every write (`SetDefaults_Namespace` and
//! `Canonicalize`): the immutable-by-construction `kubernetes.io/metadata.name` label.

use serde_json::{Value, json};

use super::meta::{self, meta_mut};

pub const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Sets `kubernetes.io/metadata.name` to the namespace's name (overwriting any other value, and
/// restoring it if a write removed it). A name still to be generated is left alone.
pub fn canonicalize(obj: &mut Value) {
    let name = meta::name(obj).to_string();
    if name.is_empty() {
        return;
    }
    let m = meta_mut(obj);
    let labels = m.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(l) = labels.as_object_mut() {
        l.insert(METADATA_NAME_LABEL.into(), json!(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TestNamespaceStrategy / SetDefaults_Namespace: the label follows the name, whatever the
    /// request said.
    #[test]
    fn the_metadata_name_label_follows_the_name() {
        let mut ns = json!({"metadata": {"name": "demo"}});
        canonicalize(&mut ns);
        assert_eq!(ns["metadata"]["labels"], json!({METADATA_NAME_LABEL: "demo"}));
        let mut ns =
            json!({"metadata": {"name": "demo", "labels": {METADATA_NAME_LABEL: "other", "a": "b"}}});
        canonicalize(&mut ns);
        assert_eq!(ns["metadata"]["labels"], json!({METADATA_NAME_LABEL: "demo", "a": "b"}));
        let mut unnamed = json!({"metadata": {"generateName": "x-"}});
        canonicalize(&mut unnamed);
        assert!(unnamed["metadata"].get("labels").is_none());
    }
}
