//! The flags each topology reads ([`TopologyFlags`]), in one place: the command line offers
//! these and refuses the others.

use crate::domain::flags::{FlagGroups, TopologyFlags};
#[cfg(feature = "agent")]
use crate::infra::control_plane::AgentTopology;
use crate::infra::either::EitherTopology;
use crate::infra::kube::K8sTopology;
use crate::infra::multi_site::MultiSiteTopology;
#[cfg(feature = "okd")]
use crate::infra::okd::HAClusterTopology;
#[cfg(feature = "agent")]
use crate::infra::region_site::RegionSiteTopology;
use crate::infra::render::RenderTopology;
use crate::infra::split_plane::SplitPlaneTopology;
#[cfg(feature = "agent")]
use crate::infra::tenant_admin_topology::TenantAdminTopology;

impl TopologyFlags for RenderTopology {
    const FLAGS: FlagGroups = FlagGroups::RENDER;
}

impl TopologyFlags for K8sTopology {
    const FLAGS: FlagGroups = FlagGroups::KUBERNETES;
}

#[cfg(feature = "okd")]
impl TopologyFlags for HAClusterTopology {
    const FLAGS: FlagGroups = FlagGroups::BARE_METAL;
}

#[cfg(feature = "agent")]
impl TopologyFlags for AgentTopology {
    // Ops go through the control plane: no kubeconfig, but --prune and --force-conflicts travel.
    const FLAGS: FlagGroups = FlagGroups {
        ownership: true,
        ..FlagGroups::RENDER
    };
}

#[cfg(feature = "agent")]
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

#[cfg(feature = "agent")]
impl<S: TopologyFlags, A> TopologyFlags for RegionSiteTopology<S, A> {
    const FLAGS: FlagGroups = S::FLAGS;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infra::default_topology::DefaultTopology;

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
    }
}
