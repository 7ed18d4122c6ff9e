//! The image as a user gets it: `scripts/image` writes the archive (a no-op when it is fresh;
//! `scripts/test` builds it before the suite), and these tests take it apart with the tools a user
//! has, umoci, podman and containerd's ctr (`scripts/setup` installs them):
//!
//! - the tag is the workspace version, and deploy/ runs the image the archive is tagged with;
//! - `podman load` and `ctr image import` take the archive under both its names;
//! - deploy/Containerfile declares what the archive's configuration says (user, entrypoint,
//!   environment, ports, labels) and builds its file system with `scripts/image --rootfs`, whose
//!   file list is the archive's;
//! - a fleet (a coordinator, three workers) runs from the unpacked root file system, chrooted as
//!   user 65532 (as root; otherwise each binary is run by its path in it), against the sim: its
//!   kubeconfig names the API server `localhost`, resolved by the static binaries through the
//!   image's /etc/nsswitch.conf and the host's /etc/hosts placed in the rootfs as a kubelet
//!   mounts it. A Job completes, `fleetctl status` from the image answers, and every binary's
//!   `--version` is the tag. (Not `podman run`: on the development machines, a gVisor sandbox,
//!   crun cannot set `RLIMIT_NOFILE`, so no container starts; a chroot runs the same files.)

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use batchfleet_deploy_tests::{Process, Sim, build, free_port, http_get, kustomization, log_tail, root};
use batchfleet_sim::SimConfig;
use batchfleet_sim::testing::wait_until;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// The workspace version (this crate's is the workspace's).
const VERSION: &str = env!("CARGO_PKG_VERSION");
const BINARIES: [&str; 4] = ["fleet-coordinator", "fleet-worker", "fleetctl", "loadtest"];

