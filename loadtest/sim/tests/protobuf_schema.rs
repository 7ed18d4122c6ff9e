//! Generates the sim's protobuf schema table (`src/protobuf/schema.table`) from the project's
//! dependencies and fails when the checked-in table differs from what they say.
//!
//! The field numbers and wire types come from `k8s-pb` (prost messages generated from upstream's
//! `generated.proto`); the JSON names come from `k8s-openapi` (its deserializers list every
//! field's JSON name), matched to prost's snake_case names; the kinds come from `k8s-openapi`'s
//! `Resource` impls. Only messages reachable from a kind the sim serves are kept.
//!
//! After a dependency update: `BATCHFLEET_BLESS=1 cargo nextest run -p batchfleet-sim --test protobuf_schema`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use quote::ToTokens;

const TABLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/protobuf/schema.table");

/// Kinds the sim answers in protobuf besides its resources' objects and lists.
const EXTRA_ROOTS: &[(&str, &str)] = &[
    ("v1", "Status"),
    ("v1", "WatchEvent"),
    ("v1", "DeleteOptions"),
    ("policy/v1", "Eviction"),
    ("policy/v1beta1", "Eviction"),
];

#[derive(Debug, Clone)]
struct PbField {
    tag: u32,
    rust_name: String,
    label: &'static str,
    ty: String,
}

#[test]
fn schema_table_matches_the_dependencies() {
    let sources = dependency_sources();
    let openapi = OpenApi::read(&sources["k8s-openapi"].join("src/v1_37"));
    let messages = read_prost_messages(&sources["k8s-pb"].join("src"));
    let generated = render(&openapi, &messages);
    if std::env::var_os("BATCHFLEET_BLESS").is_some() {
        std::fs::write(TABLE, &generated).expect("write the schema table");
        return;
    }
    let checked_in = std::fs::read_to_string(TABLE).unwrap_or_default();
    if checked_in != generated {
        let first = checked_in.lines().zip(generated.lines()).position(|(a, b)| a != b);
        panic!(
            "{TABLE} is stale (first difference at line {first:?}); regenerate it with \
             BATCHFLEET_BLESS=1 cargo nextest run -p batchfleet-sim --test protobuf_schema"
        );
    }
}

/// The source directories of the named packages, from `cargo metadata`.
fn dependency_sources() -> HashMap<String, PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(&manifest)
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let mut found = HashMap::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap_or_default();
        if name == "k8s-pb" || name == "k8s-openapi" {
            let manifest = PathBuf::from(package["manifest_path"].as_str().expect("manifest_path"));
            found.insert(name.to_string(), manifest.parent().expect("package dir").to_path_buf());
        }
    }
    assert_eq!(found.len(), 2, "k8s-pb and k8s-openapi must both be dependencies: {found:?}");
    found
}

/// What `k8s-openapi` knows: each module's structs with their JSON field names, and the kinds.
struct OpenApi {
    /// (module, struct) → JSON field names.
    fields: HashMap<(String, String), Vec<String>>,
    /// (apiVersion, kind) → (module, struct).
    kinds: BTreeMap<(String, String), (String, String)>,
}

impl OpenApi {
    fn read(root: &Path) -> Self {
        let mut out = Self { fields: HashMap::new(), kinds: BTreeMap::new() };
        for file in rust_files(root) {
            let module = module_of(root, file.parent().expect("dir"));
            let text = std::fs::read_to_string(&file).expect("read k8s-openapi source");
            for (name, fields) in deserialized_structs(&text) {
                out.fields.insert((module.clone(), name), fields);
            }
            if let Some((ty, api_version, kind)) = resource_impl(&text) {
                out.kinds.insert((api_version, kind), (module.clone(), ty));
            }
        }
        out
    }
}

/// The JSON field names each `impl Deserialize for Name` passes to `deserialize_struct(…, &[…])`.
fn deserialized_structs(text: &str) -> Vec<(String, Vec<String>)> {
    const IMPL: &str = "crate::serde::Deserialize<'de> for ";
    let mut out = Vec::new();
    let mut rest = text;
    let mut current = None;
    loop {
        let next_impl = rest.find(IMPL);
        let next_call = rest.find("deserialize_struct(");
        match (next_impl, next_call) {
            (Some(i), c) if c.is_none_or(|c| i < c) => {
                rest = &rest[i + IMPL.len()..];
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                // The field-name enum's own impl is not a struct.
                if name != "Field" {
                    current = Some(name);
                }
            }
            (_, Some(c)) => {
                rest = &rest[c + "deserialize_struct(".len()..];
                let (Some(name), Some(open)) = (current.clone(), rest.find("&[")) else { continue };
                let Some(close) = rest[open..].find(']') else { continue };
                let list = &rest[open + 2..open + close];
                out.push((name, list.split(',').filter_map(first_string_literal).collect()));
            }
            _ => return out,
        }
    }
}

