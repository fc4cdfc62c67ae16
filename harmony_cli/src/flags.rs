//! Which flags a program offers, decided by its topology type: a Kubernetes program has no
//! bare-metal flags, an OKD program no `--kubeconfig`, so `--help` shows only what the program
//! reads and a flag it would ignore is refused (exit 2) instead of silently doing nothing.

use harmony::infra::agent::AgentTopology;
use harmony::infra::either::EitherTopology;
use harmony::infra::kube::K8sTopology;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::okd::HAClusterTopology;
use harmony::infra::region_site::RegionSiteTopology;
use harmony::infra::render::RenderTopology;
use harmony::infra::split_plane::SplitPlaneTopology;
use harmony::infra::tenant_admin::TenantAdminTopology;

/// The groups of flags, beyond the common ones, a program accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlagGroups {
    /// `--kubeconfig`, `--context`: the topology can apply to a Kubernetes cluster.
    pub cluster: bool,
    /// `--prune`, `--force-conflicts`: the topology applies objects it owns to a live API.
    pub ownership: bool,
    /// `--apply`, `--inventory`, `--roles`, `--discovery-timeout`: bare-metal services.
    pub bare_metal: bool,
}

impl FlagGroups {
    /// Only the common flags: a topology that renders files.
    pub const RENDER: Self = Self {
        cluster: false,
        ownership: false,
        bare_metal: false,
    };
    /// A topology that applies to the cluster the flags name.
    pub const KUBERNETES: Self = Self {
        cluster: true,
        ownership: true,
        bare_metal: false,
    };
    /// A bare-metal topology (dnsmasq, haproxy, HTTP boot, discovered hosts).
    pub const BARE_METAL: Self = Self {
        cluster: false,
        ownership: false,
        bare_metal: true,
    };

    /// The flags of either group: for a topology that is one of two, or made of two.
    pub const fn union(self, other: Self) -> Self {
        Self {
            cluster: self.cluster || other.cluster,
            ownership: self.ownership || other.ownership,
            bare_metal: self.bare_metal || other.bare_metal,
        }
    }

    /// The group `flag` (e.g. `--apply`) belongs to, when it is not a common flag.
    pub(crate) fn group_of(flag: &str) -> Option<(&'static str, &'static [&'static str])> {
        GROUPS
            .iter()
            .find(|(_, flags)| flags.contains(&flag))
            .map(|(name, flags)| (*name, *flags))
    }
}

const GROUPS: [(&str, &[&str]); 3] = [
    ("a Kubernetes cluster flag", &["--kubeconfig", "--context"]),
    (
        "a flag for topologies that apply live objects",
        &["--prune", "--force-conflicts"],
    ),
    (
        "a bare-metal flag",
        &["--apply", "--inventory", "--roles", "--discovery-timeout"],
    ),
];

/// The flags a topology reads from the [`RunContext`](harmony::domain::RunContext), so
/// `harmony_cli::run` offers exactly those. Implement it for your own topology type:
///
/// ```
/// use harmony_cli::{FlagGroups, TopologyFlags};
/// struct LabTopology;
/// impl TopologyFlags for LabTopology {
///     const FLAGS: FlagGroups = FlagGroups::KUBERNETES;
/// }
/// assert!(!LabTopology::FLAGS.bare_metal);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which command-line flags it reads",
    label = "harmony_cli offers flags per topology",
    note = "implement `harmony_cli::TopologyFlags` for `{Self}`: `const FLAGS: FlagGroups = FlagGroups::KUBERNETES;` (or RENDER, BARE_METAL, or a union)"
)]
pub trait TopologyFlags {
    /// The groups of flags the topology reads.
    const FLAGS: FlagGroups;
}

impl<T: TopologyFlags + ?Sized> TopologyFlags for &T {
    const FLAGS: FlagGroups = T::FLAGS;
}

impl TopologyFlags for RenderTopology {
    const FLAGS: FlagGroups = FlagGroups::RENDER;
}

impl TopologyFlags for K8sTopology {
    const FLAGS: FlagGroups = FlagGroups::KUBERNETES;
}

impl TopologyFlags for HAClusterTopology {
    const FLAGS: FlagGroups = FlagGroups::BARE_METAL;
}

impl TopologyFlags for AgentTopology {
    // Ops go through the control plane: no kubeconfig, but --prune and --force-conflicts travel.
    const FLAGS: FlagGroups = FlagGroups {
        ownership: true,
        ..FlagGroups::RENDER
    };
}

impl<A> TopologyFlags for TenantAdminTopology<A> {
    const FLAGS: FlagGroups = FlagGroups::RENDER;
}

impl<L: TopologyFlags, R: TopologyFlags> TopologyFlags for EitherTopology<L, R> {
    const FLAGS: FlagGroups = L::FLAGS.union(R::FLAGS);
}

impl<S: TopologyFlags> TopologyFlags for MultiSiteTopology<S> {
    const FLAGS: FlagGroups = S::FLAGS;
}

impl<C: TopologyFlags, D: TopologyFlags> TopologyFlags for SplitPlaneTopology<C, D> {
    const FLAGS: FlagGroups = C::FLAGS.union(D::FLAGS);
}

impl<S: TopologyFlags, A> TopologyFlags for RegionSiteTopology<S, A> {
    const FLAGS: FlagGroups = S::FLAGS;
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony::infra::default_topology::DefaultTopology;

    #[test]
    fn each_topology_offers_its_own_flags() {
        assert_eq!(DefaultTopology::FLAGS, FlagGroups::KUBERNETES);
        assert_eq!(
            <MultiSiteTopology<DefaultTopology>>::FLAGS,
            FlagGroups::KUBERNETES
        );
        assert_eq!(
            <SplitPlaneTopology<RenderTopology, RenderTopology>>::FLAGS,
            FlagGroups::RENDER
        );
        assert_eq!(HAClusterTopology::FLAGS, FlagGroups::BARE_METAL);
        assert_eq!(
            FlagGroups::group_of("--apply").map(|g| g.0),
            Some("a bare-metal flag")
        );
        assert_eq!(FlagGroups::group_of("--plan"), None);
    }
}
