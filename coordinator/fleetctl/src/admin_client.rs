//! Reaching the leader's admin API from a list of coordinator addresses: each address is tried in
//! order, and a standby's answer naming the leader (`x-fleet-leader`) is followed once.

use std::time::Duration;

use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use batchfleet_tls::client::ClientTransport;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

pub use batchfleet_proto::LEADER_HINT;

/// Why a command could not be carried out; every one exits 2.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("no leader reachable at {tried}: {last}")]
    NoLeader { tried: String, last: String },
    #[error("{0}")]
    Rejected(String),
}

/// Runs `call` against the leader among `addresses`.
pub async fn with_leader<T, F, Fut>(
    addresses: &[String],
    transport: &ClientTransport,
    call: F,
) -> Result<T, CommandError>
where
    F: Fn(FleetAdminClient<Channel>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
{
    let mut last = String::from("no address given");
    let mut queue: Vec<String> = addresses.to_vec();
    let mut followed = false;
    let mut i = 0;
    while i < queue.len() {
        let address = queue[i].clone();
        i += 1;
        let client = match connect(&address, transport).await {
            Ok(c) => c,
            Err(e) => {
                last = format!("{address}: {e}");
                continue;
            }
        };
        match call(client).await {
            Ok(response) => return Ok(response.into_inner()),
            Err(status) if status.code() == Code::FailedPrecondition => {
                let hint =
                    status.metadata().get(LEADER_HINT).and_then(|v| v.to_str().ok()).map(str::to_string);
                last = format!("{address}: {}", status.message());
                if let Some(leader) = hint.filter(|l| !l.is_empty() && !followed) {
                    followed = true;
                    queue.insert(i, leader);
                }
            }
            Err(status)
                if matches!(status.code(), Code::Unavailable | Code::DeadlineExceeded | Code::Unknown) =>
            {
                last = format!("{address}: {}", status.message());
            }
            Err(status) => return Err(CommandError::Rejected(status.message().to_string())),
        }
    }
    Err(CommandError::NoLeader { tried: addresses.join(","), last })
}

async fn connect(
    address: &str,
    transport: &ClientTransport,
) -> Result<FleetAdminClient<Channel>, tonic::transport::Error> {
    let url = if address.contains("://") {
        address.to_string()
    } else {
        format!("{}://{address}", transport.scheme())
    };
    let endpoint =
        Endpoint::from_shared(url)?.connect_timeout(Duration::from_secs(3)).timeout(Duration::from_secs(30));
    let channel = transport.connect(endpoint).await?;
    Ok(FleetAdminClient::new(channel))
}
