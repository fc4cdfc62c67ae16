//! Unit tests of the SQLite inventory: hosts, roles, held identities and boots.

use super::*;

fn host(id: &str, mac: &str) -> PhysicalHost {
    PhysicalHost {
        id: Id::parse(id).unwrap(),
        hostname: None,
        serial: None,
        macs: vec![MacAddress::parse(mac).unwrap()],
        cpu_count: 8,
        memory_bytes: 16 << 30,
        disks: vec![Disk {
            name: "vda".into(),
            size_bytes: 100 << 30,
            rotational: false,
            ..Default::default()
        }],
    }
}

#[test]
fn keeps_the_serial_and_reads_inventories_written_before_it() {
    let dir = tempfile::tempdir().unwrap();
    // An inventory file as written before the serial column existed.
    let old = dir.path().join("old.sqlite");
    Connection::open(&old)
        .unwrap()
        .execute_batch(
            "CREATE TABLE hosts (id TEXT PRIMARY KEY, hostname TEXT, macs TEXT NOT NULL,
                cpu_count INTEGER NOT NULL, memory_bytes INTEGER NOT NULL, disks TEXT NOT NULL);
             INSERT INTO hosts VALUES ('m1', NULL, '[\"52:54:00:00:00:01\"]', 2, 1024, '[]');",
        )
        .unwrap();
    let read_only = SqliteInventory::open_read_only(&old).unwrap();
    let hosts = read_only.hosts_read_only().unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].serial, None);
    drop(read_only);
    // Opened for writing, it gains the column and keeps a serial.
    let inv = SqliteInventory::open(&old).unwrap();
    let with_serial = PhysicalHost {
        serial: Some("CZJ1234567".into()),
        ..host("m2", "52:54:00:00:00:02")
    };
    assert_eq!(
        inv.record_host_sync(&with_serial).unwrap().action,
        ChangeAction::Create
    );
    assert_eq!(
        inv.record_host_sync(&with_serial).unwrap().action,
        ChangeAction::Unchanged
    );
    let hosts = inv.hosts_sync().unwrap();
    assert_eq!(hosts[1].serial.as_deref(), Some("CZJ1234567"));
    // A new serial for the same host is an update.
    let relabelled = PhysicalHost {
        serial: Some("CZJ7654321".into()),
        ..with_serial
    };
    assert_eq!(
        inv.record_host_sync(&relabelled).unwrap().action,
        ChangeAction::Update
    );
}

#[tokio::test]
async fn persists_across_reopen_and_never_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/inventory.sqlite");
    {
        let inv = SqliteInventory::open(&path).unwrap();
        let h = host("a", "52:54:00:00:00:01");
        assert_eq!(
            inv.record_host(&h).await.unwrap().action,
            ChangeAction::Create
        );
        assert_eq!(
            inv.record_host(&h).await.unwrap().action,
            ChangeAction::Unchanged
        );
        let a = RoleAssignment {
            host: h.id.clone(),
            role: HostRole::Worker,
        };
        assert_eq!(
            inv.assign_role(&a).await.unwrap().action,
            ChangeAction::Create
        );
        let b = HostBinding {
            host: h.id.clone(),
            role: HostRole::Worker,
            logical: HostName::parse("worker0").unwrap(),
            mac: h.macs[0],
        };
        assert_eq!(
            inv.bind_host(&b).await.unwrap().action,
            ChangeAction::Create
        );
        assert_eq!(
            inv.bind_host(&b).await.unwrap().action,
            ChangeAction::Unchanged
        );
    }
    let inv = SqliteInventory::open(&path).unwrap();
    assert_eq!(
        inv.known_hosts().await.unwrap(),
        vec![host("a", "52:54:00:00:00:01")]
    );
    assert_eq!(inv.role_assignments().await.unwrap().len(), 1);
    assert_eq!(inv.host_bindings().await.unwrap().len(), 1);
}

#[tokio::test]
async fn conflicts_are_refused_naming_both_sides() {
    let inv = SqliteInventory::in_memory().unwrap();
    for (id, mac) in [("a", "52:54:00:00:00:01"), ("b", "52:54:00:00:00:02")] {
        inv.record_host(&host(id, mac)).await.unwrap();
    }
    let bind = |id: &str, logical: &str, mac: &str| HostBinding {
        host: Id::parse(id).unwrap(),
        role: HostRole::Worker,
        logical: HostName::parse(logical).unwrap(),
        mac: MacAddress::parse(mac).unwrap(),
    };
    inv.bind_host(&bind("a", "worker0", "52:54:00:00:00:01"))
        .await
        .unwrap();
    let err = inv
        .bind_host(&bind("b", "worker0", "52:54:00:00:00:02"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("worker0") && err.to_string().contains("existing binding a"),
        "{err}"
    );
    // The same MAC, or the same host, under another logical host conflicts too.
    for (id, mac) in [("b", "52:54:00:00:00:01"), ("a", "52:54:00:00:00:02")] {
        let err = inv.bind_host(&bind(id, "worker1", mac)).await.unwrap_err();
        assert!(err.to_string().contains("existing binding a"), "{err}");
    }
    assert_eq!(
        inv.host_bindings().await.unwrap(),
        vec![bind("a", "worker0", "52:54:00:00:00:01")],
        "refused bindings are not stored"
    );
    let err = inv
        .assign_role(&RoleAssignment {
            host: Id::parse("zz").unwrap(),
            role: HostRole::Worker,
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not in the inventory"), "{err}");
    inv.assign_role(&RoleAssignment {
        host: Id::parse("a").unwrap(),
        role: HostRole::Worker,
    })
    .await
    .unwrap();
    let err = inv
        .assign_role(&RoleAssignment {
            host: Id::parse("a").unwrap(),
            role: HostRole::ControlPlane,
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already has role worker"), "{err}");
}
