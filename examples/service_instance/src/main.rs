//! `example-service-instance --control-plane URL --admin-token-file FILE --type T [--spec JSON]`
//! creates a service instance through the control plane and waits until it is ready; the final
//! record is printed as JSON. Exit 0 ready, 1 failed or timed out, 2 bad arguments.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    example_service_instance::cli_main().await
}
