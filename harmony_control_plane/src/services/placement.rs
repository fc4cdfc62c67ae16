//! Where a service instance goes: the advertising region with the fewest live instances, a
//! region holding the type degraded (the create is queued there), or a refusal naming where the
//! type is available. Pure functions of what every region offers now.

use harmony_agent_protocol::Services;
use harmony_api::Health;

/// Whether a region of `health` whose agent sent `services` advertises `service_type`: both the
/// region and the type's provider must be healthy.
pub fn advertises(health: Health, services: &Services, service_type: &str) -> bool {
    health == Health::Healthy
        && services
            .offers
            .iter()
            .any(|o| o.service_type == service_type && o.advertised())
}

/// Whether such a region holds `service_type` degraded: it is not unavailable, has an offer for
/// the type, and does not advertise it. Creates for a degraded type are queued, not refused.
pub fn holds_degraded(health: Health, services: &Services, service_type: &str) -> bool {
    health != Health::Unavailable
        && services
            .offers
            .iter()
            .any(|o| o.service_type == service_type)
        && !advertises(health, services, service_type)
}

/// The sorted types a region of `health` advertises.
pub fn advertised_types(health: Health, services: &Services) -> Vec<String> {
    let mut types: Vec<String> = services
        .offers
        .iter()
        .filter(|o| advertises(health, services, &o.service_type))
        .map(|o| o.service_type.clone())
        .collect();
    types.sort();
    types.dedup();
    types
}

/// What placement knows of one region.
#[derive(Debug, Clone)]
pub struct RegionOffers {
    /// The region.
    pub name: String,
    /// The zone a create placed in this region goes to (the one whose health and services
    /// these are).
    pub zone: String,
    /// Whether it was decommissioned (never a placement target).
    pub decommissioned: bool,
    /// Its health now.
    pub health: Health,
    /// The latest `services` frame of its agent.
    pub services: Services,
    /// Instances placed there that are neither failed nor being deleted.
    pub live_instances: usize,
}

impl RegionOffers {
    /// Whether this region advertises `service_type` now.
    pub fn advertises(&self, service_type: &str) -> bool {
        !self.decommissioned && advertises(self.health, &self.services, service_type)
    }

    /// Whether this region holds `service_type` degraded now.
    pub fn degraded(&self, service_type: &str) -> bool {
        !self.decommissioned && holds_degraded(self.health, &self.services, service_type)
    }

    /// For people: why the region does not advertise `service_type` now.
    pub fn why_degraded(&self, service_type: &str) -> String {
        if self.health != Health::Healthy {
            return format!("region \"{}\" is {}", self.name, health_word(self.health));
        }
        match self
            .services
            .offers
            .iter()
            .find(|o| o.service_type == service_type)
        {
            Some(o) if o.detail.is_empty() => format!(
                "provider \"{}\" of service type \"{service_type}\" in region \"{}\" is {}",
                o.provider, self.name, o.health
            ),
            Some(o) => format!(
                "provider \"{}\" of service type \"{service_type}\" in region \"{}\" is {}: {}",
                o.provider, self.name, o.health, o.detail
            ),
            None => format!(
                "region \"{}\" does not advertise service type \"{service_type}\" now",
                self.name
            ),
        }
    }
}

/// The word for a health state, as the API writes it.
pub fn health_word(h: Health) -> &'static str {
    match h {
        Health::Healthy => "healthy",
        Health::Unhealthy => "unhealthy",
        Health::Unavailable => "unavailable",
    }
}

/// Where a create goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Send it to this region now.
    Dispatch(String),
    /// Queue it for this region until it advertises the type.
    Queue {
        /// The region.
        region: String,
        /// Why it is not advertised now.
        why: String,
    },
    /// The named region does not exist.
    UnknownRegion(String),
    /// The named region is decommissioned.
    Decommissioned(String),
    /// No suitable region: refused.
    Unavailable {
        /// For people: what is wrong and where the type is available.
        message: String,
        /// Regions advertising the type now.
        available_in: Vec<String>,
        /// Regions holding it degraded now.
        degraded_in: Vec<String>,
    },
}

