//! Request records in the cluster ([`super::record`]): created before an effectful op runs,
//! completed with its `res`, read back on a redelivery, and pruned by age in the background.
//! They live in the agent's namespace, so they survive the agent's restart and rescheduling
//! onto another node.

use harmony_agent_protocol::{ErrorBody, Req, Res, code};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::record::{self, Record};
use crate::cluster::Cluster;
use crate::providers::{MANAGED_BY, MANAGED_BY_LABEL};

/// How a request's record was begun.
#[derive(Debug)]
pub enum Begun {
    /// Created now: the op runs for the first time.
    Fresh,
    /// It existed: the request was seen before (by this process or an earlier one).
    Existing(Box<Record>),
}

/// The records of one agent, in `namespace` of its cluster.
#[derive(derive_new::new)]
pub struct RecordStore {
    /// The agent's cluster.
    cluster: Arc<Cluster>,
    /// Where the records are kept.
    namespace: String,
    /// How long a record is kept after its request finishes.
    ttl: Duration,
}

/// Records listed per page when pruning.
const PAGE: u32 = 500;
/// How many times completing a record is tried before giving up (the result is sent anyway).
const FINISH_ATTEMPTS: u32 = 3;

impl RecordStore {
    /// The namespace of the records.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn client(&self) -> Result<kube::Client, ErrorBody> {
        let t = self
            .cluster
            .topology(false, false)
            .await
            .map_err(|e| ErrorBody::new(code::UNREACHABLE, e.to_string()))?;
        t.client()
            .map_err(|e| ErrorBody::new(code::UNREACHABLE, e.to_string()))
    }

    /// The error for a failed call on record `name`, with the fix.
    fn error(&self, doing: &str, name: &str, e: kube::Error) -> ErrorBody {
        let ns = &self.namespace;
        let text = harmony::infra::kube::describe_error(&e);
        match &e {
            kube::Error::Api(s) if s.code == 403 => ErrorBody::new(
                code::FORBIDDEN,
                format!(
                    "{doing} request record ConfigMap {ns}/{name}: {text}; the agent keeps one ConfigMap per recent request so a redelivered request is not executed twice: grant its service account get, list, create, patch and delete on configmaps in namespace {ns} (or pass --namespace)"
                ),
            ),
            _ => ErrorBody::new(
                code::UNREACHABLE,
                format!(
                    "{doing} request record ConfigMap {ns}/{name}: {text}; the request is not executed without its record, retry when the cluster answers"
                ),
            ),
        }
    }

    /// Creates the agent's namespace when it is missing (the records must go somewhere).
    async fn ensure_namespace(&self, client: &kube::Client) -> Result<(), ErrorBody> {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    MANAGED_BY_LABEL.to_string(),
                    MANAGED_BY.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => {
                log::info!("created namespace {} for request records", self.namespace);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(ErrorBody::new(
                code::FORBIDDEN,
                format!(
                    "namespace {} (for the agent's request records) does not exist and could not be created: {}; create it, or pass --namespace naming an existing one",
                    self.namespace,
                    harmony::infra::kube::describe_error(&e)
                ),
            )),
        }
    }

    /// Creates `req`'s record, `started`, before the op runs; when it exists already, reads it.
    pub async fn begin(&self, req: &Req) -> Result<Begun, ErrorBody> {
        let client = self.client().await?;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        let cm = record::started(&self.namespace, req);
        let name = record::record_name(&req.id);
        let mut namespace_created = false;
        loop {
            match api.create(&PostParams::default(), &cm).await {
                Ok(_) => return Ok(Begun::Fresh),
                Err(kube::Error::Api(s)) if s.code == 409 => break,
                Err(kube::Error::Api(s)) if s.code == 404 && !namespace_created => {
                    self.ensure_namespace(&client).await?;
                    namespace_created = true;
                }
                Err(e) => return Err(self.error("creating", &name, e)),
            }
        }
        let existing = api
            .get(&name)
            .await
            .map_err(|e| self.error("reading", &name, e))?;
        record::parse(&existing)
            .map(|r| Begun::Existing(Box::new(r)))
            .map_err(|problem| {
                ErrorBody::new(
                    code::INTERNAL,
                    format!("{problem}; delete it to let the request run"),
                )
            })
    }

    /// Completes the record of `res.id` with `res` (a few attempts; the result is sent anyway,
    /// and a record left `started` only makes a later redelivery resume instead of answer).
    pub async fn finish(&self, res: &Res) {
        let name = record::record_name(&res.id);
        let patch = record::finished_patch(res);
        let mut last = String::new();
        for attempt in 0..FINISH_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            let client = match self.client().await {
                Ok(c) => c,
                Err(e) => {
                    last = e.message;
                    continue;
                }
            };
            let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return,
                Err(e) => last = self.error("completing", &name, e).message,
            }
        }
        log::error!("request {}: {last}", res.id);
    }

    /// Deletes the records older than the TTL (finished ones by their finish time, others by
    /// their creation); returns how many. Only metadata is listed, a page at a time: records
    /// can hold results of up to [`record::RESULT_LIMIT`] each.
    pub async fn prune(&self) -> Result<usize, String> {
        let client = self.client().await.map_err(|e| e.message)?;
        let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
        let now = k8s_openapi::jiff::Timestamp::now();
        let ttl = k8s_openapi::jiff::SignedDuration::try_from(self.ttl)
            .unwrap_or(k8s_openapi::jiff::SignedDuration::MAX);
        let mut expired = Vec::new();
        let mut params = ListParams::default()
            .labels(&record::selector())
            .limit(PAGE);
        loop {
            let page = api.list_metadata(&params).await.map_err(|e| {
                format!(
                    "listing request records in {}: {}",
                    self.namespace,
                    harmony::infra::kube::describe_error(&e)
                )
            })?;
            for m in &page.items {
                let finished = m
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(record::FINISHED_AT))
                    .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
                let since = finished.or(m.metadata.creation_timestamp.as_ref().map(|t| t.0));
                if let (Some(since), Some(name)) = (since, &m.metadata.name)
                    && now.duration_since(since) > ttl
                {
                    expired.push(name.clone());
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        let mut pruned = 0;
        for name in expired {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => pruned += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(format!(
                        "deleting request record {name}: {}",
                        harmony::infra::kube::describe_error(&e)
                    ));
                }
            }
        }
        Ok(pruned)
    }

    /// Prunes every quarter of the TTL (between 1 s and 5 min) for the process's life.
    pub fn start_pruning(self: &Arc<Self>) {
        let me = self.clone();
        let every = (self.ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(300));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match me.prune().await {
                    Ok(0) => {}
                    Ok(n) => log::debug!(
                        "pruned {n} request record(s) older than {} s",
                        me.ttl.as_secs()
                    ),
                    Err(e) => log::warn!("pruning request records: {e}"),
                }
            }
        });
    }
}
