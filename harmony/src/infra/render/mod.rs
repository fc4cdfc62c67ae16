//! Render mode: capabilities write what they would apply into an output folder.
//!
//! The embedded default when no infrastructure is configured. Output is deterministic: stable
//! file names and key order, so re-running with unchanged input rewrites identical bytes.

mod k8s;
mod layout;
mod yaml;

use async_trait::async_trait;
use std::path::{Path, PathBuf};

use crate::domain::{ExecutionMode, PreparationError, PreparationOutcome, RunContext, Topology};

pub use layout::object_path;
pub use yaml::to_stable_yaml;

/// A topology whose capabilities write files instead of touching infrastructure.
#[derive(Debug, Clone)]
pub struct RenderTopology {
    site: String,
    out_dir: PathBuf,
    plan: bool,
}

impl RenderTopology {
    /// Renders site `site` into `out_dir/<site>/`.
    pub fn new(site: impl Into<String>, out_dir: impl Into<PathBuf>) -> Self {
        Self {
            site: site.into(),
            out_dir: out_dir.into(),
            plan: false,
        }
    }

    /// The single-site default (`local`) configured from the operator's options; with `--plan`
    /// it compares with what is already in the folder and writes nothing.
    pub fn from_context(ctx: &RunContext) -> Self {
        Self {
            plan: ctx.plan,
            ..Self::new("local", ctx.out_dir.clone())
        }
    }

    /// The same output folder and mode for another site, rendered into `out_dir/<site>/`.
    pub fn with_site(mut self, site: impl Into<String>) -> Self {
        self.site = site.into();
        self
    }

    /// The folder this site's files go to.
    pub fn site_dir(&self) -> PathBuf {
        self.out_dir.join(&self.site)
    }

    /// The output root.
    pub fn out_dir(&self) -> &Path {
        &self.out_dir
    }
}

#[async_trait]
impl Topology for RenderTopology {
    fn name(&self) -> &str {
        &self.site
    }

    fn mode(&self) -> ExecutionMode {
        if self.plan {
            ExecutionMode::Plan
        } else {
            ExecutionMode::Render
        }
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        let dir = self.site_dir();
        if self.plan || dir.is_dir() {
            return Ok(PreparationOutcome::Noop);
        }
        tokio::task::block_in_place(|| std::fs::create_dir_all(&dir)).map_err(|e| {
            PreparationError {
                topology: self.site.clone(),
                reason: format!(
                    "cannot create output folder {}: {e}; pass --out DIR with a writable folder",
                    dir.display()
                ),
            }
        })?;
        Ok(PreparationOutcome::Success(format!(
            "created {}",
            dir.display()
        )))
    }
}