/// Chooses where a create of `service_type` goes, in the region `named` or, when `None`, the
/// advertising region with the fewest live instances (ties broken by name).
pub fn place(service_type: &str, named: Option<&str>, regions: &[RegionOffers]) -> Placement {
    let mut regions: Vec<&RegionOffers> = regions.iter().collect();
    regions.sort_by(|a, b| a.name.cmp(&b.name));
    let available_in: Vec<String> = regions
        .iter()
        .filter(|r| r.advertises(service_type))
        .map(|r| r.name.clone())
        .collect();
    let degraded_in: Vec<String> = regions
        .iter()
        .filter(|r| r.degraded(service_type))
        .map(|r| r.name.clone())
        .collect();
    let fewest = |pred: &dyn Fn(&RegionOffers) -> bool| {
        regions
            .iter()
            .filter(|r| pred(r))
            .min_by(|a, b| {
                a.live_instances
                    .cmp(&b.live_instances)
                    .then_with(|| a.name.cmp(&b.name))
            })
            .copied()
    };
    match named {
        Some(name) => {
            let Some(r) = regions.iter().find(|r| r.name == name) else {
                return Placement::UnknownRegion(name.to_string());
            };
            if r.decommissioned {
                return Placement::Decommissioned(name.to_string());
            }
            if r.advertises(service_type) {
                return Placement::Dispatch(name.to_string());
            }
            if r.degraded(service_type) {
                return Placement::Queue {
                    region: name.to_string(),
                    why: r.why_degraded(service_type),
                };
            }
            let elsewhere = if available_in.is_empty() {
                "it is available in no region now".to_string()
            } else {
                format!("it is available in: {}", available_in.join(", "))
            };
            Placement::Unavailable {
                message: format!(
                    "service type \"{service_type}\" is not available in region \"{name}\"; {elsewhere}"
                ),
                available_in,
                degraded_in,
            }
        }
        None => {
            if let Some(r) = fewest(&|r| r.advertises(service_type)) {
                return Placement::Dispatch(r.name.clone());
            }
            if let Some(r) = fewest(&|r| r.degraded(service_type)) {
                return Placement::Queue {
                    region: r.name.clone(),
                    why: r.why_degraded(service_type),
                };
            }
            let listed: Vec<String> = regions
                .iter()
                .filter(|r| !r.decommissioned)
                .map(|r| {
                    format!(
                        "{}: [{}]",
                        r.name,
                        advertised_types(r.health, &r.services).join(", ")
                    )
                })
                .collect();
            let listed = if listed.is_empty() {
                "none (no region exists; create one with POST /v1/admin/regions)".to_string()
            } else {
                listed.join(", ")
            };
            Placement::Unavailable {
                message: format!(
                    "no region advertises service type \"{service_type}\" now; advertised types: {listed}"
                ),
                available_in,
                degraded_in,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_agent_protocol::{ProviderHealth, ServiceOffer};

    fn offer(t: &str, health: ProviderHealth) -> ServiceOffer {
        ServiceOffer {
            service_type: t.into(),
            provider: format!("{t}-provider"),
            builtin: false,
            health,
            detail: String::new(),
        }
    }

    fn region(name: &str, health: Health, offers: Vec<ServiceOffer>, live: usize) -> RegionOffers {
        RegionOffers {
            name: name.into(),
            zone: "z1".into(),
            decommissioned: false,
            health,
            services: Services { offers },
            live_instances: live,
        }
    }

    #[test]
    fn a_type_is_advertised_only_while_region_and_provider_are_healthy() {
        let services = Services {
            offers: vec![
                offer("queue", ProviderHealth::Healthy),
                offer("db", ProviderHealth::Unhealthy),
            ],
        };
        assert!(advertises(Health::Healthy, &services, "queue"));
        assert!(!holds_degraded(Health::Healthy, &services, "queue"));
        assert!(!advertises(Health::Healthy, &services, "db"));
        assert!(holds_degraded(Health::Healthy, &services, "db"));
        // An unhealthy region advertises nothing but still holds its types degraded.
        assert!(!advertises(Health::Unhealthy, &services, "queue"));
        assert!(holds_degraded(Health::Unhealthy, &services, "queue"));
        // An unavailable region holds nothing; a type without an offer is neither.
        assert!(!holds_degraded(Health::Unavailable, &services, "queue"));
        assert!(!advertises(Health::Healthy, &services, "vm"));
        assert!(!holds_degraded(Health::Healthy, &services, "vm"));
        assert_eq!(advertised_types(Health::Healthy, &services), vec!["queue"]);
        assert!(advertised_types(Health::Unhealthy, &services).is_empty());
    }

    #[test]
    fn placement_prefers_the_advertising_region_with_fewest_instances() {
        let healthy = |t| offer(t, ProviderHealth::Healthy);
        let regions = vec![
            region("c", Health::Healthy, vec![healthy("queue")], 1),
            region("b", Health::Healthy, vec![healthy("queue")], 1),
            region("a", Health::Healthy, vec![healthy("queue")], 2),
        ];
        // Fewest live instances wins; the tie between b and c goes by name.
        assert_eq!(
            place("queue", None, &regions),
            Placement::Dispatch("b".into())
        );
        // A named region that advertises the type gets it even with more instances.
        assert_eq!(
            place("queue", Some("a"), &regions),
            Placement::Dispatch("a".into())
        );
    }

    #[test]
    fn degraded_types_are_queued_and_missing_ones_refused_with_where_they_are() {
        let regions = vec![
            region(
                "a",
                Health::Healthy,
                vec![
                    offer("container", ProviderHealth::Healthy),
                    offer("queue", ProviderHealth::Unhealthy),
                ],
                0,
            ),
            region(
                "b",
                Health::Unhealthy,
                vec![offer("container", ProviderHealth::Healthy)],
                0,
            ),
            region(
                "c",
                Health::Unavailable,
                vec![offer("db", ProviderHealth::Healthy)],
                0,
            ),
        ];
        // Unhealthy offer in a healthy region: queued there, with the reason.
        match place("queue", None, &regions) {
            Placement::Queue { region, why } => {
                assert_eq!(region, "a");
                assert!(
                    why.contains("unhealthy") && why.contains("queue-provider"),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Healthy offer in an unhealthy region: degraded, so a named create is queued.
        match place("container", Some("b"), &regions) {
            Placement::Queue { region, why } => {
                assert_eq!(region, "b");
                assert!(why.contains("region \"b\" is unhealthy"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Unnamed: the advertising region wins over the degraded one.
        assert_eq!(
            place("container", None, &regions),
            Placement::Dispatch("a".into())
        );
        // A region without the type: refused, listing where it is available.
        match place("container", Some("c"), &regions) {
            Placement::Unavailable {
                message,
                available_in,
                degraded_in,
            } => {
                assert_eq!(
                    message,
                    "service type \"container\" is not available in region \"c\"; it is available in: a"
                );
                assert_eq!(available_in, vec!["a".to_string()]);
                assert_eq!(degraded_in, vec!["b".to_string()]);
            }
            other => panic!("{other:?}"),
        }
        // An unavailable region's offers count for nothing.
        match place("db", None, &regions) {
            Placement::Unavailable {
                message,
                available_in,
                ..
            } => {
                assert_eq!(
                    message,
                    "no region advertises service type \"db\" now; advertised types: a: [container], b: [], c: []"
                );
                assert!(available_in.is_empty());
            }
            other => panic!("{other:?}"),
        }
        match place("db", Some("a"), &regions) {
            Placement::Unavailable { message, .. } => {
                assert!(
                    message.ends_with("it is available in no region now"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_and_decommissioned_regions_are_refused() {
        let mut gone = region(
            "old",
            Health::Healthy,
            vec![offer("queue", ProviderHealth::Healthy)],
            0,
        );
        gone.decommissioned = true;
        let regions = vec![gone];
        assert_eq!(
            place("queue", Some("nowhere"), &regions),
            Placement::UnknownRegion("nowhere".into())
        );
        assert_eq!(
            place("queue", Some("old"), &regions),
            Placement::Decommissioned("old".into())
        );
        assert!(matches!(
            place("queue", None, &regions),
            Placement::Unavailable { .. }
        ));
    }
}
