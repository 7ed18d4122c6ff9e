//! docs/ that cannot drift:
//!
//! - `docs/configuration.md` is generated from every binary's `--help` (and every subcommand's):
//!   the test regenerates it and fails when the file differs, saying how to update it.
//! - The how-tos' commands work as written: every ```` ```sh ```` block preceded by
//!   `<!-- sim-test -->` in docs/operations.md and docs/troubleshooting.md runs, in order, with
//!   bash against a sim cluster and a fleet (namespace `batchfleet`, workers `fleet-worker-0` and
//!   `fleet-worker-1`, `FLEET_ADMIN` set, `AUDIT_LOG` the sim's audit log, the binaries and
//!   kubectl on `PATH`), from the repository's root; each must exit 0.
//! - Every kustomization the docs show (```` ```yaml ```` blocks preceded by
//!   `<!-- kustomize-test -->` in docs/operations.md and docs/security.md: a `kustomization.yaml`
//!   of one's own beside a checkout of batchfleet, and the files it names) builds with
//!   `kubectl kustomize`, with the objects of every component it lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use batchfleet_deploy_tests::{
    Fleet, FleetSpec, OwnKustomization, Sim, Stack, describe, documents, kubectl, kubectl_ok, marked_blocks,
    marked_blocks_of, root, run_kubectl,
};
use batchfleet_sim::SimConfig;
use batchfleet_sim::testing::{wait_until, workspace_binary};

/// The binaries, by package, with what they are.
const BINARIES: &[(&str, &str, &str)] = &[
    (
        "batchfleet-coordinator",
        "fleet-coordinator",
        "The leader-elected coordinator (Deployment `fleet-coordinator`).",
    ),
    (
        "batchfleet-worker",
        "fleet-worker",
        "A worker (StatefulSet `fleet-worker`), or `--standalone` the whole fleet in one process.",
    ),
    ("batchfleet-fleetctl", "fleetctl", "The operator's CLI against the coordinators' admin API."),
    (
        "batchfleet-loadtest",
        "loadtest",
        "The sim cluster, the quickstart and the benchmarks (development only; in the image for convenience).",
    ),
];

const UPDATE: &str = "BATCHFLEET_UPDATE_DOCS";

