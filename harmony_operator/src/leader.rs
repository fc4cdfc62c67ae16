//! Leader election: the operator runs as several replicas and only the one holding a
//! `coordination.k8s.io/v1` Lease reconciles.
//!
//! The election itself is kube-lease-manager's (acquire, renew `grace` seconds before expiry,
//! take over an expired lease, release on shutdown). On top of it, a fence: the leader reads the
//! Lease back and reconciles only while the Lease names it with a renewal that is still valid
//! by its own clock, minus a margin. The crate reports losing the lease only once it can read
//! the Lease again, so without the fence a leader cut off from the API server would keep
//! reconciling (through the sites it can still reach) after a follower took over.

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

use harmony::types::Dns1123Label;

use crate::controller::{self, OperatorConfig};

/// Where and how the replicas elect their leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// The Lease's name (`--lease-name`).
    pub lease_name: String,
    /// The Lease's namespace, which must exist (`--lease-namespace`).
    pub lease_namespace: String,
    /// How long a lease stays valid after its holder's last renewal (`--lease-duration-s`),
    /// whole seconds, at least 2: a dead leader is replaced within about this long.
    pub lease_duration: Duration,
    /// This replica's `holderIdentity`; unique per process.
    pub identity: String,
}

impl Default for LeaderElection {
    fn default() -> Self {
        Self {
            lease_name: "harmony-operator".into(),
            lease_namespace: "harmony-system".into(),
            lease_duration: Duration::from_secs(15),
            identity: default_identity(),
        }
    }
}

/// Why the elected operator stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// A setting is unusable; the message names it and the fix.
    #[error("{0}")]
    Invalid(String),
    /// The Lease could not be created or read.
    #[error("lease {namespace}/{name}: {reason}")]
    Lease {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// What the API server said, and what to do.
        reason: String,
    },
    /// The election task ended (it only does when its channel fails).
    #[error("the leader election stopped: {0}")]
    Stopped(String),
}

/// `<hostname>_<pid><random>`: the pod's name in a cluster, unique per process even when two
/// replicas share a host (as client-go's controllers do, with a UUID).
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "harmony-operator".into());
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("{host}_{}{:08x}", std::process::id(), random as u32)
}

impl LeaderElection {
    /// Checks the settings before anything is created.
    pub fn validate(&self) -> Result<(), LeaderError> {
        Dns1123Label::parse(&self.lease_namespace).map_err(|e| {
            LeaderError::Invalid(format!(
                "invalid lease namespace (--lease-namespace) {:?}: {e}; name an existing namespace such as \"harmony-system\"",
                self.lease_namespace
            ))
        })?;
        let name_ok = !self.lease_name.is_empty()
            && self.lease_name.len() <= 253
            && self
                .lease_name
                .split('.')
                .all(|l| Dns1123Label::parse(l).is_ok());
        if !name_ok {
            return Err(LeaderError::Invalid(format!(
                "invalid lease name (--lease-name) {:?}: it must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.'); use e.g. \"harmony-operator\"",
                self.lease_name
            )));
        }
        if self.lease_duration.as_secs() < 2 || self.lease_duration.subsec_nanos() != 0 {
            return Err(LeaderError::Invalid(format!(
                "invalid lease duration (--lease-duration-s) {:?}: it must be whole seconds, at least 2 (the holder renews a third of it before expiry); 15 is the default",
                self.lease_duration
            )));
        }
        if self.identity.is_empty() {
            return Err(LeaderError::Invalid(
                "the lease identity is empty; leave it to default_identity()".into(),
            ));
        }
        Ok(())
    }

    /// Seconds before expiry at which the holder renews: a third of the duration.
    fn grace(&self) -> u64 {
        (self.lease_duration.as_secs() / 3).max(1)
    }

    /// The leader stops reconciling this long before its lease expires by its own clock, so a
    /// follower whose clock is up to this much behind cannot overlap with it.
    fn margin(&self) -> Duration {
        Duration::from_secs(self.grace()) / 2
    }
}

/// How much longer `lease` is held by `identity`, stopping `margin` early, as of `now`.
pub(crate) fn remaining(
    lease: &Lease,
    identity: &str,
    now: SystemTime,
    margin: Duration,
) -> Option<Duration> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed: SystemTime = spec.renew_time.as_ref()?.0.into();
    let duration = Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).ok()?);
    renewed
        .checked_add(duration)?
        .checked_sub(margin)?
        .duration_since(now)
        .ok()
        .filter(|d| !d.is_zero())
}

