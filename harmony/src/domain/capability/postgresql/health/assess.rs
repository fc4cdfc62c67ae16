//! Judging replicas against the primary: streaming state, lag, and the status table.

use std::fmt::Write as _;

use super::{
    CNPG_HEALTHY_PHASE, Reading, ReplicationReport, SiteHealth, SiteObservation, SiteRole,
    SqlReading, Streaming,
};

impl ReplicationReport {
    /// Judges each replica's observation against the primary's.
    pub fn assess(
        max_lag_bytes: u64,
        primary: (&str, &SiteObservation),
        replicas: &[(String, SiteObservation)],
    ) -> Self {
        let (primary_site, p) = primary;
        let mut sites = vec![primary_health(primary_site, p)];
        for (site, r) in replicas {
            sites.push(replica_health(site, r, p));
        }
        Self {
            max_lag_bytes,
            sites,
        }
    }

    /// Every replica was measured streaming with at most `max_lag_bytes` of lag, and the
    /// primary is one.
    pub fn replicas_ready(&self) -> bool {
        self.shortfalls().is_empty()
    }

    /// One line per site that keeps [`Self::replicas_ready`] false: the site, and what it misses.
    pub fn shortfalls(&self) -> Vec<String> {
        self.gaps(false)
    }

    /// What an apply waits for: like [`Self::replicas_ready`], except that a replica with no
    /// endpoint outside its site (so unmeasurable from outside) only needs its `Cluster` in
    /// [`CNPG_HEALTHY_PHASE`] with every instance ready. Its streaming stays unverified, and
    /// [`Self::unverified`] names it.
    pub fn settled(&self) -> bool {
        self.gaps(true).is_empty()
    }

    /// The lines keeping [`Self::settled`] false.
    pub fn unsettled(&self) -> Vec<String> {
        self.gaps(true)
    }

    /// The replicas whose streaming was not measured because they have no endpoint.
    pub fn unverified(&self) -> Vec<&str> {
        self.sites
            .iter()
            .filter(|s| s.role == SiteRole::Replica && !s.exposed)
            .map(|s| s.site.as_str())
            .collect()
    }

    fn gaps(&self, unexposed_by_kubernetes: bool) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.sites {
            if unexposed_by_kubernetes && s.role == SiteRole::Replica && !s.exposed {
                let healthy = s.phase.as_deref() == Some(CNPG_HEALTHY_PHASE)
                    && s.ready_instances.is_some()
                    && s.ready_instances == s.instances;
                if !healthy {
                    out.push(format!(
                        "{}: its Cluster is not healthy yet (phase {}, {} of {} instances ready; its streaming cannot be measured: no endpoint)",
                        s.site,
                        s.phase.as_deref().unwrap_or("unknown"),
                        s.ready_instances.map_or("?".into(), |n| n.to_string()),
                        s.instances.map_or("?".into(), |n| n.to_string()),
                    ));
                }
                continue;
            }
            match (&s.role, &s.streaming) {
                (SiteRole::Primary, _) => {
                    if let Some(problem) = s.notes.iter().find(|n| n.starts_with("not a primary")) {
                        out.push(format!("{} (primary): {problem}", s.site));
                    }
                }
                (SiteRole::Replica, Some(Streaming::Streaming)) => match s.lag_bytes {
                    Some(lag) if lag <= self.max_lag_bytes => {}
                    Some(lag) => out.push(format!(
                        "{}: streams but lags {lag} bytes, more than the {} allowed (maxReplicaLagBytes)",
                        s.site, self.max_lag_bytes
                    )),
                    None => out.push(format!(
                        "{}: streams, but its lag is unknown: {}",
                        s.site,
                        s.notes.join("; ")
                    )),
                },
                (SiteRole::Replica, Some(Streaming::NotStreaming(why))) => {
                    out.push(format!("{}: not streaming: {why}", s.site));
                }
                (SiteRole::Replica, Some(Streaming::Unknown(why))) => {
                    out.push(format!("{}: streaming unknown: {why}", s.site));
                }
                (SiteRole::Replica, None) => {
                    out.push(format!("{}: streaming unknown: not measured", s.site));
                }
            }
        }
        out
    }

    /// The status as an aligned text table, one line per site, then the notes.
    pub fn table(&self) -> Vec<String> {
        let header = [
            "SITE",
            "ROLE",
            "PHASE",
            "READY",
            "STREAMING",
            "LAG BYTES",
            "LAG S",
            "WAL LSN",
        ];
        let rows: Vec<[String; 8]> = self
            .sites
            .iter()
            .map(|s| {
                let dash = || "-".to_string();
                [
                    s.site.clone(),
                    s.role.to_string(),
                    s.phase.clone().unwrap_or_else(|| "?".into()),
                    match (s.ready_instances, s.instances) {
                        (Some(r), Some(n)) => format!("{r}/{n}"),
                        (Some(r), None) => r.to_string(),
                        _ => "?".into(),
                    },
                    match &s.streaming {
                        None => dash(),
                        Some(Streaming::Streaming) => "yes".into(),
                        Some(Streaming::NotStreaming(_)) => "NO".into(),
                        Some(Streaming::Unknown(_)) => "unknown".into(),
                    },
                    s.lag_bytes.map(|b| b.to_string()).unwrap_or_else(dash),
                    s.lag_seconds
                        .map(|v| format!("{v:.1}"))
                        .unwrap_or_else(dash),
                    s.lsn.map(|l| l.to_string()).unwrap_or_else(dash),
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            let mut l = String::new();
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                if i + 1 == cells.len() {
                    l.push_str(cell);
                } else {
                    let _ = write!(l, "{cell:<w$}  ");
                }
            }
            l.trim_end().to_string()
        };
        let mut out = vec![line(&header)];
        for row in &rows {
            out.push(line(&row.each_ref().map(String::as_str)));
        }
        for s in &self.sites {
            for n in &s.notes {
                out.push(format!("{}: {n}", s.site));
            }
            if let Some(Streaming::NotStreaming(why) | Streaming::Unknown(why)) = &s.streaming {
                out.push(format!("{}: {why}", s.site));
            }
        }
        out
    }
}

