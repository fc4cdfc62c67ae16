//! Asks a Harmony control plane for a service instance and waits until its provider reports it
//! `ready` (or `failed`). The control plane places it on a region whose agent advertises the
//! type; see docs/modules/service_providers.md.

mod program;

pub use program::cli_main;

use harmony::infra::control_plane::{
    ControlPlaneClient, ControlPlaneError, NewService, ServiceInstance,
};
use std::time::{Duration, Instant};

/// Why the instance did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// The control plane refused or could not be reached.
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    /// The provider reported a failure.
    #[error("instance {id} failed in region {region}: {detail}")]
    Failed {
        /// The instance.
        id: String,
        /// Where it was placed.
        region: String,
        /// The provider's reason.
        detail: String,
    },
    /// It was removed while we waited (deleted by someone else).
    #[error("instance {id} disappeared while waiting for it")]
    Gone {
        /// The instance.
        id: String,
    },
    /// Not ready in time.
    #[error("instance {id} still {state} after {} s (last detail: {detail})", waited.as_secs())]
    Timeout {
        /// The instance.
        id: String,
        /// Its last state.
        state: String,
        /// Its last detail.
        detail: String,
        /// How long we waited.
        waited: Duration,
    },
}

/// Creates `request` and polls it until `ready`, `failed` or `wait` passes; `progress` sees
/// every state change (e.g. `queued` -> `pending` -> `provisioning` -> `ready`).
pub async fn create_and_wait(
    cp: &ControlPlaneClient,
    request: &NewService,
    wait: Duration,
    mut progress: impl FnMut(&ServiceInstance),
) -> Result<ServiceInstance, ExampleError> {
    let started = Instant::now();
    let mut current = cp.create_service(request).await?;
    progress(&current);
    loop {
        match current.state.as_str() {
            "ready" => return Ok(current),
            "failed" => {
                return Err(ExampleError::Failed {
                    id: current.id,
                    region: current.region,
                    detail: current.detail,
                });
            }
            _ => {}
        }
        if started.elapsed() > wait {
            return Err(ExampleError::Timeout {
                id: current.id,
                state: current.state,
                detail: current.detail,
                waited: wait,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let next = cp
            .service(&current.id)
            .await?
            .ok_or_else(|| ExampleError::Gone {
                id: current.id.clone(),
            })?;
        if next.state != current.state {
            progress(&next);
        }
        current = next;
    }
}
