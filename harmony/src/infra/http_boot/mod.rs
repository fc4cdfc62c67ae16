//! The HTTP boot server: an embedded server (hyper) that serves iPXE scripts, ignition files
//! and images from a folder Harmony owns, logs every request, and takes hardware reports from
//! hosts being discovered (`POST /discovery`). See adr/0010.

mod scripts;
mod server;

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use harmony_types::Url;

use super::bare_metal::{FileSync, ServiceMode};
use crate::domain::capability::{CapabilityError, HttpAccess, HttpFile, HttpServer};
use crate::domain::{ChangeAction, ObjectChange};

pub use scripts::{ScriptTable, TABLE_FILE as SCRIPT_TABLE_FILE, script_name};
pub use server::{
    BootFetch, BootServerConfig, BootSink, DiscoverySink, HttpBootServer, IMAGE_PREFIX,
    ReportOutcome, ReportRefused, parse_access_line,
};

/// The HTTP boot backend: files under `<dir>/www`, requests logged to `<dir>/access.log`.
#[derive(Debug)]
pub struct HttpBoot {
    dir: PathBuf,
    base_url: Url,
    mode: ServiceMode,
    server: Mutex<Option<HttpBootServer>>,
    discovery_image: Option<PathBuf>,
}

impl HttpBoot {
    /// A backend serving `dir/www` at `base_url` (the server is started separately).
    pub fn new(dir: PathBuf, base_url: Url, mode: ServiceMode) -> Self {
        Self {
            dir,
            base_url,
            mode,
            server: Mutex::new(None),
            discovery_image: None,
        }
    }

    /// Also serves the discovery image's folder (`vmlinuz`, `initrd.img`, as built by
    /// `discovery-image/build.sh`) as `/discovery/<file>`.
    pub fn with_discovery_image(mut self, dir: Option<PathBuf>) -> Self {
        self.discovery_image = dir;
        self
    }

    /// The discovery image's folder, if one is served.
    pub fn discovery_image(&self) -> Option<&PathBuf> {
        self.discovery_image.as_ref()
    }

    /// The folder served.
    pub fn root(&self) -> PathBuf {
        self.dir.join("www")
    }

    /// The per-host iPXE scripts (`ipxe/<name>.ipxe` files are kept here, not under
    /// [`HttpBoot::root`]).
    pub fn scripts(&self) -> ScriptTable {
        ScriptTable::in_dir(&self.dir)
    }

    /// The access log file.
    pub fn access_log_path(&self) -> PathBuf {
        self.dir.join("access.log")
    }

    /// Starts serving on `listener` (already bound, possibly inside another network namespace);
    /// replaces a server started before. Needs a Tokio runtime.
    pub fn serve_on(
        &self,
        listener: std::net::TcpListener,
        discovery: Option<DiscoverySink>,
    ) -> Result<std::net::SocketAddr, CapabilityError> {
        self.serve_on_with_boots(listener, discovery, None)
    }

    /// Like [`HttpBoot::serve_on`], also telling `boots` of each boot file fetched
    /// ([`BootFetch`]: iPXE scripts, kernels, initrds, ignitions, answered 200).
    pub fn serve_on_with_boots(
        &self,
        listener: std::net::TcpListener,
        discovery: Option<DiscoverySink>,
        boots: Option<BootSink>,
    ) -> Result<std::net::SocketAddr, CapabilityError> {
        std::fs::create_dir_all(self.root())
            .map_err(|e| super::bare_metal::io_error(&self.root(), e))?;
        let server = HttpBootServer::start(
            listener,
            BootServerConfig {
                root: self.root(),
                access_log: Some(self.access_log_path()),
                discovery,
                boots,
                discovery_image: self.discovery_image.clone(),
                scripts: Some(self.scripts()),
            },
        )
        .map_err(|e| super::bare_metal::io_error(&self.access_log_path(), e))?;
        let addr = server.local_addr();
        *self.server.lock().unwrap_or_else(|p| p.into_inner()) = Some(server);
        Ok(addr)
    }

    /// Stops the server, if one runs (as the end of a run does): the port is closed.
    pub fn stop(&self) {
        self.server.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Whether a server is running.
    pub fn is_serving(&self) -> bool {
        self.server.lock().map(|s| s.is_some()).unwrap_or(false)
    }
}

impl HttpBoot {
    /// Brings `wanted` into the scripts table (other entries stay), writing the table once and
    /// only when an entry differs; one change per script, as one file each would give.
    fn sync_scripts(
        &self,
        wanted: BTreeMap<String, String>,
        writes: bool,
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let table = self.scripts();
        let io = |e| super::bare_metal::io_error(table.path(), e);
        let mut all = table.read().map_err(io)?;
        let location = table.path().display().to_string();
        let mut changes = Vec::with_capacity(wanted.len());
        let mut changed = false;
        for (name, text) in wanted {
            let action = match all.get(&name) {
                None => ChangeAction::Create,
                Some(old) if *old == text => ChangeAction::Unchanged,
                Some(_) => ChangeAction::Update,
            };
            changed |= action != ChangeAction::Unchanged;
            changes.push(ObjectChange {
                object: format!("HTTP /ipxe/{name}"),
                action,
                location: Some(format!("{location} [{name}]")),
                diff: Vec::new(),
                status: None,
            });
            all.insert(name, text);
        }
        if changed && writes {
            table.write(&all).map_err(io)?;
        }
        Ok(changes)
    }
}

fn check_path(path: &str) -> Result<(), CapabilityError> {
    let ok = !path.is_empty()
        && !path.starts_with('/')
        && path.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        });
    if ok {
        Ok(())
    } else {
        Err(CapabilityError::InvalidObject {
            object: format!("HTTP file {path:?}"),
            problem: "paths are relative, '/'-separated, of letters, digits, '.', '-' and '_', without '..'".into(),
        })
    }
}

#[async_trait]
impl HttpServer for HttpBoot {
    fn base_url(&self) -> Url {
        self.base_url.clone()
    }

    async fn ensure_http_files(
        &self,
        files: &[HttpFile],
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        let mut sync = FileSync::new();
        let mut scripts = BTreeMap::new();
        for f in files {
            check_path(&f.path)?;
            match script_name(&f.path) {
                Some(name) => {
                    let text = String::from_utf8(f.content.clone()).map_err(|_| {
                        CapabilityError::InvalidObject {
                            object: format!("HTTP file {:?}", f.path),
                            problem: "an iPXE script is text: it must be UTF-8".into(),
                        }
                    })?;
                    scripts.insert(name.to_string(), text);
                }
                None => sync.add(
                    format!("HTTP /{}", f.path),
                    self.root().join(&f.path),
                    f.content.clone(),
                ),
            }
        }
        let writes = self.mode.writes();
        tokio::task::block_in_place(|| {
            let mut changes = if writes { sync.apply()? } else { sync.plan()? };
            changes.extend(self.sync_scripts(scripts, writes)?);
            changes.sort_by(|a, b| a.object.cmp(&b.object));
            Ok(changes)
        })
    }

    async fn access_log(&self) -> Result<Vec<HttpAccess>, CapabilityError> {
        if let Some(server) = self
            .server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Ok(server.accesses());
        }
        match std::fs::read_to_string(self.access_log_path()) {
            Ok(text) => Ok(text.lines().filter_map(parse_access_line).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(super::bare_metal::io_error(&self.access_log_path(), e)),
        }
    }
}

#[cfg(test)]
mod tests;
