//! Edits of a FieldsV1 set in place, as [`super::managed`] writes sets: an update that changes
//! one field of one manager's set need not decode every set of the object into paths and
//! encode them again. Each edit gives the value `encode_fields` would give for the decoded set
//! with that path added or removed, provided the value is [`canonical`] to begin with.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::managed::Element;

/// The marker of a set member that also has members below it.
const ITSELF: &str = ".";

/// Where an element sorts among its siblings: `f:` fields, then `k:` items, then `v:` members,
/// then anything else, each group by its text.
pub(crate) fn element_order(a: &str, b: &str) -> Ordering {
    (element_group(a), a).cmp(&(element_group(b), b))
}

/// The group of [`element_order`].
pub(crate) fn element_group(k: &str) -> u8 {
    match k.get(..2) {
        Some("f:") => 0,
        Some("k:") => 1,
        Some("v:") => 2,
        _ => 3,
    }
}

/// Whether `set` is exactly what `encode_fields` writes for the set it decodes to: objects only,
/// siblings in [`element_order`], `"."` only first, as `{}`, beside other members, and never at
/// the root.
pub(crate) fn canonical(set: &Value) -> bool {
    let Value::Object(root) = set else { return false };
    !root.contains_key(ITSELF) && canonical_children(root)
}

fn canonical_children(node: &Map<String, Value>) -> bool {
    let mut previous: Option<&str> = None;
    for (k, v) in node {
        let Value::Object(child) = v else { return false };
        if k == ITSELF {
            if previous.is_some() || !child.is_empty() || node.len() < 2 {
                return false;
            }
            continue;
        }
        if previous.is_some_and(|p| p != ITSELF && element_order(p, k) != Ordering::Less) {
            return false;
        }
        if !canonical_children(child) {
            return false;
        }
        previous = Some(k);
    }
    true
}

/// Adds `path` to the canonical `set`.
pub(crate) fn insert(set: &mut Value, path: &[Element]) {
    let Value::Object(root) = set else { return };
    let mut node = root;
    // The root is never a member itself; a node made for this path is not one either.
    let mut member_if_empty = false;
    for (i, element) in path.iter().enumerate() {
        if member_if_empty && node.is_empty() {
            // A member that gets members below it keeps itself as ".".
            node.insert(ITSELF.into(), Value::Object(Map::new()));
        }
        member_if_empty = true;
        if !node.contains_key(element.as_str()) {
            let at = node
                .keys()
                .position(|k| k != ITSELF && element_order(k, element) == Ordering::Greater)
                .unwrap_or(node.len());
            node.shift_insert(at, element.clone(), Value::Object(Map::new()));
            if i + 1 < path.len() {
                member_if_empty = false;
            }
        }
        let Some(Value::Object(child)) = node.get_mut(element.as_str()) else { return };
        node = child;
    }
    if !node.is_empty() && !node.contains_key(ITSELF) && member_if_empty {
        node.shift_insert(0, ITSELF.into(), Value::Object(Map::new()));
    }
}

/// Removes `path` from the canonical `set`: its node stops being a member, and nodes left with
/// no member below them go.
pub(crate) fn remove(set: &mut Value, path: &[Element]) {
    if let (Value::Object(root), Some((first, rest))) = (set, path.split_first()) {
        remove_below(root, first, rest);
    }
}

/// Removes `rest` under `node`'s child `element`; true when that child went away.
fn remove_below(node: &mut Map<String, Value>, element: &str, rest: &[Element]) -> bool {
    let Some(Value::Object(child)) = node.get_mut(element) else { return false };
    match rest.split_first() {
        None if child.is_empty() => {}
        None => {
            child.shift_remove(ITSELF);
            return false;
        }
        Some((next, rest)) => {
            if !remove_below(child, next, rest) {
                return false;
            }
            match child.len() {
                0 => {}
                1 if child.contains_key(ITSELF) => {
                    child.clear();
                    return false;
                }
                _ => return false,
            }
        }
    }
    node.shift_remove(element);
    true
}
