//! What the agent rollout does on the control plane for its (region, zone), decided from what
//! the control plane reports: pure decisions, tested here without a control plane.

use harmony::domain::ChangeAction;
use harmony::domain::capability::RegionState;

/// What the rollout does on the control plane for one zone of a region before it applies the
/// zone's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZoneStep {
    /// The region does not exist: create it with this zone (its first), receiving the token.
    CreateRegion,
    /// The region exists without this zone: add the zone, receiving its agent's token.
    AddZone,
    /// The zone exists and its agent never obtained an identity: mint a new token (the
    /// previous one may have expired).
    NewToken,
    /// The zone's agent holds an identity: no token is minted.
    Bootstrapped,
    /// The region was decommissioned: the rollout refuses rather than resurrect it.
    RegionDecommissioned,
    /// The zone was decommissioned: the rollout refuses rather than resurrect it.
    ZoneDecommissioned,
}

impl ZoneStep {
    /// The step for zone `zone` given the region as the control plane reports it (`None`:
    /// the region does not exist, or was not read, as in render mode).
    pub(crate) fn decide(region: Option<&RegionState>, zone: &str) -> Self {
        let Some(region) = region else {
            return ZoneStep::CreateRegion;
        };
        if region.decommissioned {
            return ZoneStep::RegionDecommissioned;
        }
        match region.zone(zone) {
            None => ZoneStep::AddZone,
            Some(z) if z.decommissioned => ZoneStep::ZoneDecommissioned,
            // The agent holds an identity: never mint another token.
            Some(z) if z.bootstrapped => ZoneStep::Bootstrapped,
            Some(_) => ZoneStep::NewToken,
        }
    }

    /// The control-plane object this step changes and how, when it changes one: the region
    /// itself when it is created or its first zone re-tokened (as for a one-zone region), the
    /// zone (`control-plane Zone <region>/<zone>`) when it is added or re-tokened.
    pub(crate) fn change(
        self,
        region: &str,
        zone: &str,
        state: Option<&RegionState>,
    ) -> Option<(String, ChangeAction)> {
        let region_object = format!("control-plane Region {region}");
        let zone_object = format!("control-plane Zone {region}/{zone}");
        match self {
            ZoneStep::CreateRegion => Some((region_object, ChangeAction::Create)),
            ZoneStep::AddZone => Some((zone_object, ChangeAction::Create)),
            ZoneStep::NewToken if state.is_none_or(|s| s.is_first_zone(zone)) => {
                Some((region_object, ChangeAction::Update))
            }
            ZoneStep::NewToken => Some((zone_object, ChangeAction::Update)),
            ZoneStep::Bootstrapped
            | ZoneStep::RegionDecommissioned
            | ZoneStep::ZoneDecommissioned => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony::domain::capability::{RegionHealth, ZoneState};

    fn zone(name: &str, bootstrapped: bool, decommissioned: bool) -> ZoneState {
        ZoneState {
            zone: name.into(),
            health: RegionHealth::Unavailable,
            health_reason: "never connected".into(),
            bootstrapped,
            decommissioned,
            agent_version: None,
        }
    }

    /// Region `eu` whose first zone is `a` (bootstrapped), with `others` after it.
    fn region(others: Vec<ZoneState>) -> RegionState {
        let mut zones = vec![zone("a", true, false)];
        zones.extend(others);
        RegionState {
            region: "eu".into(),
            health: RegionHealth::Healthy,
            health_reason: "heartbeats on time".into(),
            bootstrapped: true,
            decommissioned: false,
            agent_version: Some("1.0".into()),
            zones,
        }
    }

    #[test]
    fn a_missing_region_is_created_with_the_zone() {
        let step = ZoneStep::decide(None, "a");
        assert_eq!(step, ZoneStep::CreateRegion);
        assert_eq!(
            step.change("eu", "a", None),
            Some(("control-plane Region eu".into(), ChangeAction::Create))
        );
    }

    #[test]
    fn a_second_zone_of_a_bootstrapped_region_is_added_with_its_own_token() {
        // The region's health and `bootstrapped` are zone a's: they must not decide for b.
        let eu = region(Vec::new());
        let step = ZoneStep::decide(Some(&eu), "b");
        assert_eq!(step, ZoneStep::AddZone);
        assert_eq!(
            step.change("eu", "b", Some(&eu)),
            Some(("control-plane Zone eu/b".into(), ChangeAction::Create))
        );
    }

    #[test]
    fn a_zone_whose_agent_never_connected_gets_a_new_token_even_when_the_region_is_bootstrapped() {
        let eu = region(vec![zone("b", false, false)]);
        let step = ZoneStep::decide(Some(&eu), "b");
        assert_eq!(step, ZoneStep::NewToken);
        assert_eq!(
            step.change("eu", "b", Some(&eu)),
            Some(("control-plane Zone eu/b".into(), ChangeAction::Update))
        );
    }

    #[test]
    fn a_one_zone_region_never_connected_is_re_tokened_as_the_region() {
        let mut eu = region(Vec::new());
        eu.zones[0].bootstrapped = false;
        eu.bootstrapped = false;
        let step = ZoneStep::decide(Some(&eu), "a");
        assert_eq!(step, ZoneStep::NewToken);
        assert_eq!(
            step.change("eu", "a", Some(&eu)),
            Some(("control-plane Region eu".into(), ChangeAction::Update))
        );
    }

    #[test]
    fn a_bootstrapped_zone_mints_nothing_and_changes_nothing() {
        let eu = region(vec![zone("b", true, false)]);
        for z in ["a", "b"] {
            let step = ZoneStep::decide(Some(&eu), z);
            assert_eq!(step, ZoneStep::Bootstrapped, "zone {z}");
            assert_eq!(step.change("eu", z, Some(&eu)), None);
        }
    }

    #[test]
    fn decommissioned_regions_and_zones_are_refused_not_resurrected() {
        let mut gone = region(vec![zone("b", false, false)]);
        gone.decommissioned = true;
        assert_eq!(
            ZoneStep::decide(Some(&gone), "b"),
            ZoneStep::RegionDecommissioned
        );
        // Even a zone the region never had: the region is gone.
        assert_eq!(
            ZoneStep::decide(Some(&gone), "c"),
            ZoneStep::RegionDecommissioned
        );
        let eu = region(vec![zone("b", false, true)]);
        assert_eq!(
            ZoneStep::decide(Some(&eu), "b"),
            ZoneStep::ZoneDecommissioned
        );
        assert_eq!(ZoneStep::decide(Some(&eu), "a"), ZoneStep::Bootstrapped);
    }
}
