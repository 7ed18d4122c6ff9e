//! The `--admin-policy` file: which certificate identities may read or change the fleet through
//! the admin API, and which may open worker sessions for any worker id.
//!
//! ```yaml
//! admin:
//!   - identity: alice          # the Common Name of the client certificate
//!     access: write            # read: status, workers, shards, rebalance --dry-run
//!   - identity: dashboards
//!     access: read
//! workers:                     # may register as any worker id (a certificate every worker
//!   - batchfleet-worker        # pod of a Deployment shares); else a worker's CN must be its id
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// What an admin call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Write,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Parse { path: PathBuf, source: serde_yaml::Error },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    admin: Vec<AdminEntry>,
    #[serde(default)]
    workers: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdminEntry {
    identity: String,
    access: Access,
}

/// A loaded policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    admin: BTreeMap<String, Access>,
    any_worker: BTreeSet<String>,
}

impl Policy {
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PolicyError::Read { path: path.into(), source })?;
        Self::parse(&text).map_err(|e| match e {
            ParseError::Yaml(source) => PolicyError::Parse { path: path.into(), source },
            ParseError::Invalid(reason) => PolicyError::Invalid { path: path.into(), reason },
        })
    }

    fn parse(text: &str) -> Result<Self, ParseError> {
        let file: PolicyFile = serde_yaml::from_str(text).map_err(ParseError::Yaml)?;
        let mut policy = Policy::default();
        for entry in file.admin {
            if entry.identity.is_empty() {
                return Err(ParseError::Invalid("an admin entry has an empty identity".into()));
            }
            if policy.admin.insert(entry.identity.clone(), entry.access).is_some() {
                return Err(ParseError::Invalid(format!("{:?} is listed twice under admin", entry.identity)));
            }
        }
        for identity in file.workers {
            if identity.is_empty() {
                return Err(ParseError::Invalid("an empty identity under workers".into()));
            }
            policy.any_worker.insert(identity);
        }
        Ok(policy)
    }

    /// The admin access `identity` has, if any.
    pub fn admin_access(&self, identity: &str) -> Option<Access> {
        self.admin.get(identity).copied()
    }

    /// Whether `identity` may open a session as `worker_id`: its own id, or any id when the policy
    /// lists it under `workers`.
    pub fn may_be_worker(&self, identity: &str, worker_id: &str) -> bool {
        identity == worker_id || self.any_worker.contains(identity)
    }
}

enum ParseError {
    Yaml(serde_yaml::Error),
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, String> {
        Policy::parse(text).map_err(|e| match e {
            ParseError::Yaml(e) => e.to_string(),
            ParseError::Invalid(r) => r,
        })
    }

    #[test]
    fn identities_get_the_access_listed() {
        let policy = parse(
            "admin:\n  - identity: alice\n    access: write\n  - identity: dash\n    access: read\nworkers: [shared-worker]\n",
        )
        .unwrap();
        assert_eq!(policy.admin_access("alice"), Some(Access::Write));
        assert_eq!(policy.admin_access("dash"), Some(Access::Read));
        assert_eq!(policy.admin_access("mallory"), None);
        assert!(policy.may_be_worker("shared-worker", "worker-7"));
        assert!(policy.may_be_worker("worker-3", "worker-3"));
        assert!(!policy.may_be_worker("worker-3", "worker-4"));
        assert!(!policy.may_be_worker("alice", "worker-4"));
    }

    #[test]
    fn mistakes_are_errors_not_silently_less_access() {
        assert!(parse("admin:\n  - identity: a\n    access: admin\n").is_err());
        assert!(parse("admins: []\n").is_err());
        assert!(
            parse("admin:\n  - identity: a\n    access: read\n  - identity: a\n    access: write\n")
                .unwrap_err()
                .contains("twice")
        );
        assert!(parse("admin:\n  - identity: ''\n    access: read\n").is_err());
    }
}
