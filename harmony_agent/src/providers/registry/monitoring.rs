//! The registry's loops: provider health checks, API discovery of the built-ins, and polling
//! the status of created instances.

use futures::future::join_all;
use harmony_agent_protocol::{Frame, InstanceState, ProviderHealth};
use std::sync::Arc;
use std::time::Instant;

use super::{Registry, Remembered, State, now_ms, same_report};
use crate::providers::Provider;
use crate::providers::discovery;

impl Registry {
    /// Starts the health, discovery and instance-poll loops (they run for the process's life).
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.config.policy.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                me.health_round().await;
            }
        });
        if !self.config.builtins.is_empty() {
            let me = self.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(me.config.discovery_interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    me.discover().await;
                }
            });
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.config.instance_poll);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                me.poll_instances().await;
            }
        });
    }

    pub(super) fn record_check(&self, state: &mut State, name: &str, result: Result<(), String>) {
        let Some(e) = state.providers.get_mut(name) else {
            return;
        };
        match result {
            Ok(()) => {
                if !e.failure.is_empty() || e.last_ok.is_none() {
                    log::info!("provider {name:?}: health check succeeds");
                }
                e.last_ok = Some(Instant::now());
                e.last_ok_wall = Some(now_ms());
                e.failure.clear();
            }
            Err(why) => {
                if e.failure != why {
                    log::warn!("provider {name:?}: {why}");
                }
                e.failure = why;
            }
        }
    }

    pub(super) async fn check_one(&self, name: &str) {
        let external = self
            .lock()
            .providers
            .get(name)
            .and_then(|e| e.external.clone());
        let Some(external) = external else { return };
        let result = external
            .check_health(self.config.policy.check_timeout())
            .await;
        let mut state = self.lock();
        // A registration replaced meanwhile has its own check; this result is not its.
        if state
            .providers
            .get(name)
            .and_then(|e| e.external.as_ref())
            .is_some_and(|x| Arc::ptr_eq(x, &external))
        {
            self.record_check(&mut state, name, result);
        }
    }

    /// Whether the agent's cluster answers, within the check timeout.
    pub(super) async fn cluster_answers(&self) -> Result<kube::Client, String> {
        let timeout = self.config.policy.check_timeout();
        let topology = tokio::time::timeout(timeout, self.cluster.topology(false, false))
            .await
            .map_err(|_| {
                format!(
                    "the Kubernetes API did not answer within {} ms",
                    timeout.as_millis()
                )
            })?
            .map_err(|e| e.to_string())?;
        let client = topology.client().map_err(|e| e.to_string())?;
        discovery::answers(&client, timeout).await?;
        Ok(client)
    }

    /// One health round: every external provider's health URL, and the cluster for built-ins.
    pub async fn health_round(&self) {
        let (names, any_builtin): (Vec<String>, bool) = {
            let state = self.lock();
            (
                state
                    .providers
                    .iter()
                    .filter(|(_, e)| e.external.is_some())
                    .map(|(n, _)| n.clone())
                    .collect(),
                state
                    .providers
                    .values()
                    .any(|e| e.builtin.is_some() && e.enabled),
            )
        };
        let externals = join_all(names.iter().map(|n| self.check_one(n)));
        let cluster = async {
            if any_builtin {
                Some(self.cluster_answers().await.map(|_| ()))
            } else {
                None
            }
        };
        let (_, cluster) = futures::join!(externals, cluster);
        if let Some(result) = cluster {
            let mut state = self.lock();
            let builtins: Vec<String> = state
                .providers
                .iter()
                .filter(|(_, e)| e.builtin.is_some() && e.enabled)
                .map(|(n, _)| n.clone())
                .collect();
            for n in builtins {
                self.record_check(&mut state, &n, result.clone());
            }
        }
        self.publish();
    }

    /// Re-discovers the built-ins' APIs; when the cluster does not answer, what was known stays.
    pub async fn discover(&self) {
        let client = match self.cluster_answers().await {
            Ok(c) => c,
            Err(why) => {
                let mut state = self.lock();
                let builtins: Vec<String> = state
                    .providers
                    .iter()
                    .filter(|(_, e)| e.builtin.is_some())
                    .map(|(n, _)| n.clone())
                    .collect();
                for n in builtins {
                    self.record_check(&mut state, &n, Err(why.clone()));
                }
                drop(state);
                self.publish();
                return;
            }
        };
        let mut found = Vec::new();
        for b in &self.config.builtins {
            match discovery::serves(&client, b.api()).await {
                Ok(present) => found.push((*b, present)),
                // One unreadable API must not hold back what the others say.
                Err(why) => log::warn!("API discovery: {why}; keeping what was known"),
            }
        }
        {
            let mut state = self.lock();
            for (b, present) in found {
                let name = b.provider_name();
                let Some(e) = state.providers.get_mut(name) else {
                    continue;
                };
                if e.enabled != present || e.last_ok.is_none() {
                    let api = b.api();
                    if present {
                        log::info!(
                            "built-in provider {name} enabled: the cluster serves {} {}",
                            api.group_version,
                            api.kind
                        );
                    } else {
                        log::info!(
                            "built-in provider {name} disabled: the cluster does not serve {} {}",
                            api.group_version,
                            api.kind
                        );
                    }
                }
                e.enabled = present;
                self.record_check(&mut state, name, Ok(()));
            }
        }
        self.publish();
    }

    /// Asks each remembered instance's provider (unless unavailable) for its status; pushes an
    /// `instance` frame on change and forgets instances reported `deleted`.
    pub async fn poll_instances(&self) {
        let work: Vec<(Remembered, Arc<dyn Provider>)> = {
            let now = Instant::now();
            let state = self.lock();
            state
                .instances
                .values()
                .filter_map(|r| {
                    let e = state.providers.get(&r.provider).filter(|e| e.enabled)?;
                    let (h, _) = e.health(now, &self.config.policy);
                    (h != ProviderHealth::Unavailable).then(|| (r.clone(), e.provider.clone()))
                })
                .collect()
        };
        let results = join_all(work.into_iter().map(|(r, p)| async move {
            let result = p.status(&r.instance_id, &r.service_type, &r.spec).await;
            (r, result)
        }))
        .await;
        let mut state = self.lock();
        let mut forgot = false;
        for (r, result) in results {
            let status = match result {
                Ok(s) => s,
                Err(e) => {
                    log::debug!("status of instance {}: {e}", r.instance_id);
                    continue;
                }
            };
            let Some(current) = state.instances.get_mut(&r.instance_id) else {
                continue;
            };
            if current.provider != r.provider {
                continue;
            }
            let changed = current
                .last
                .as_ref()
                .is_none_or(|l| !same_report(l, &status));
            if changed {
                log::info!(
                    "instance {} ({}): {}{}",
                    status.instance_id,
                    status.service_type,
                    status.state,
                    if status.detail.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", status.detail)
                    }
                );
                current.last = Some(status.clone());
                let _ = self.outbox.send(Frame::Instance(status.clone()));
            }
            if status.state == InstanceState::Deleted {
                state.instances.remove(&r.instance_id);
                forgot = true;
            }
        }
        if forgot {
            self.persist_logged(&state);
        }
    }
}