/// `BINARY ARGS… --help`, with no environment: clap prints an environment variable's current
/// value in the help, which must not leak into the reference.
fn help(binary: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(binary)
        .args(args)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap_or_else(|e| panic!("{} --help: {e}", binary.display()));
    assert!(out.status.success(), "{} {args:?} --help failed", binary.display());
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line == "Commands:" {
            in_commands = true;
            continue;
        }
        if in_commands {
            if !line.starts_with("  ") {
                break;
            }
            if let Some(name) = line.split_whitespace().next()
                && line.starts_with("  ")
                && !line.starts_with("   ")
                && name != "help"
            {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// `(variable, flag)` of every `[env: NAME=]` in a help text.
fn env_vars(help: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut flag = String::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('-') {
            flag = trimmed
                .split([' ', ','])
                .find(|w| w.starts_with("--"))
                .unwrap_or_else(|| trimmed.split(' ').next().unwrap_or_default())
                .to_string();
        }
        let mut rest = line;
        while let Some(at) = rest.find("[env: ") {
            let after = &rest[at + 6..];
            let name = after.split('=').next().unwrap_or_default();
            out.push((name.to_string(), flag.clone()));
            rest = after;
        }
    }
    out
}

/// docs/configuration.md as the binaries describe themselves now.
fn generate() -> String {
    let mut sections = String::new();
    let mut vars: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (package, name, what) in BINARIES {
        let binary = workspace_binary(package, name);
        let top = help(&binary, &[]);
        sections.push_str(&format!("## `{name}`\n\n{what}\n\n```text\n{top}```\n\n"));
        for (var, flag) in env_vars(&top) {
            vars.entry(var).or_default().push(format!("`{name} {flag}`"));
        }
        for sub in subcommands(&top) {
            let text = help(&binary, &[&sub]);
            sections.push_str(&format!("### `{name} {sub}`\n\n```text\n{text}```\n\n"));
            for (var, flag) in env_vars(&text) {
                let entry = format!("`{name} {sub} {flag}`");
                let list = vars.entry(var).or_default();
                // fleetctl's --admin is global: once per binary is enough.
                if !list.iter().any(|e| e == &format!("`{name} {flag}`")) {
                    list.push(entry);
                }
            }
        }
    }
    let mut table = String::from("| variable | flag it sets |\n|---|---|\n");
    for (var, flags) in &vars {
        table.push_str(&format!("| `{var}` | {} |\n", flags.join(", ")));
    }
    format!(
        "# Configuration reference\n\n\
         <!-- Generated from each binary's --help by deploy/tests/tests/docs.rs; do not edit.\n     \
         Update: {UPDATE}=1 cargo nextest run -p batchfleet-deploy-tests --test docs -->\n\n\
         Every flag and environment variable of every binary, as its `--help` prints it. A flag \
         given on the command line wins over its environment variable, which wins over the \
         default. The manifests in `deploy/` set the per-pod values through the environment \
         (`FLEET_WORKER_ID` and `FLEET_COORDINATOR_ID` from the pod name, `POD_NAMESPACE` for the \
         store's namespace, `POD_IP` for the leader's advertised address) and the rest as flags. \
         Every flag of `fleet-coordinator`, `fleet-worker` and `fleetctl` has an environment \
         variable but fleetctl's per-invocation arguments (`schedule --cronjob`, `--time-zone`, `--from`, \
         `--count`; `rebalance --dry-run`); the `loadtest` harness's flags have none but \
         `--log-format` (deploy/tests/tests/cli_env.rs pins this). \
         `RUST_LOG` (e.g. `info,batchfleet_worker=debug`) sets the log level of every binary, \
         which logs to stderr in `--log-format text` or `json` (`FLEET_LOG_FORMAT`; \
         docs/operations.md#logs).\n\n\
         ## Environment variables\n\n{table}\n{sections}"
    )
    .trim_end()
    .to_string()
        + "\n"
}

#[test]
fn the_configuration_reference_is_generated_from_every_binarys_help() {
    let path = root().join("docs/configuration.md");
    let generated = generate();
    for expected in
        ["`FLEET_COORDINATOR`", "`POD_NAMESPACE`", "`KUBECONFIG`", "### `fleetctl drain`", "--stall-timeout"]
    {
        assert!(generated.contains(expected), "the reference lacks {expected}");
    }
    if std::env::var_os(UPDATE).is_some() {
        std::fs::write(&path, &generated).expect("write docs/configuration.md");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != generated {
        let first = current.lines().zip(generated.lines()).position(|(a, b)| a != b);
        let line = first.unwrap_or_else(|| current.lines().count().min(generated.lines().count()));
        panic!(
            "docs/configuration.md is out of date with the binaries' --help (first difference at line {}):\n  \
             in the file: {:?}\n  generated:   {:?}\nUpdate it with:\n  {UPDATE}=1 cargo nextest run -p batchfleet-deploy-tests --test docs",
            line + 1,
            current.lines().nth(line).unwrap_or("<end of file>"),
            generated.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn env_vars_and_subcommands_are_read_from_clap_help() {
    let help = "Usage: x\n\nCommands:\n  status  The leader\n          more\n  help    Print\n\nOptions:\n      --admin <ADMIN>  Addresses [env: FLEET_ADMIN=] [default: x]\n  -o, --output <OUTPUT>\n          Format\n          \n          [env: OUT=]\n";
    assert_eq!(subcommands(help), ["status"]);
    assert_eq!(
        env_vars(help),
        [("FLEET_ADMIN".to_string(), "--admin".to_string()), ("OUT".to_string(), "--output".to_string())]
    );
}

#[test]
fn marked_blocks_are_found_and_unindented() {
    let md = "text\n<!-- sim-test -->\n```sh\nfleetctl status\n```\n\n1. step\n\n   <!-- sim-test -->\n   ```sh\n   kubectl get ns\n   echo ok\n   ```\n```sh\nnot marked\n```\n";
    assert_eq!(marked_blocks(md, "sim-test"), ["fleetctl status", "kubectl get ns\necho ok"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_how_tos_commands_work_as_written_against_the_sim() {
    let sim = Sim::start(SimConfig { nodes: 2, ..SimConfig::default() }).await;
    let kubeconfig = sim.kubeconfig();
    kubectl_ok(Some(&kubeconfig), &["create", "namespace", "batchfleet"]);
    let examples = root().join("deploy/tests/fixtures/docs-examples.yaml");
    kubectl_ok(Some(&kubeconfig), &["apply", "-f", &examples.to_string_lossy()]);
    let fleet = Fleet::start(
        &sim,
        FleetSpec {
            namespace: "batchfleet",
            shards: 16,
            coordinators: &["fleet-coordinator-0"],
            workers: &["fleet-worker-0", "fleet-worker-1"],
            worker_args: Vec::new(),
            coordinator_args: Vec::new(),
        },
    )
    .await;
    // The example Job ran, so its events and pods are there to look at.
    wait_until("the example Job completes", Duration::from_secs(60), || async {
        let out = batchfleet_deploy_tests::run_kubectl(
            Some(&kubeconfig),
            &["-n", "team-a", "get", "job", "report", "-o", "jsonpath={.status.succeeded}"],
        );
        (String::from_utf8_lossy(&out.stdout) == "2").then_some(())
    })
    .await;

    let bin_dir: PathBuf =
        workspace_binary("batchfleet-fleetctl", "fleetctl").parent().expect("bin dir").to_path_buf();
    let kubectl_dir = kubectl().parent().map(Path::to_path_buf).unwrap_or_default();
    let path = format!(
        "{}:{}:{}",
        bin_dir.display(),
        kubectl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for doc in ["docs/operations.md", "docs/troubleshooting.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("read the doc");
        let blocks = marked_blocks(&text, "sim-test");
        assert!(blocks.len() >= 3, "{doc}: its runnable how-tos are marked");
        for block in blocks {
            let child = tokio::process::Command::new("bash")
                .args(["-euo", "pipefail", "-c", &block])
                .current_dir(root())
                .env("PATH", &path)
                .env("KUBECONFIG", &kubeconfig)
                .env("KUBECACHEDIR", kubeconfig.with_file_name("kube-cache"))
                .env("FLEET_ADMIN", &fleet.admin)
                // The test fleet is plaintext (`Fleet::start`); the how-tos are written for TLS
                // flags given by the operator's environment.
                .env("FLEET_INSECURE", "true")
                .env("AUDIT_LOG", sim.audit_log())
                .kill_on_drop(true)
                .output();
            let out = tokio::time::timeout(Duration::from_secs(120), child)
                .await
                .unwrap_or_else(|_| panic!("{doc}: timed out after 120s:\n{block}"))
                .expect("bash runs");
            assert!(
                out.status.success(),
                "{doc}: this block failed ({}):\n{block}\n--- stdout:\n{}\n--- stderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 10, "{ran} blocks ran");
}

/// The files of the kustomizations a doc shows: each marked block is `my-fleet/kustomization.yaml`,
/// or the file its first line names (`# my-fleet/worker-3-certificate.yaml`), which belongs to
/// the next kustomization. `(kustomization, [(file, text)])` in order.
fn shown_kustomizations(markdown: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    for block in marked_blocks_of(markdown, "kustomize-test", "yaml") {
        let named = block.lines().next().and_then(|l| l.strip_prefix("# my-fleet/")).map(str::trim);
        match named {
            Some(name) if name != "kustomization.yaml" => files.push((name.to_string(), block.clone())),
            _ => out.push((block, std::mem::take(&mut files))),
        }
    }
    assert!(files.is_empty(), "a file shown after the last kustomization: {files:?}");
    out
}

/// Every kustomization docs/operations.md and docs/security.md show builds as written, with the
/// objects of every component it lists, the image it names, and (with the `tls` component) a
/// worker certificate per replica, each mounted.
#[test]
fn every_kustomization_the_docs_show_builds_with_its_components() {
    let base: std::collections::BTreeSet<String> = Stack::new("base").build().iter().map(describe).collect();
    let mut stacks_etcd_monitoring_tls = false;
    let mut shown = 0;
    for doc in ["docs/operations.md", "docs/security.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("read the doc");
        for (block, files) in shown_kustomizations(&text) {
            shown += 1;
            let own = OwnKustomization::new(&block);
            for (name, text) in &files {
                own.write(name, text);
            }
            let out = run_kubectl(None, &["kustomize", &own.path().to_string_lossy()]);
            assert!(
                out.status.success(),
                "{doc}: this kustomization does not build:\n{block}\n--- kubectl:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let objects = documents(&String::from_utf8_lossy(&out.stdout));
            let built: std::collections::BTreeSet<String> = objects.iter().map(describe).collect();
            assert!(built.contains("StatefulSet/fleet-worker"), "{doc}: {block}: no fleet");
            let kustomization = documents(&block).remove(0);
            let listed = kustomization["components"].as_array().into_iter().flatten();
            let mut names = Vec::new();
            for path in listed.filter_map(|c| c.as_str()) {
                let name = path.strip_prefix("../batchfleet/deploy/components/").unwrap_or_else(|| {
                    let expected = "../batchfleet/deploy/components/NAME";
                    panic!("{doc}: {block}: components are listed as {expected}, not {path}")
                });
                let added: Vec<String> = Stack::new(&format!("base+{name}"))
                    .build()
                    .iter()
                    .map(describe)
                    .filter(|o| !base.contains(o))
                    .collect();
                let missing: Vec<&String> = added.iter().filter(|o| !built.contains(*o)).collect();
                assert!(missing.is_empty(), "{doc}: {block}: {name}'s {missing:?} are not built");
                names.push(name);
            }
            // An image the kustomization names is the one its pods run.
            let containers = objects.iter().flat_map(|o| {
                o["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default()
            });
            let images: Vec<String> =
                containers.filter_map(|c| c["image"].as_str().map(String::from)).collect();
            for image in kustomization["images"].as_array().into_iter().flatten() {
                let wanted = format!(
                    "{}:{}",
                    image["newName"].as_str().unwrap_or_default(),
                    image["newTag"].as_str().unwrap_or_default()
                );
                assert!(images.contains(&wanted), "{doc}: {block}: no container runs {wanted}: {images:?}");
            }
            if names.contains(&"tls") {
                every_worker_has_its_certificate_mounted(&objects, &format!("{doc}: {block}"));
            }
            stacks_etcd_monitoring_tls |= ["etcd", "monitoring", "tls"].iter().all(|c| names.contains(c));
        }
    }
    assert!(shown >= 4, "the docs' kustomizations are marked");
    assert!(stacks_etcd_monitoring_tls, "the install guide shows etcd, monitoring and tls stacked");
}

/// With the `tls` component: a Certificate with Common Name `fleet-worker-N` for each of the
/// StatefulSet's replicas, and each one's Secret (and no other) in the workers' projected volume.
fn every_worker_has_its_certificate_mounted(objects: &[serde_json::Value], what: &str) {
    let sts = objects.iter().find(|o| describe(o) == "StatefulSet/fleet-worker").expect("the workers");
    let replicas = sts["spec"]["replicas"].as_u64().expect("replicas");
    let volumes = sts["spec"]["template"]["spec"]["volumes"].as_array().expect("volumes");
    let tls = volumes.iter().find(|v| v["name"] == "tls").expect("the tls volume");
    let mut mounted: Vec<&str> = tls["projected"]["sources"]
        .as_array()
        .expect("a projected volume")
        .iter()
        .filter_map(|s| s["secret"]["name"].as_str())
        .collect();
    mounted.sort();
    let mut wanted = Vec::new();
    for ordinal in 0..replicas {
        let cert = objects
            .iter()
            .find(|o| {
                o["kind"] == "Certificate" && o["spec"]["commonName"] == format!("fleet-worker-{ordinal}")
            })
            .unwrap_or_else(|| panic!("{what}: no certificate for fleet-worker-{ordinal} of {replicas}"));
        wanted.push(cert["spec"]["secretName"].as_str().expect("secretName"));
    }
    wanted.sort();
    assert_eq!(mounted, wanted, "{what}: the Secrets mounted are those of the {replicas} workers");
}
