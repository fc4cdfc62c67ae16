//! What the daemons stop on (feature `signal`): the agent, the control plane and the operator
//! all shut down on SIGTERM (what Kubernetes and systemd send) or Ctrl-C.

/// Resolves on SIGTERM or Ctrl-C (SIGINT). Where SIGTERM cannot be listened for (not Unix, or
/// the handler could not be installed, which is logged), on Ctrl-C alone.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
                return;
            }
            Err(e) => log::warn!("cannot listen for SIGTERM ({e}); stopping on Ctrl-C only"),
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
