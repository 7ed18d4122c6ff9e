//! Who may do what over the fleet's gRPC: admin calls by the caller's certificate identity and
//! the `--admin-policy` file, worker sessions by the worker id the certificate may register as.
//! Under `--insecure` nobody is authenticated, so everything is allowed.

pub mod policy;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use batchfleet_tls::PeerInfo;
use batchfleet_tls::reload::Reloading;
use tonic::{Request, Status};

pub use policy::{Access, Policy, PolicyError};

#[derive(Clone)]
pub enum Authorizer {
    Insecure,
    /// Callers are identified by their verified client certificate; the policy file is read
    /// again when it changes.
    Certificates(Arc<Reloading<Policy, PolicyError>>),
}

/// Who made a call, for the log.
#[derive(Debug, Clone)]
pub enum Caller {
    Identity(String),
    Plaintext(Option<std::net::SocketAddr>),
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Identity(cn) => f.write_str(cn),
            Caller::Plaintext(Some(addr)) => write!(f, "plaintext client {addr}"),
            Caller::Plaintext(None) => f.write_str("plaintext client"),
        }
    }
}

impl Authorizer {
    pub fn with_policy_file(path: PathBuf) -> Result<Self, PolicyError> {
        let load = path.clone();
        let policy = Reloading::new("admin policy", vec![path], move || Policy::load(&load))?;
        Ok(Self::Certificates(Arc::new(policy)))
    }

    /// The caller of an admin call that needs `access`, if the policy allows it.
    pub fn admin<T>(&self, request: &Request<T>, call: &str, access: Access) -> Result<Caller, Status> {
        let (identity, policy) = match self.identify(request)? {
            Identified::Plaintext(caller) => return Ok(caller),
            Identified::Certificate(identity, policy) => (identity, policy),
        };
        match policy.admin_access(&identity) {
            Some(granted) if granted >= access => Ok(Caller::Identity(identity)),
            Some(granted) => Err(Status::permission_denied(format!(
                "{identity:?} may not call {call}: the admin policy gives it {granted} access, {call} needs {access}"
            ))),
            None => Err(Status::permission_denied(format!(
                "{identity:?} may not call {call}: the admin policy does not list it"
            ))),
        }
    }

    /// The caller of a worker session call for `worker_id`, if its certificate may act as it.
    pub fn worker<T>(&self, request: &Request<T>, worker_id: &str) -> Result<Caller, Status> {
        match self.identify(request)? {
            Identified::Plaintext(caller) => Ok(caller),
            Identified::Certificate(identity, policy) if policy.may_be_worker(&identity, worker_id) => {
                Ok(Caller::Identity(identity))
            }
            Identified::Certificate(identity, _) => Err(Status::permission_denied(format!(
                "{identity:?} may not act as worker {worker_id:?}: the certificate's Common Name must be \
                 the worker id, or the admin policy must list it under workers"
            ))),
        }
    }

    /// Drain needs write access, except that a worker may ask to drain itself (it does on SIGTERM).
    pub fn drain<T>(&self, request: &Request<T>, worker_id: &str) -> Result<Caller, Status> {
        self.admin(request, "drain", Access::Write)
            .or_else(|denied| self.worker(request, worker_id).map_err(|_| denied))
    }

    /// Undrain needs write access, except that a worker may end its own drain (a drained process
    /// does as it exits, so that its drain ends with it).
    pub fn undrain<T>(&self, request: &Request<T>, worker_id: &str) -> Result<Caller, Status> {
        self.admin(request, "undrain", Access::Write)
            .or_else(|denied| self.worker(request, worker_id).map_err(|_| denied))
    }

    fn identify<T>(&self, request: &Request<T>) -> Result<Identified, Status> {
        let policy = match self {
            Authorizer::Insecure => {
                return Ok(Identified::Plaintext(Caller::Plaintext(request.remote_addr())));
            }
            Authorizer::Certificates(policy) => policy.current(),
        };
        let identity =
            request.extensions().get::<PeerInfo>().and_then(|peer| peer.common_name.clone()).ok_or_else(
                || Status::permission_denied("the client certificate has no Common Name to authorize by"),
            )?;
        Ok(Identified::Certificate(identity, policy))
    }
}

enum Identified {
    Plaintext(Caller),
    Certificate(String, Arc<Policy>),
}