/// Whether this replica may reconcile right now: the fence.
pub(crate) struct Gate {
    api: Api<Lease>,
    name: String,
    identity: String,
    margin: Duration,
    valid_until: Mutex<Option<Instant>>,
}

impl Gate {
    /// True while the last confirmation says the lease is ours (checked before each reconcile).
    pub(crate) fn valid(&self) -> bool {
        self.valid_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| Instant::now() < t)
    }

    /// Reads the Lease and records until when it is ours. A failed read changes nothing: the
    /// last confirmation then runs out by itself.
    async fn confirm(&self) -> bool {
        let until = match self.api.get_opt(&self.name).await {
            Ok(lease) => lease
                .and_then(|l| remaining(&l, &self.identity, SystemTime::now(), self.margin))
                .map(|d| Instant::now() + d),
            Err(e) => {
                log::warn!("leader: reading lease {}: {e}", self.name);
                return self.valid();
            }
        };
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
        self.valid()
    }

    /// How often the leader reads the Lease back.
    fn poll(&self) -> Duration {
        (self.margin / 2).max(Duration::from_millis(200))
    }

    /// Returns once the election says this replica leads and the Lease confirms it.
    async fn until_leading(&self, leading: &mut watch::Receiver<bool>) -> Result<(), LeaderError> {
        loop {
            if *leading.borrow_and_update() && self.confirm().await {
                return Ok(());
            }
            tokio::select! {
                changed = leading.changed() => changed.map_err(|e| LeaderError::Stopped(e.to_string()))?,
                () = tokio::time::sleep(self.poll()) => {}
            }
        }
    }

    /// Returns why, once this replica may no longer reconcile.
    async fn until_lost(&self, leading: &mut watch::Receiver<bool>) -> Result<String, LeaderError> {
        loop {
            tokio::select! {
                changed = leading.changed() => {
                    changed.map_err(|e| LeaderError::Stopped(e.to_string()))?;
                    if !*leading.borrow_and_update() {
                        return Ok("another replica holds the lease".into());
                    }
                }
                () = tokio::time::sleep(self.poll()) => {
                    if !self.confirm().await {
                        return Ok("the lease could not be confirmed before it runs out".into());
                    }
                }
            }
        }
    }
}

/// The election task of kube-lease-manager and its channel (true while it holds the lease).
type Watching = (
    watch::Receiver<bool>,
    tokio::task::JoinHandle<kube_lease_manager::Result<LeaseManager>>,
);

/// Starts kube-lease-manager's election task for `election`.
async fn elect(client: &Client, election: &LeaderElection) -> Result<Watching, LeaderError> {
    let manager = LeaseManagerBuilder::new(client.clone(), &election.lease_name)
        .with_namespace(&election.lease_namespace)
        .with_identity(&election.identity)
        .with_duration(election.lease_duration.as_secs())
        .with_grace(election.grace())
        .build()
        .await
        .map_err(|e| LeaderError::Lease {
            namespace: election.lease_namespace.clone(),
            name: election.lease_name.clone(),
            reason: format!(
                "{e}; the namespace must exist (--lease-namespace) and the operator needs get/create/patch on leases.coordination.k8s.io there"
            ),
        })?;
    Ok(manager.watch().await)
}

/// Stops the election task; it releases the lease first when it holds it.
async fn stop(watching: Watching, election: &LeaderElection) {
    let (leading, task) = watching;
    let held = *leading.borrow();
    drop(leading);
    let lease = format!("{}/{}", election.lease_namespace, election.lease_name);
    match task.await {
        Ok(Ok(_)) if held => log::info!("leader: released lease {lease}"),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => log::warn!("leader: releasing lease {lease}: {e}"),
        Err(e) => log::warn!("leader: the election task failed: {e}"),
    }
}

/// Yields each time the Lease is seen without a holder (released by a leader that stopped).
fn releases(api: Api<Lease>, name: &str) -> impl Stream<Item = ()> + Send {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config)
        .default_backoff()
        .applied_objects()
        .filter_map(|lease| {
            let free = lease.is_ok_and(|l| {
                l.spec
                    .and_then(|s| s.holder_identity)
                    .is_none_or(|h| h.is_empty())
            });
            std::future::ready(free.then_some(()))
        })
}

