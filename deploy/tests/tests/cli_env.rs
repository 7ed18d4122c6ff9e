//! Every flag of the fleet's processes has an environment variable, as docs/architecture.md and
//! docs/configuration.md say: a container sets a flag through `env` as easily as through `args`.
//! The exceptions are listed here and in docs/configuration.md: `--help` and `--version`,
//! fleetctl's per-command arguments (a preview's `--cronjob`, `--time-zone`, `--from`, `--count`, and
//! `rebalance --dry-run`: what one invocation asks, not a setting), and the `loadtest` harness,
//! which is a development tool.

use batchfleet_sim::testing::workspace_binary;

/// Flags no environment variable sets, per binary and subcommand.
const WITHOUT_ENV: &[(&str, &str, &str)] = &[
    ("fleetctl", "schedule", "--cronjob"),
    ("fleetctl", "schedule", "--time-zone"),
    ("fleetctl", "schedule", "--from"),
    ("fleetctl", "schedule", "--count"),
    ("fleetctl", "rebalance", "--dry-run"),
];

/// `(flag, has an [env: …])` of every option in a clap help text; an option's entry runs from its
/// `-x, --name` line to the next option's.
fn options(help: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.starts_with('-') && indent <= 6 {
            let flag = trimmed.split([' ', ',']).find(|w| w.starts_with("--")).unwrap_or_default();
            out.push((flag.to_string(), false));
        }
        if line.contains("[env: ")
            && let Some(last) = out.last_mut()
        {
            last.1 = true;
        }
    }
    out
}

fn help(binary: &str, package: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(workspace_binary(package, binary))
        .args(args)
        .arg("--help")
        .env_clear()
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{binary} {args:?} --help failed");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

fn missing_env(binary: &str, package: &str, sub: &str) -> Vec<String> {
    let args: Vec<&str> = if sub.is_empty() { vec![] } else { vec![sub] };
    options(&help(binary, package, &args))
        .into_iter()
        .filter(|(flag, has_env)| {
            !has_env
                && flag != "--help"
                && flag != "--version"
                && !WITHOUT_ENV.contains(&(binary, sub, flag.as_str()))
        })
        .map(|(flag, _)| format!("{binary} {sub} {flag}"))
        .collect()
}

#[test]
fn options_are_read_from_clap_help_with_their_env() {
    let help = "Options:\n      --a <A>\n          Text [env: FLEET_A=]\n      --b\n          More text\n  -o, --output <O>\n          x\n          [env: FLEET_O=]\n";
    assert_eq!(
        options(help),
        [("--a".to_string(), true), ("--b".to_string(), false), ("--output".to_string(), true)]
    );
}

#[test]
fn every_flag_of_the_fleets_processes_has_an_environment_variable() {
    let mut missing = missing_env("fleet-coordinator", "batchfleet-coordinator", "");
    missing.extend(missing_env("fleet-worker", "batchfleet-worker", ""));
    for sub in ["", "schedule", "status", "workers", "shards", "drain", "rebalance", "move", "completion"] {
        missing.extend(missing_env("fleetctl", "batchfleet-fleetctl", sub));
    }
    assert!(missing.is_empty(), "flags without an environment variable: {missing:#?}");
}