fn ok(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Output {
    let program = program.as_ref();
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", program.to_string_lossy()))
}

/// `scripts/image ARGS`, which must succeed; its stdout.
fn scripts_image(args: &[&str]) -> String {
    ok(&format!("scripts/image {}", args.join(" ")), run(root().join("scripts/image"), args))
}

/// The tools the test needs, or a message saying which are missing (the test then skips:
/// `scripts/setup` installs them).
fn missing_tools(tools: &[&str]) -> Option<String> {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    (!missing.is_empty())
        .then(|| format!("SKIPPED: {} not installed (scripts/setup installs it)", missing.join(", ")))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The archive, built (or found fresh) by `scripts/image`.
fn archive() -> PathBuf {
    scripts_image(&[]);
    let path = root().join(format!("target/image/batchfleet-{VERSION}.tar"));
    assert!(path.is_file(), "scripts/image wrote no {}", path.display());
    path
}

/// The archive taken apart: its OCI layout, Docker's manifest.json, the image configuration, and
/// the root file system `umoci unpack` makes of it.
struct Unpacked {
    dir: tempfile::TempDir,
    index: Value,
    docker_manifest: Value,
    config: Value,
    rootfs: PathBuf,
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn unpack(archive: &Path) -> Unpacked {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = dir.path().join("layout");
    std::fs::create_dir(&layout).expect("layout dir");
    ok("tar -x", run("tar", &["-xf", &archive.to_string_lossy(), "-C", &layout.to_string_lossy()]));
    let index = read_json(&layout.join("index.json"));
    let docker_manifest = read_json(&layout.join("manifest.json"));
    let config_path = docker_manifest[0]["Config"].as_str().expect("manifest.json's Config");
    let config = read_json(&layout.join(config_path));
    let bundle = dir.path().join("bundle");
    let image = format!("{}:batchfleet:{VERSION}", layout.display());
    let mut umoci = vec!["unpack", "--image", &image];
    if !is_root() {
        umoci.push("--rootless");
    }
    let bundle_arg = bundle.to_string_lossy().into_owned();
    umoci.push(&bundle_arg);
    ok("umoci unpack", run("umoci", &umoci));
    Unpacked { rootfs: bundle.join("rootfs"), dir, index, docker_manifest, config }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect()
}

#[test]
fn the_tag_is_the_workspace_version_and_deploy_runs_the_image_so_tagged() {
    if let Some(skip) = missing_tools(&["umoci"]) {
        eprintln!("{skip}");
        return;
    }
    let manifests_ref = scripts_image(&["--print-ref"]).trim().to_string();
    let (_, tag) = manifests_ref.rsplit_once(':').expect("--print-ref prints NAME:TAG");
    assert_eq!(tag, VERSION, "deploy/base's image tag is not the workspace version");
    // Every container of the base runs that image.
    for obj in build(&kustomization("base")) {
        for c in obj["spec"]["template"]["spec"]["containers"].as_array().into_iter().flatten() {
            assert_eq!(
                c["image"],
                manifests_ref.as_str(),
                "{}'s container {}",
                obj["metadata"]["name"],
                c["name"]
            );
        }
    }
    let unpacked = unpack(&archive());
    let expected = vec![format!("batchfleet:{VERSION}"), manifests_ref.clone()];
    assert_eq!(strings(&unpacked.docker_manifest[0]["RepoTags"]), expected, "manifest.json's RepoTags");
    let entries = unpacked.index["manifests"].as_array().expect("index.json's manifests");
    let annotation = |key: &str| -> Vec<String> {
        entries.iter().map(|e| e["annotations"][key].as_str().unwrap_or_default().to_string()).collect()
    };
    assert_eq!(annotation("org.opencontainers.image.ref.name"), expected, "index.json's ref names");
    assert_eq!(
        annotation("io.containerd.image.name"),
        vec![format!("docker.io/library/batchfleet:{VERSION}"), manifests_ref],
        "index.json's containerd names"
    );
}

/// The final stage of deploy/Containerfile: its instructions (continuation lines joined), and
/// whether the build stage assembles the root file system with `scripts/image --rootfs /rootfs`.
fn containerfile_final_stage() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("deploy/Containerfile")).expect("deploy/Containerfile");
    let joined = text.replace("\\\n", " ");
    let instructions: Vec<(String, String)> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (word, rest) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (word.to_uppercase(), rest.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect();
    let last_from = instructions.iter().rposition(|(w, _)| w == "FROM").expect("a FROM");
    let build_stage = &instructions[..last_from];
    assert!(
        build_stage.iter().any(|(w, rest)| w == "RUN" && rest.ends_with("scripts/image --rootfs /rootfs")),
        "the Containerfile's build stage must assemble the root file system with `scripts/image --rootfs /rootfs`"
    );
    instructions[last_from..].to_vec()
}

/// Every path of a root file system with its type, mode, owner and (for files) size.
fn file_list(rootfs: &Path, owners: bool) -> BTreeMap<String, String> {
    fn walk(dir: &Path, base: &Path, owners: bool, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read_dir").flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let meta = std::fs::symlink_metadata(entry.path()).expect("metadata");
            let kind = if meta.is_dir() {
                "dir".to_string()
            } else if meta.is_file() {
                format!("file {} bytes", meta.len())
            } else {
                "other".to_string()
            };
            let owner = if owners { format!(" {}:{}", meta.uid(), meta.gid()) } else { String::new() };
            let path =
                entry.path().strip_prefix(base).expect("under the rootfs").to_string_lossy().into_owned();
            out.insert(path, format!("{kind} {:o}{owner}", meta.mode() & 0o7777));
            if meta.is_dir() {
                walk(&entry.path(), base, owners, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(rootfs, rootfs, owners, &mut out);
    out
}

#[test]
fn the_containerfile_declares_the_archives_layout() {
    if let Some(skip) = missing_tools(&["umoci"]) {
        eprintln!("{skip}");
        return;
    }
    let stage = containerfile_final_stage();
    let get = |word: &str| -> Vec<String> {
        stage.iter().filter(|(w, _)| w == word).map(|(_, rest)| rest.clone()).collect()
    };
    assert_eq!(get("FROM"), vec!["scratch"], "the Containerfile's image has no base");
    assert_eq!(get("COPY"), vec!["--from=build /rootfs/ /"], "the one COPY: the assembled root file system");
    let unpacked = unpack(&archive());
    let config = &unpacked.config["config"];
    assert_eq!(get("USER"), vec![config["User"].as_str().expect("User").to_string()], "USER");
    let entrypoint: Vec<Value> =
        get("ENTRYPOINT").iter().map(|e| serde_json::from_str(e).expect("ENTRYPOINT in JSON form")).collect();
    assert_eq!(entrypoint, vec![config["Entrypoint"].clone()], "ENTRYPOINT");
    assert_eq!(get("ENV"), strings(&config["Env"]), "ENV");
    let exposed: BTreeSet<String> = get("EXPOSE")
        .iter()
        .flat_map(|e| e.split_whitespace().map(|p| format!("{p}/tcp")).collect::<Vec<_>>())
        .collect();
    let config_ports: BTreeSet<String> =
        config["ExposedPorts"].as_object().expect("ExposedPorts").keys().cloned().collect();
    assert_eq!(exposed, config_ports, "EXPOSE");
    let labels: BTreeMap<String, String> = get("LABEL")
        .iter()
        .flat_map(|l| {
            // key="value with spaces" pairs
            let mut out = Vec::new();
            let mut rest = l.as_str();
            while let Some((key, after)) = rest.trim_start().split_once("=\"") {
                let (value, tail) = after.split_once('"').expect("a closing quote");
                out.push((key.to_string(), value.to_string()));
                rest = tail;
            }
            out
        })
        .collect();
    let config_labels: BTreeMap<String, String> = config["Labels"]
        .as_object()
        .expect("Labels")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(labels, config_labels, "LABEL");

    // The file system the Containerfile copies is the archive's: same paths, types, modes, sizes
    // and (as root, when both could set them) owners.
    let dir = tempfile::tempdir().expect("tempdir");
    let rootfs = dir.path().join("rootfs");
    scripts_image(&["--rootfs", &rootfs.to_string_lossy()]);
    let owners = is_root();
    let archived = file_list(&unpacked.rootfs, owners);
    assert_eq!(file_list(&rootfs, owners), archived, "scripts/image --rootfs against the archive's layer");
    for bin in BINARIES {
        assert!(archived.contains_key(&format!("usr/local/bin/{bin}")), "{bin} in the image");
    }
    for file in ["etc/passwd", "etc/group", "etc/nsswitch.conf", "etc/ssl/certs/ca-certificates.crt"] {
        assert!(archived.contains_key(file), "{file} in the image");
    }
    let passwd = std::fs::read_to_string(unpacked.rootfs.join("etc/passwd")).expect("etc/passwd");
    assert!(
        passwd.lines().any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "user 65532 in /etc/passwd:\n{passwd}"
    );
    let group = std::fs::read_to_string(unpacked.rootfs.join("etc/group")).expect("etc/group");
    assert!(group.lines().any(|l| l == "nonroot:x:65532:"), "group 65532 in /etc/group:\n{group}");
    drop(unpacked.dir);
}

#[test]
fn podman_and_containerd_load_the_archive_under_both_names() {
    if let Some(skip) = missing_tools(&["podman", "containerd", "ctr"]) {
        eprintln!("{skip}");
        return;
    }
    let archive = archive();
    let manifests_ref = scripts_image(&["--print-ref"]).trim().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = |p: &str| dir.path().join(p).to_string_lossy().into_owned();

    // podman with storage of its own (vfs: no overlay mount needed).
    let (storage_root, runroot) = (path("podman/root"), path("podman/run"));
    let podman = ["--root", &storage_root, "--runroot", &runroot, "--storage-driver", "vfs"];
    ok("podman load", run("podman", &[&podman[..], &["load", "-i", &archive.to_string_lossy()]].concat()));
    let images = ok(
        "podman images",
        run("podman", &[&podman[..], &["images", "--format", "{{.Repository}}:{{.Tag}}"]].concat()),
    );
    let loaded: BTreeSet<&str> = images.lines().collect();
    let expected = BTreeSet::from([format!("localhost/batchfleet:{VERSION}"), manifests_ref.clone()]);
    assert_eq!(loaded, expected.iter().map(String::as_str).collect(), "podman's images");

    // containerd of its own, in the namespace the kubelet uses.
    let config = path("containerd.toml");
    let socket = path("containerd/sock");
    std::fs::write(
        &config,
        format!(
            "version = 2\nroot = \"{}\"\nstate = \"{}\"\n[grpc]\n  address = \"{socket}\"\n",
            path("containerd/root"),
            path("containerd/state")
        ),
    )
    .expect("containerd's config");
    let log = std::fs::File::create(path("containerd.log")).expect("containerd's log");
    let mut containerd = Command::new("containerd")
        .args(["--config", &config])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("containerd starts");
    let ctr =
        |args: &[&str]| run("ctr", &[&["--address", &socket, "--namespace", "k8s.io"][..], args].concat());
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while !ctr(&["version"]).status.success() {
        assert!(
            std::time::Instant::now() < end,
            "containerd did not serve:\n{}",
            log_tail(Path::new(&path("containerd.log")), 30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let imported = ctr(&["images", "import", "--no-unpack", &archive.to_string_lossy()]);
    let names = ctr(&["images", "ls", "-q"]);
    containerd.kill().expect("containerd stops");
    containerd.wait().expect("reaped");
    ok("ctr images import", imported);
    let names = ok("ctr images ls", names);
    // The kubelet's image service adds the config's digest as a name of its own.
    assert_eq!(
        names.lines().filter(|n| !n.starts_with("sha256:")).collect::<BTreeSet<_>>(),
        BTreeSet::from([format!("docker.io/library/batchfleet:{VERSION}").as_str(), manifests_ref.as_str()]),
        "containerd's images"
    );
}

/// Runs the image's binaries: chrooted into the unpacked rootfs as user 65532 when the test runs
/// as root, else by their path in it (no chroot without root).
struct ImageRunner {
    rootfs: PathBuf,
    chroot: bool,
}

impl ImageRunner {
    /// A command running `/usr/local/bin/NAME` of the image.
    fn command(&self, name: &str) -> tokio::process::Command {
        let inside = format!("/usr/local/bin/{name}");
        if self.chroot {
            let mut c = tokio::process::Command::new("chroot");
            c.arg("--userspec=65532:65532").arg(&self.rootfs).arg(inside);
            // The image's environment, none of the host's (PATH also finds chroot itself).
            c.env_clear().env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
            c
        } else {
            tokio::process::Command::new(self.rootfs.join(inside.trim_start_matches('/')))
        }
    }

    /// How the binaries see the image's path `inside`.
    fn path(&self, inside: &str) -> String {
        if self.chroot {
            inside.to_string()
        } else {
            self.rootfs.join(inside.trim_start_matches('/')).to_string_lossy().into_owned()
        }
    }

    async fn output(&self, name: &str, args: &[&str]) -> Output {
        self.command(name).args(args).output().await.unwrap_or_else(|e| panic!("{name} {args:?}: {e}"))
    }

    fn spawn(&self, name: &str, id: &str, args: Vec<String>, metrics: String, logs: &Path) -> Process {
        let log = logs.join(format!("{id}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = self
            .command(name)
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        Process { id: id.to_string(), child, metrics, log }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_runs_from_the_unpacked_image() {
    if let Some(skip) = missing_tools(&["umoci"]) {
        eprintln!("{skip}");
        return;
    }
    let unpacked = unpack(&archive());
    let runner = ImageRunner { rootfs: unpacked.rootfs.clone(), chroot: is_root() };
    if !runner.chroot {
        eprintln!("not root: the image's binaries run by their path in the rootfs, without chroot");
    }

    // Every binary's version is the tag.
    let tags = strings(&unpacked.docker_manifest[0]["RepoTags"]);
    let tag = tags[0].rsplit_once(':').expect("NAME:TAG").1.to_string();
    for bin in BINARIES {
        let out = ok(&format!("{bin} --version"), runner.output(bin, &["--version"]).await);
        // `BINARY VERSION`, as `fleet-worker 0.1.0`.
        assert_eq!(out.trim(), format!("{bin} {tag}"), "{bin} --version");
    }

    // The kubelet's mounts: /etc/hosts (the host's, which names localhost) and the kubeconfig,
    // whose server is a name to resolve, not an address.
    let mut hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    if !hosts.lines().any(|l| l.split_whitespace().skip(1).any(|name| name == "localhost")) {
        hosts.push_str("\n127.0.0.1\tlocalhost\n");
    }
    std::fs::write(unpacked.rootfs.join("etc/hosts"), hosts).expect("etc/hosts");
    let sim = Sim::start(SimConfig::default()).await;
    // The fleet's namespace, as deploy/ creates it.
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "batchfleet"}})).expect("namespace");
    Api::<Namespace>::all(sim.client())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    let url = sim.cluster.url();
    assert!(url.contains("127.0.0.1"), "the sim's URL {url}");
    let kubeconfig_yaml = sim.cluster.kubeconfig_yaml().replace("127.0.0.1", "localhost");
    let config_dir = unpacked.rootfs.join("etc/batchfleet");
    std::fs::create_dir_all(&config_dir).expect("etc/batchfleet");
    std::fs::write(config_dir.join("kubeconfig"), kubeconfig_yaml).expect("kubeconfig");
    let kubeconfig = runner.path("/etc/batchfleet/kubeconfig");

    let shards = "8";
    let common = |id_flag: &str, id: &str, metrics: &str| -> Vec<String> {
        [
            "--insecure",
            "--kubeconfig",
            &kubeconfig,
            id_flag,
            id,
            "--metrics-addr",
            metrics,
            "--namespace",
            "batchfleet",
            "--shards",
            shards,
        ]
        .map(String::from)
        .to_vec()
    };
    let listen = format!("127.0.0.1:{}", free_port());
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut coordinator_args = common("--coordinator-id", "coordinator-0", &metrics);
    coordinator_args.extend(["--listen", &listen].map(String::from));
    let logs = sim.dir.path();
    let mut coordinator =
        runner.spawn("fleet-coordinator", "coordinator-0", coordinator_args, metrics.clone(), logs);
    let admin = format!("http://{listen}");
    let mut workers = Vec::new();
    for id in ["w-0", "w-1", "w-2"] {
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut args = common("--worker-id", id, &metrics);
        args.extend(["--coordinator", &admin].map(String::from));
        workers.push(runner.spawn("fleet-worker", id, args, metrics, logs));
    }
    let diagnostics = |processes: &[&Process]| -> String {
        processes.iter().map(|p| format!("--- {}:\n{}\n", p.id, log_tail(&p.log, 30))).collect()
    };

    // Every worker ready: the coordinator leads (it reached the API server by name), and every
    // shard is active on a worker.
    let metrics_addrs: Vec<String> = workers.iter().map(|w| w.metrics.clone()).collect();
    let ready = tokio::time::timeout(
        Duration::from_secs(120),
        wait_until("every worker ready", Duration::from_secs(120), || {
            let addrs = metrics_addrs.clone();
            async move {
                for addr in &addrs {
                    let (code, _) = http_get(addr, "/readyz").await?;
                    (code == 200).then_some(())?;
                }
                Some(())
            }
        }),
    )
    .await;
    if ready.is_err() {
        coordinator.assert_running();
        workers.iter_mut().for_each(Process::assert_running);
        let all: Vec<&Process> = std::iter::once(&coordinator).chain(&workers).collect();
        panic!("the workers did not become ready\n{}", diagnostics(&all));
    }

    // A Job completes.
    let jobs: Api<Job> = Api::namespaced(sim.client(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "from-the-image"},
        "spec": {"template": {
            "metadata": {"annotations": {"sim.batchfleet.io/run": "100ms"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &job).await.expect("create the Job");
    let done = tokio::time::timeout(
        Duration::from_secs(60),
        wait_until("the Job succeeds", Duration::from_secs(60), || async {
            (jobs.get("from-the-image").await.ok()?.status?.succeeded == Some(1)).then_some(())
        }),
    )
    .await;
    if done.is_err() {
        let all: Vec<&Process> = std::iter::once(&coordinator).chain(&workers).collect();
        panic!("the Job did not complete\n{}", diagnostics(&all));
    }

    // fleetctl from the image, to the coordinator by name too.
    let admin_by_name = format!("http://localhost:{}", listen.rsplit_once(':').expect("host:port").1);
    let status =
        runner.output("fleetctl", &["--insecure", "--admin", &admin_by_name, "-o", "json", "status"]).await;
    let status: Value = serde_json::from_str(&ok("fleetctl status", status)).expect("fleetctl's JSON");
    assert_eq!(status["leader"], "coordinator-0", "{status}");
    assert_eq!(status["workers"], 3, "{status}");
    assert_eq!(status["shards_by_state"]["active"], 8, "{status}");
    let (code, _) = http_get(&metrics, "/metrics").await.expect("the coordinator's metrics");
    assert_eq!(code, 200);
}
