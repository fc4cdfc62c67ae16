//! The program: flags, the control-plane client, create and wait, print the record.

use clap::Parser;
use harmony::infra::control_plane::{ControlPlaneClient, ControlPlaneError, NewService};
use harmony_agent_protocol::SecretString;
use harmony_types::{Dns1123Label, RegionId};
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

/// Checks the flags that need no network (the service type, the region, the token and CA
/// files, the URL) and builds the client, so a bad value is refused before anything is sent.
/// Errors name the flag and the fix, never the token.
fn client(args: &Args) -> Result<ControlPlaneClient, String> {
    if let Err(e) = Dns1123Label::parse(&args.service_type) {
        return Err(format!(
            "--type: {e}; give the service type, such as --type container (or postgresql, vm, or a type a registered provider serves)"
        ));
    }
    if let Some(region) = &args.region
        && let Err(e) = RegionId::parse(region)
    {
        return Err(format!(
            "--region: {e}; give a region name of the control plane, such as --region eu-west, or leave --region out to let the control plane choose"
        ));
    }
    let file = args.admin_token_file.display();
    let token = std::fs::read(&args.admin_token_file).map_err(|e| {
        format!("--admin-token-file: cannot read {file}: {e}; give --admin-token-file a readable file whose first line is the admin token")
    })?;
    let token = String::from_utf8_lossy(&token);
    let token = token.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        return Err(format!(
            "--admin-token-file: {file}'s first line is empty; write the admin token on the file's first line"
        ));
    }
    let ca = match &args.ca {
        Some(p) => Some(std::fs::read(p).map_err(|e| {
            format!(
                "--ca: cannot read {}: {e}; give --ca the PEM file of the CA that signs the control plane's certificate",
                p.display()
            )
        })?),
        None => None,
    };
    ControlPlaneClient::new(&args.control_plane, SecretString::new(token), ca.as_deref()).map_err(
        |e| match e {
            ControlPlaneError::Config {
                field: "ca bundle",
                problem,
            } => format!(
                "--ca: {problem}; the file is the CA that signs the control plane's certificate"
            ),
            e => format!("--control-plane: {e}; give the control plane as https://HOST:PORT"),
        },
    )
}

/// The `example-service-instance` program (its `main`).
pub async fn cli_main() -> ExitCode {
    let args = Args::parse();
    let spec = match serde_json::from_str::<serde_json::Value>(&args.spec) {
        Ok(v) if v.is_object() => v,
        Ok(_) => {
            eprintln!(
                "error: --spec must be a JSON object (the provider's fields), e.g. '{{\"image\":\"nginx:1.27\"}}'"
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!(
                "error: --spec is not JSON: {e}; give a JSON object, e.g. '{{\"image\":\"nginx:1.27\"}}' (quoted for the shell)"
            );
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
