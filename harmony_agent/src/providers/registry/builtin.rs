//! The built-in providers the agent may enable, each behind the API whose presence enables it.

use std::sync::Arc;

use crate::cluster::Cluster;
use crate::providers::Provider;
use crate::providers::discovery::RequiredApi;

/// A built-in provider the agent may enable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Builtin {
    /// `container` through `kubernetes-workloads`.
    Container,
    /// `postgresql` through `cloudnativepg`.
    Postgresql,
    /// `vm` through `kubevirt`.
    Vm,
}

impl Builtin {
    /// Every built-in.
    pub const ALL: [Builtin; 3] = [Builtin::Container, Builtin::Postgresql, Builtin::Vm];

    /// The service type it serves (the word `--builtin-providers` takes).
    pub fn service_type(self) -> &'static str {
        match self {
            Builtin::Container => crate::providers::container::SERVICE_TYPE,
            Builtin::Postgresql => crate::providers::postgresql::SERVICE_TYPE,
            Builtin::Vm => crate::providers::kubevirt::SERVICE_TYPE,
        }
    }

    /// The provider's name.
    pub fn provider_name(self) -> &'static str {
        match self {
            Builtin::Container => crate::providers::container::NAME,
            Builtin::Postgresql => crate::providers::postgresql::NAME,
            Builtin::Vm => crate::providers::kubevirt::NAME,
        }
    }

    /// The API whose presence enables it.
    pub fn api(self) -> RequiredApi {
        match self {
            Builtin::Container => RequiredApi {
                group_version: "apps/v1",
                kind: "Deployment",
            },
            Builtin::Postgresql => RequiredApi {
                group_version: "postgresql.cnpg.io/v1",
                kind: "Cluster",
            },
            Builtin::Vm => RequiredApi {
                group_version: "kubevirt.io/v1",
                kind: "VirtualMachine",
            },
        }
    }

    pub(super) fn provider(self, cluster: Arc<Cluster>) -> Arc<dyn Provider> {
        match self {
            Builtin::Container => {
                Arc::new(crate::providers::container::ContainerProvider::new(cluster))
            }
            Builtin::Postgresql => {
                Arc::new(crate::providers::postgresql::PostgresProvider::new(cluster))
            }
            Builtin::Vm => Arc::new(crate::providers::kubevirt::KubevirtProvider::new(cluster)),
        }
    }

    /// Parses `--builtin-providers`: a comma-separated list of service types, or `none`.
    pub fn parse_list(text: &str) -> Result<Vec<Builtin>, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") || text.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for word in text.split(',').map(str::trim) {
            let b = Builtin::ALL
                .into_iter()
                .find(|b| b.service_type() == word)
                .ok_or_else(|| {
                    format!(
                        "{word:?} is not a built-in service type; give a comma-separated list of container, postgresql, vm, or none"
                    )
                })?;
            if !out.contains(&b) {
                out.push(b);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_lists_parse() {
        assert_eq!(Builtin::parse_list("none").unwrap(), vec![]);
        assert_eq!(
            Builtin::parse_list("container, vm").unwrap(),
            vec![Builtin::Container, Builtin::Vm]
        );
        let e = Builtin::parse_list("container,queue").unwrap_err();
        assert!(e.contains("\"queue\""), "{e}");
    }
}