fn first_string_literal(text: &str) -> Option<String> {
    let start = text.find('"')? + 1;
    let len = text[start..].find('"')?;
    Some(text[start..start + len].to_string())
}

/// `impl crate::Resource for Job { const API_VERSION = "batch/v1"; … const KIND = "Job"; … }`.
fn resource_impl(text: &str) -> Option<(String, String, String)> {
    let at = text.find("impl crate::Resource for ")?;
    let rest = &text[at + "impl crate::Resource for ".len()..];
    let ty: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    let constant = |name: &str| {
        let at = rest.find(&format!("const {name}: &'static str = "))?;
        first_string_literal(&rest[at..])
    };
    Some((ty, constant("API_VERSION")?, constant("KIND")?))
}

fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `api/core/v1` → `api.core.v1`.
fn module_of(root: &Path, dir: &Path) -> String {
    let rel = dir.strip_prefix(root).expect("under root");
    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join(".")
}

/// Every prost message of `k8s-pb`, by full name (`api.core.v1.Pod`).
fn read_prost_messages(root: &Path) -> BTreeMap<String, Vec<PbField>> {
    let mut out = BTreeMap::new();
    for file in rust_files(root) {
        if file.file_name().is_none_or(|n| n != "mod.rs") {
            continue;
        }
        let module = module_of(root, file.parent().expect("dir"));
        let text = std::fs::read_to_string(&file).expect("read k8s-pb source");
        let parsed = syn::parse_file(&text).expect("k8s-pb parses");
        for item in parsed.items {
            let syn::Item::Struct(item) = item else { continue };
            let fields: Vec<PbField> = item.fields.iter().filter_map(|f| prost_field(&module, f)).collect();
            out.insert(format!("{module}.{}", item.ident), fields);
        }
    }
    out
}

fn prost_field(module: &str, field: &syn::Field) -> Option<PbField> {
    let attr = field.attrs.iter().find(|a| a.path().is_ident("prost"))?;
    let args = attr.meta.require_list().ok()?.tokens.to_string();
    let parts: Vec<String> = args.split(',').map(|p| p.trim().to_string()).collect();
    let tag =
        parts.iter().find_map(|p| p.strip_prefix("tag = ")).map(|t| t.trim_matches('"').parse().ok())??;
    let rust_name = field.ident.as_ref()?.to_string().trim_start_matches("r#").to_string();
    let rust_type = field.ty.to_token_stream().to_string().replace(' ', "");
    let kind = parts[0].as_str();
    let (label, ty) =
        if let Some(map) = kind.strip_prefix("btree_map = ").or_else(|| kind.strip_prefix("map = ")) {
            let spec =
                args[args.find(map).expect("map spec")..].split('"').nth(1).expect("map types").to_string();
            let (key, value) = spec.split_once(',').expect("key, value");
            let value = if value.trim() == "message" {
                message_ref(module, &rust_type)
            } else {
                value.trim().to_string()
            };
            ("map", format!("{} {value}", key.trim()))
        } else {
            let label = if parts.iter().any(|p| p == "repeated") { "rep" } else { "opt" };
            let ty = match kind {
                "message" => message_ref(module, &rust_type),
                "bytes = \"vec\"" => "bytes".to_string(),
                other => other.to_string(),
            };
            (label, ty)
        };
    Some(PbField { tag, rust_name, label, ty })
}

/// Resolves a field's Rust type to the full name of the message it holds.
fn message_ref(module: &str, rust_type: &str) -> String {
    // The innermost type argument: `Option<super::super::x::y::Name>` → `super::super::x::y::Name`.
    let inner = rust_type.rsplit('<').next().unwrap_or(rust_type).trim_end_matches(['>', ',']);
    let inner = inner.rsplit(',').next().unwrap_or(inner);
    let mut segments: Vec<&str> = inner.split("::").filter(|s| !s.is_empty()).collect();
    let name = segments.pop().expect("type name");
    let mut base: Vec<&str> = module.split('.').collect();
    let mut rest = Vec::new();
    for segment in segments {
        if segment == "super" {
            base.pop();
        } else {
            rest.push(segment);
        }
    }
    base.extend(rest);
    base.push(name);
    base.join(".")
}

fn normalized(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    for (i, part) in snake.split('_').enumerate() {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            if i == 0 {
                out.push(first);
            } else {
                out.extend(first.to_uppercase());
            }
            out.extend(chars);
        }
    }
    out
}