/// Runs the controllers while this replica holds the Lease, until `shutdown` resolves; then
/// releases the Lease so another replica takes over at once. Resources are never reconciled
/// by two replicas at once: a replica that loses the lease stops (in-flight reconciles are
/// cancelled) before another can acquire it, given clocks that agree within a sixth of the
/// lease duration.
pub async fn run_elected(
    client: Client,
    config: OperatorConfig,
    election: LeaderElection,
    shutdown: impl Future<Output = ()>,
) -> Result<(), LeaderError> {
    election.validate()?;
    let (name, namespace) = (&election.lease_name, &election.lease_namespace);
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let mut watching = elect(&client, &election).await?;
    let gate = Arc::new(Gate {
        api: api.clone(),
        name: name.clone(),
        identity: election.identity.clone(),
        margin: election.margin(),
        valid_until: Mutex::new(None),
    });
    let ctx = controller::context(client.clone(), config, Some(gate.clone()));
    log::info!(
        "leader: waiting for lease {namespace}/{name} as {} (duration {:?})",
        election.identity,
        election.lease_duration
    );
    let mut shutdown = std::pin::pin!(shutdown);
    let outcome = 'run: loop {
        // Following. kube-lease-manager sleeps until the expiry it last read, so a lease
        // released early (a leader stopped with SIGTERM) is noticed through a watch on the
        // Lease, and the election restarted to take it now.
        let mut released = std::pin::pin!(releases(api.clone(), name));
        loop {
            tokio::select! {
                () = &mut shutdown => break 'run Ok(()),
                led = gate.until_leading(&mut watching.0) => match led {
                    Ok(()) => break,
                    Err(e) => break 'run Err(e),
                },
                Some(()) = released.next() => {
                    if !*watching.0.borrow() {
                        log::info!("leader: lease {namespace}/{name} is free; taking part again");
                        stop(watching, &election).await;
                        // At most one restart per poll period, however often it is seen free.
                        tokio::time::sleep(gate.poll()).await;
                        watching = match elect(&client, &election).await {
                            Ok(w) => w,
                            Err(e) => return Err(e),
                        };
                    }
                }
            }
        }
        log::info!(
            "leader: acquired lease {namespace}/{name} as {}; reconciling",
            election.identity
        );
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            () = controller::run_with(ctx.clone()) => break Err(LeaderError::Stopped("the controllers returned".into())),
            lost = gate.until_lost(&mut watching.0) => match lost {
                Ok(why) => log::warn!("leader: {why}; stopped reconciling"),
                Err(e) => break Err(e),
            },
        }
    };
    // Closing the channel makes the election task release the lease before it returns.
    stop(watching, &election).await;
    outcome.map_err(|e| match e {
        LeaderError::Stopped(reason) => LeaderError::Lease {
            namespace: namespace.clone(),
            name: name.clone(),
            reason: format!("election stopped: {reason}"),
        },
        e => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: &str, renewed: SystemTime, seconds: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(renewed.try_into().unwrap())),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn the_lease_is_ours_only_while_it_names_us_and_is_renewed_recently_enough() {
        let now = SystemTime::now();
        let margin = Duration::from_millis(500);
        let ours = lease("a", now - Duration::from_secs(1), 4);
        let left = remaining(&ours, "a", now, margin).unwrap();
        assert!(left <= Duration::from_millis(2500) && left > Duration::from_secs(2));
        assert_eq!(remaining(&ours, "b", now, margin), None, "someone else's");
        let stale = lease("a", now - Duration::from_millis(3600), 4);
        assert_eq!(
            remaining(&stale, "a", now, margin),
            None,
            "inside the margin"
        );
        assert_eq!(
            remaining(&Lease::default(), "a", now, margin),
            None,
            "empty"
        );
    }

    #[test]
    fn bad_settings_are_refused_naming_the_flag() {
        let bad = |e: LeaderElection| e.validate().unwrap_err().to_string();
        let ok = LeaderElection::default();
        assert!(ok.validate().is_ok());
        let e = bad(LeaderElection {
            lease_duration: Duration::from_secs(1),
            ..ok.clone()
        });
        assert!(
            e.contains("--lease-duration-s") && e.contains("at least 2"),
            "{e}"
        );
        let e = bad(LeaderElection {
            lease_namespace: "Harmony_System".into(),
            ..ok.clone()
        });
        assert!(e.contains("--lease-namespace"), "{e}");
        let e = bad(LeaderElection {
            lease_name: "Operator!".into(),
            ..ok.clone()
        });
        assert!(e.contains("--lease-name"), "{e}");
        assert_eq!((ok.grace(), ok.margin()), (5, Duration::from_millis(2500)));
    }

    #[test]
    fn identities_differ_between_processes_on_one_host() {
        assert_ne!(default_identity(), default_identity());
    }
}
