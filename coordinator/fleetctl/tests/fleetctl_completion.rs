//! `fleetctl completion SHELL` as users load it: the bash script completes subcommands and flags
//! when bash itself runs it; every shell's script names every subcommand; a shell clap does not
//! know exits 2.

use std::process::Command;

const SUBCOMMANDS: &[&str] = &[
    "schedule",
    "status",
    "workers",
    "shards",
    "drain",
    "undrain",
    "rebalance",
    "move",
    "pin",
    "unpin",
    "completion",
];

fn completion(shell: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetctl"))
        .args(["completion", shell])
        .output()
        .expect("fleetctl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What bash's programmable completion offers for `words` (the last one being completed), with
/// the script `fleetctl completion bash` printed loaded as `source <(…)` would.
fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("fleetctl.bash");
    std::fs::write(&path, script).expect("write script");
    let words_array: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}' && COMP_WORDS=({}) && COMP_CWORD={} && COMP_LINE='{}' && COMP_POINT=${{#COMP_LINE}} \
         && _fleetctl fleetctl '{}' '{}' && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display(),
        words_array.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash").args(["--norc", "-c", &program]).output().expect("bash runs");
    assert!(out.status.success(), "bash failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_bash_script_completes_subcommands_and_flags_in_bash() {
    let (code, script, stderr) = completion("bash");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(bash_completes(&script, &["fleetctl", "dr"]), ["drain"]);
    assert_eq!(bash_completes(&script, &["fleetctl", "un"]), ["undrain", "unpin"]);
    assert!(bash_completes(&script, &["fleetctl", "rebalance", "--"]).contains(&"--dry-run".to_string()));
    assert!(bash_completes(&script, &["fleetctl", "status", "--ad"]).contains(&"--admin".to_string()));
}

#[test]
fn every_shells_script_names_every_subcommand() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, script, stderr) = completion(shell);
        assert_eq!(code, 0, "{shell}: {stderr}");
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}'s script lacks {sub}");
        }
    }
}

#[test]
fn an_unknown_shell_exits_2_with_the_choices() {
    let (code, out, stderr) = completion("tcsh");
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(stderr.contains("invalid value 'tcsh'") && stderr.contains("bash"), "{stderr}");
}