fn render(openapi: &OpenApi, messages: &BTreeMap<String, Vec<PbField>>) -> String {
    let served = batchfleet_sim::resources::Registry::default();
    let mut kinds = BTreeMap::new();
    // CustomResourceDefinitions stay JSON: their schemas (JSONSchemaProps and its "or" types)
    // have marshallers of their own that the table does not describe.
    let mut wanted: Vec<(String, String)> = served
        .all()
        .iter()
        .filter(|rt| rt.group != "apiextensions.k8s.io")
        .map(|rt| (rt.api_version(), rt.kind.clone()))
        .collect();
    wanted.extend(EXTRA_ROOTS.iter().map(|(v, k)| (v.to_string(), k.to_string())));
    for (api_version, kind) in wanted {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("core", &api_version));
        let group = group.split('.').next().unwrap_or(group);
        let candidates = [
            openapi
                .kinds
                .get(&(api_version.clone(), kind.clone()))
                .map(|(module, ty)| format!("{module}.{ty}")),
            // Versions k8s-openapi no longer has (policy/v1beta1) are still in k8s-pb.
            Some(format!("api.{group}.{version}.{kind}")),
            // Kinds without a Resource impl (Status, WatchEvent, DeleteOptions) live in meta/v1.
            Some(format!("apimachinery.pkg.apis.meta.v1.{kind}")),
        ];
        let message = candidates.into_iter().flatten().find(|m| messages.contains_key(m)).unwrap_or_default();
        assert!(messages.contains_key(&message), "no protobuf message {message} for {api_version} {kind}");
        let list = format!("{message}List");
        if messages.contains_key(&list) {
            kinds.insert((api_version.clone(), format!("{kind}List")), list);
        }
        kinds.insert((api_version, kind), message);
    }
    let mut reachable = BTreeSet::new();
    let mut stack: Vec<String> = kinds.values().cloned().collect();
    while let Some(name) = stack.pop() {
        if !reachable.insert(name.clone()) {
            continue;
        }
        for field in messages.get(&name).unwrap_or_else(|| panic!("unknown message {name}")) {
            let ty = field.ty.rsplit(' ').next().unwrap_or(&field.ty);
            if ty.contains('.') {
                stack.push(ty.to_string());
            }
        }
    }
    let mut out = String::from(
        "# Generated by loadtest/sim/tests/protobuf_schema.rs from k8s-pb and k8s-openapi; do not edit.\n\
         # K apiVersion kind message | M message | F tag jsonName opt|rep|map|inline type [valueType]\n",
    );
    for ((api_version, kind), message) in &kinds {
        out.push_str(&format!("K {api_version} {kind} {message}\n"));
    }
    for name in &reachable {
        out.push_str(&format!("M {name}\n"));
        let (module, ty) = name.rsplit_once('.').expect("module.Name");
        // prost renames acronyms (PodIP → PodIp), so structs are matched ignoring case.
        let json_names = openapi.fields.get(&(module.to_string(), ty.to_string())).or_else(|| {
            openapi
                .fields
                .iter()
                .find(|((m, t), _)| m == module && normalized(t) == normalized(ty))
                .map(|(_, f)| f)
        });
        let mut fields = messages[name].clone();
        fields.sort_by_key(|f| f.tag);
        for field in fields {
            let matched = json_names
                .and_then(|names| names.iter().find(|n| normalized(n) == normalized(&field.rust_name)));
            let line = match matched {
                Some(json) => format!("F {} {json} {} {}\n", field.tag, field.label, field.ty),
                // A Go struct embedded with `json:",inline"` is a message field in protobuf and
                // its fields are the parent's in JSON.
                None if json_names.is_some() && field.label == "opt" && field.ty.contains('.') => {
                    format!("F {} - inline {}\n", field.tag, field.ty)
                }
                // Messages only ever inlined (VolumeSource, ProbeHandler) have no struct of their
                // own in k8s-openapi: their names are their module's.
                None if json_names.is_none() => {
                    let json = openapi
                        .fields
                        .iter()
                        .filter(|((m, _), _)| m == module)
                        .flat_map(|(_, names)| names)
                        .find(|n| normalized(n) == normalized(&field.rust_name))
                        .cloned()
                        .unwrap_or_else(|| lower_camel(&field.rust_name));
                    format!("F {} {json} {} {}\n", field.tag, field.label, field.ty)
                }
                None => {
                    let json = lower_camel(&field.rust_name);
                    eprintln!("no JSON name for {name}.{}: using {json}", field.rust_name);
                    format!("F {} {json} {} {}\n", field.tag, field.label, field.ty)
                }
            };
            out.push_str(&line);
        }
    }
    out
}
