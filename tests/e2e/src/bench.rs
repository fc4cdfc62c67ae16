//! Helpers the benchmark binaries (`src/bin/bench_*.rs`) share.

use std::process::{Command, Stdio};

use crate::ApiServer;

/// A benchmark step's result: the error text is printed as is.
pub type BenchResult<T> = Result<T, String>;

/// The fixture's kubectl, built from the same Kubernetes modules as the apiserver, against
/// `server`. Unlike [`ApiServer::kubectl`], a missing binary is an error rather than a panic.
pub fn kubectl(server: &ApiServer) -> BenchResult<Command> {
    let mut cmd = Command::new(ApiServer::binary()?);
    cmd.arg("kubectl")
        .env("KUBECONFIG", server.kubeconfig())
        .stdin(Stdio::null());
    Ok(cmd)
}

/// Prints `ok: what` on stderr, or fails the benchmark with it: a fast wrong answer must not
/// pass as a figure.
pub fn check(ok: bool, what: String) -> BenchResult<()> {
    if ok {
        eprintln!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("check failed: {what}"))
    }
}

/// Median, min and max of `v` (not empty).
pub fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let median = if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    };
    (median, v[0], v[v.len() - 1])
}

/// The median of `v` (not empty).
pub fn median(v: Vec<f64>) -> f64 {
    stats(v).0
}
