//! The HTTP capability: serves iPXE scripts, ignition files and images to booting hosts.

use async_trait::async_trait;
use serde::Serialize;

use harmony_types::Url;

use super::CapabilityError;
use crate::domain::outcome::ObjectChange;

/// A file served over HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpFile {
    /// Path under the server root, `/`-separated, no `..` (e.g. `ipxe/52-54-00-12-34-56.ipxe`).
    pub path: String,
    /// The bytes served. Not shown in reports (ignition files carry secrets).
    #[serde(skip)]
    pub content: Vec<u8>,
}

/// One request the HTTP server answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpAccess {
    /// Client address.
    pub client: String,
    /// Request method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// Response status.
    pub status: u16,
}

/// An HTTP server for boot files.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no HTTP boot server (`HttpServer`)",
    label = "this Score needs a topology that implements `HttpServer` (it serves boot files over HTTP)",
    note = "use a bare-metal topology that offers HTTP boot: HAClusterTopology (`harmony::infra::okd::HAClusterTopology`, backed by HttpBoot); Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) have none; or implement `HttpServer` for `{Self}`"
)]
pub trait HttpServer: Send + Sync {
    /// The URL clients reach the server root at, e.g. `http://10.0.0.1:8080/`.
    fn base_url(&self) -> Url;

    /// Ensures each file is served with exactly these bytes.
    async fn ensure_http_files(
        &self,
        files: &[HttpFile],
    ) -> Result<Vec<ObjectChange>, CapabilityError>;

    /// Requests answered so far, oldest first (empty when the server does not run, as in render mode).
    async fn access_log(&self) -> Result<Vec<HttpAccess>, CapabilityError>;
}
