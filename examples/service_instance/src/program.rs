//! The program: flags, the control-plane client, create and wait, print the record.

use clap::Parser;
use harmony::infra::agent::{ControlPlaneClient, NewService};
use harmony_agent_protocol::SecretString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(about = "Create a service instance through the Harmony control plane and wait for it")]
struct Args {
    /// The control plane, e.g. https://cp.example.com.
    #[arg(long)]
    control_plane: String,
    /// File whose first line is the admin token.
    #[arg(long)]
    admin_token_file: PathBuf,
    /// CA bundle (PEM) that signs the control plane's certificate; system roots otherwise.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// The service type: container, postgresql, vm, or a type a registered provider serves.
    #[arg(long = "type")]
    service_type: String,
    /// The provider's spec as JSON, e.g. '{"image":"nginx:1.27","port":80}'.
    #[arg(long, default_value = "{}")]
    spec: String,
    /// Place it in this region (otherwise the control plane chooses).
    #[arg(long)]
    region: Option<String>,
    /// How long to wait for `ready`, in seconds.
    #[arg(long, default_value_t = 300)]
    wait_s: u64,
}

fn client(args: &Args) -> Result<ControlPlaneClient, String> {
    let token = std::fs::read_to_string(&args.admin_token_file).map_err(|e| {
        format!(
            "--admin-token-file {}: {e}",
            args.admin_token_file.display()
        )
    })?;
    let token = SecretString::new(token.lines().next().unwrap_or("").trim());
    let ca = match &args.ca {
        Some(p) => Some(std::fs::read(p).map_err(|e| format!("--ca {}: {e}", p.display()))?),
        None => None,
    };
    ControlPlaneClient::new(&args.control_plane, token, ca.as_deref()).map_err(|e| e.to_string())
}

/// The `example-service-instance` program (its `main`).
pub async fn cli_main() -> ExitCode {
    let args = Args::parse();
    let spec = match serde_json::from_str::<serde_json::Value>(&args.spec) {
        Ok(v) if v.is_object() => v,
        Ok(_) => {
            eprintln!("error: --spec must be a JSON object, e.g. '{{\"image\":\"nginx:1.27\"}}'");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: --spec is not JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let cp = match client(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let request = NewService {
        service_type: args.service_type.clone(),
        spec,
        region: args.region.clone(),
        id: None,
        parent: None,
    };
    let wait = Duration::from_secs(args.wait_s);
    let result = crate::create_and_wait(&cp, &request, wait, |i| {
        eprintln!("{} in region {}: {} {}", i.id, i.region, i.state, i.detail);
    })
    .await;
    match result {
        Ok(instance) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&instance).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
