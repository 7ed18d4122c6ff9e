//! Where a process's client points and who it says it is: the kubeconfig (a file, else the
//! in-cluster config or `$KUBECONFIG`), and the User-Agent that names the process on every
//! request, as kube-controller-manager names its clients, so the API server's audit log shows
//! who wrote what.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error("inferring the cluster config: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("the User-Agent {0:?} is not a valid header value")]
    UserAgent(String),
    #[error("building the client: {0}")]
    Build(#[from] kube::Error),
}

/// The config from `kubeconfig`, else in-cluster or `$KUBECONFIG`.
pub async fn load_config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    match kubeconfig {
        Some(path) => {
            let err = |source| ClientError::Kubeconfig { path: path.display().to_string(), source };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(err)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(err)
        }
        None => Ok(kube::Config::infer().await?),
    }
}

/// `PROGRAM/VERSION (ID)`, e.g. `fleet-worker/0.1.0 (w-1)`: the fleet's binaries share the
/// workspace version.
pub fn user_agent(program: &str, id: &str) -> String {
    format!("{program}/{} ({id})", env!("CARGO_PKG_VERSION"))
}

/// `config` with `user_agent` on every request, in place of any other.
pub fn with_user_agent(mut config: kube::Config, user_agent: &str) -> Result<kube::Config, ClientError> {
    let value = http::HeaderValue::from_str(user_agent)
        .map_err(|_| ClientError::UserAgent(user_agent.to_string()))?;
    config.headers.retain(|(name, _)| name != http::header::USER_AGENT);
    config.headers.push((http::header::USER_AGENT, value));
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_agent_names_the_program_version_and_id_once() {
        assert_eq!(
            user_agent("fleet-worker", "w-1"),
            format!("fleet-worker/{} (w-1)", env!("CARGO_PKG_VERSION"))
        );
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let config = with_user_agent(config, "first").unwrap();
        let config = with_user_agent(config, "second").unwrap();
        let agents: Vec<_> = config.headers.iter().filter(|(n, _)| n == http::header::USER_AGENT).collect();
        assert_eq!(agents.len(), 1);
        assert_eq!(agents[0].1, "second");
        assert!(matches!(
            with_user_agent(kube::Config::new("http://127.0.0.1:1".parse().unwrap()), "a\nb"),
            Err(ClientError::UserAgent(_))
        ));
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_names_its_path() {
        let err = load_config(Some(Path::new("/nonexistent/kubeconfig"))).await.unwrap_err();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }
}
