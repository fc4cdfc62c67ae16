//! API discovery on the agent's cluster: which built-in providers' APIs it serves.

use kube::Client;
use std::time::Duration;

/// How long one discovery call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The API a built-in provider needs: a kind in a group version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequiredApi {
    /// `apps/v1`, `postgresql.cnpg.io/v1`.
    pub group_version: &'static str,
    /// `Deployment`, `Cluster`.
    pub kind: &'static str,
}

/// Whether the cluster serves `api`: `Ok(false)` when the group version or the kind is absent
/// (404), `Err` when the cluster did not answer (so the caller keeps its last knowledge).
pub async fn serves(client: &Client, api: RequiredApi) -> Result<bool, String> {
    match tokio::time::timeout(
        CALL_TIMEOUT,
        client.list_api_group_resources(api.group_version),
    )
    .await
    {
        Err(_) => Err(format!(
            "discovery of {} did not answer within {}s",
            api.group_version,
            CALL_TIMEOUT.as_secs()
        )),
        Ok(Ok(list)) => Ok(list.resources.iter().any(|r| r.kind == api.kind)),
        // An absent group version is a plain-text 404, not a Status with reason NotFound.
        Ok(Err(kube::Error::Api(s))) if s.code == 404 || s.is_not_found() => Ok(false),
        Ok(Err(e)) => Err(format!("discovery of {}: {e}", api.group_version)),
    }
}

/// Whether the cluster answers at all (its `/version`), within `timeout`.
pub async fn answers(client: &Client, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("the Kubernetes API did not answer: {e}")),
        Err(_) => Err(format!(
            "the Kubernetes API did not answer within {} ms",
            timeout.as_millis()
        )),
    }
}
