//! One MAC is one machine: a MAC shared by two hosts — inside `--inventory`, inside the
//! program's declared inventory, or one in each — stops the run with exit 2 naming both hosts
//! and the MAC, before any file is written.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use harmony::domain::capability::HostInventory;
use harmony::domain::inventory::{Disk, PhysicalHost};
use harmony::infra::inventory_sqlite::SqliteInventory;
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony_types::{Id, MacAddress};

fn machine(id: &str, mac: &str) -> PhysicalHost {
    PhysicalHost {
        id: Id::parse(id).unwrap(),
        hostname: None,
        serial: None,
        macs: vec![MacAddress::parse(mac).unwrap()],
        cpu_count: 8,
        memory_bytes: 32 << 30,
        disks: vec![Disk {
            name: "sda".into(),
            size_bytes: 480 << 30,
            rotational: false,
            ..Default::default()
        }],
    }
}

/// An inventory file holding `hosts`, as discovery would have recorded them.
fn inventory_file(path: &Path, hosts: &[PhysicalHost]) {
    let inv = SqliteInventory::open(path).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for h in hosts {
            inv.record_host(h).await.unwrap();
        }
    });
}

fn run(cwd: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_example-okd-workers"))
        .args(args)
        .envs(envs.iter().map(|(k, v)| (*k, *v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("example binary runs")
}

fn assert_refused(out: &Output, says: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for s in says {
        assert!(err.contains(s), "{s:?} missing from:\n{err}");
    }
    assert!(err.contains("nothing was applied"), "{err}");
}

#[test]
fn two_hosts_sharing_a_mac_inside_the_inventory_file_are_refused_before_rendering() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv.sqlite");
    inventory_file(
        &inv,
        &[
            machine("rack2-u01", "52:54:00:aa:00:01"),
            machine("rack2-u02", "52:54:00:aa:00:01"),
        ],
    );
    let bytes = std::fs::read(&inv).unwrap();
    let out = run(dir.path(), &["--inventory", "inv.sqlite"], &[]);
    assert_refused(
        &out,
        &[
            "invalid --inventory",
            "hosts rack2-u01 and rack2-u02 in --inventory inv.sqlite both have MAC 52:54:00:aa:00:01",
            "one MAC is one machine",
        ],
    );
    assert!(
        !dir.path().join("harmony-out").exists(),
        "files were rendered"
    );
    assert_eq!(
        std::fs::read(&inv).unwrap(),
        bytes,
        "the inventory file changed"
    );

    // Applying is refused the same way, before the services folder exists.
    let services = dir.path().join("services");
    let ignition = dir.path().join("ignition");
    std::fs::create_dir_all(&ignition).unwrap();
    for f in ["bootstrap.ign", "master.ign", "worker.ign"] {
        std::fs::write(ignition.join(f), "{}").unwrap();
    }
    let out = run(
        dir.path(),
        &["--apply", "--yes", "--inventory", "inv.sqlite"],
        &[
            ("HARMONY_OKD_SERVICES_DIR", services.as_path()),
            ("HARMONY_OKD_IGNITION_DIR", ignition.as_path()),
        ],
    );
    assert_refused(&out, &["hosts rack2-u01 and rack2-u02"]);
    assert!(!services.exists(), "the services folder was created");
    assert_eq!(
        std::fs::read(&inv).unwrap(),
        bytes,
        "the inventory file changed"
    );
}

#[test]
fn a_declared_host_and_a_host_of_the_inventory_file_sharing_a_mac_are_refused() {
    // The example declares rack14-u10 with 52:54:00:50:00:21; the file holds another machine
    // with that MAC.
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv.sqlite");
    inventory_file(&inv, &[machine("spare-7", "52:54:00:50:00:21")]);
    let out = run(dir.path(), &["--inventory", "inv.sqlite"], &[]);
    assert_refused(
        &out,
        &[
            "host rack14-u10 in the program's declared inventory and host spare-7 in --inventory inv.sqlite both have MAC 52:54:00:50:00:21",
            "remove host spare-7 from --inventory inv.sqlite",
        ],
    );
    assert!(
        !dir.path().join("harmony-out").exists(),
        "files were rendered"
    );

    // The same machine in both places (as a re-run records it) is one host: accepted.
    let same = dir.path().join("same.sqlite");
    inventory_file(&same, &[machine("rack14-u10", "52:54:00:50:00:21")]);
    let out = run(dir.path(), &["--inventory", "same.sqlite"], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_declared_hosts_sharing_a_mac_are_refused_before_rendering() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let mut inventory = example_okd_workers::inventory().unwrap();
    inventory.hosts[1].macs = inventory.hosts[0].macs.clone();
    let err: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
    let console = harmony_cli::Console {
        interactive: false,
        out: Arc::new(Mutex::new(Vec::<u8>::new())),
        err: err.clone(),
    };
    let argv = ["example-okd-workers", "--out", out_dir.to_str().unwrap()];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let code = rt.block_on(harmony_cli::run_program_with(
        argv,
        console,
        inventory,
        |_: harmony_cli::NoFlags, ctx| {
            let layout = example_okd_workers::layout().map_err(|e| e.to_string())?;
            let topology =
                HAClusterTopology::from_context(layout, BareMetalServices::default(), ctx)
                    .map_err(|e| e.to_string())?;
            let install = harmony_modules::okd::OkdInstallation::default();
            Ok::<_, String>((topology, example_okd_workers::scores(&install)))
        },
    ));
    let err = String::from_utf8_lossy(&err.lock().unwrap()).into_owned();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "invalid inventory: hosts rack14-u10 and rack14-u12 in the program's declared inventory both have MAC 52:54:00:50:00:21"
        ),
        "{err}"
    );
    assert!(
        err.contains("give each host of the program's inventory its own MACs"),
        "{err}"
    );
    assert!(!out_dir.exists(), "files were rendered");
}