fn base(site: &str, role: SiteRole, o: &SiteObservation) -> SiteHealth {
    let cluster = &o.cluster;
    let c = cluster.value();
    let mut notes = Vec::new();
    if let Reading::NotRead(why) = cluster {
        notes.push(format!("Kubernetes status not read: {why}"));
    }
    SiteHealth {
        site: site.to_string(),
        role,
        phase: c.and_then(|c| c.phase.clone()),
        ready_instances: c.and_then(|c| c.ready_instances),
        instances: c.and_then(|c| c.instances),
        streaming: None,
        lag_bytes: None,
        lag_seconds: None,
        lsn: None,
        notes,
        exposed: o.exposed,
    }
}

fn primary_health(site: &str, o: &SiteObservation) -> SiteHealth {
    let mut h = base(site, SiteRole::Primary, o);
    if o.cluster.value().is_some_and(|c| c.replica_mode) {
        h.notes.push(
            "not a primary: its Cluster has spec.replica.enabled (the operator runs it as a replica)"
                .into(),
        );
    }
    match &o.sql {
        Reading::Read(r) if r.in_recovery => h.notes.push(
            "not a primary: pg_is_in_recovery() is true on its endpoint (it takes no writes)"
                .into(),
        ),
        Reading::Read(r) => h.lsn = r.current_lsn,
        Reading::NotRead(why) => h.notes.push(format!("WAL position not measured: {why}")),
    }
    h
}

fn replica_health(site: &str, o: &SiteObservation, primary: &SiteObservation) -> SiteHealth {
    let mut h = base(site, SiteRole::Replica, o);
    if let Some(c) = o.cluster.value()
        && !c.replica_mode
    {
        h.notes.push(
            "its Cluster has no spec.replica.enabled: the operator runs it as a primary of its own"
                .into(),
        );
    }
    let r = match &o.sql {
        Reading::Read(r) => r,
        Reading::NotRead(why) => {
            h.streaming = Some(Streaming::Unknown(why.clone()));
            return h;
        }
    };
    h.lsn = r.replay_lsn;
    let p = primary.sql.value().filter(|p| !p.in_recovery);
    h.streaming = Some(streaming(r, p));
    match (p.and_then(|p| p.current_lsn), r.replay_lsn) {
        (Some(current), Some(replayed)) => {
            let bytes = current.bytes_after(replayed);
            h.lag_bytes = Some(bytes);
            h.lag_seconds = if bytes == 0 {
                Some(0.0)
            } else {
                r.last_replayed_commit_epoch
                    .zip(p.map(|p| p.clock_epoch))
                    .map(|(commit, now)| (now - commit).max(0.0))
            };
        }
        (None, _) => h.notes.push(match &primary.sql {
            Reading::NotRead(why) => format!("lag not measured: the primary was not read: {why}"),
            Reading::Read(_) => "lag not measured: the primary's endpoint is in recovery".into(),
        }),
        (Some(_), None) => h
            .notes
            .push("lag not measured: the replica has replayed no WAL yet".into()),
    }
    h
}

fn streaming(r: &SqlReading, primary: Option<&SqlReading>) -> Streaming {
    if !r.in_recovery {
        return Streaming::NotStreaming(
            "pg_is_in_recovery() is false: it was promoted, it takes writes of its own".into(),
        );
    }
    if let Some(p) = primary
        && p.system_id != r.system_id
    {
        return Streaming::NotStreaming(format!(
            "its system identifier {} differs from the primary's {}: it is a copy of another cluster",
            r.system_id, p.system_id
        ));
    }
    if !r.wal_receiver_running {
        return Streaming::NotStreaming(
            "no WAL receiver runs: it is not connected to the primary (its log names the TLS, SNI or authentication error)".into(),
        );
    }
    if let Some(status) = &r.wal_receiver_status
        && status != "streaming"
    {
        return Streaming::NotStreaming(format!("its WAL receiver is {status:?}"));
    }
    match r.replay_pause_state.as_deref() {
        Some("not paused") | None => Streaming::Streaming,
        Some(state) => Streaming::NotStreaming(format!(
            "WAL replay is {state} (pg_wal_replay_resume() resumes it)"
        )),
    }
}

#[cfg(test)]
mod tests;
