//! Discovery end to end: the agent reads this machine's real facts from /proc and /sys and
//! posts them to the HTTP boot server of an `HAClusterTopology`, which records them in its
//! SQLite inventory.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use harmony::domain::RunContext;
use harmony::domain::capability::HostInventory;
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony::types::Url;
use harmony_discovery_agent::{Facts, post};
use harmony_e2e::okd_lab::layout;

/// Logical CPUs: the distinct `processor : N` ids of `/proc/cpuinfo`.
fn cpus_in_proc() -> u32 {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let ids: BTreeSet<u32> = text
        .lines()
        .filter_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "processor").then(|| value.trim().parse().unwrap())
        })
        .collect();
    assert!(!ids.is_empty(), "no processor in /proc/cpuinfo:\n{text}");
    ids.len() as u32
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total_in_proc() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .unwrap_or_else(|| panic!("no MemTotal in /proc/meminfo:\n{text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{line}");
    assert_eq!(words[2], "kB", "{line}");
    words[1].parse::<u64>().unwrap() * 1024
}

/// Installed memory as the agent must report it, read here on its own: the DMI memory
/// devices (SMBIOS type 17 Size word, MiB, or KiB with bit 15; 0x7FFF defers to the Extended
/// Size dword) when listed, else online memory blocks times the block size, else `MemTotal`.
fn installed_memory() -> u64 {
    let mut dmi = 0u64;
    for e in std::fs::read_dir("/sys/firmware/dmi/entries")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("17-"))
    {
        let raw = std::fs::read(e.path().join("raw")).unwrap();
        let size = u16::from_le_bytes([raw[12], raw[13]]);
        dmi += match size {
            0 | 0xFFFF => 0,
            0x7FFF => {
                u64::from(u32::from_le_bytes(raw[28..32].try_into().unwrap()) & 0x7FFF_FFFF) << 20
            }
            s if s & 0x8000 != 0 => u64::from(s & 0x7FFF) << 10,
            s => u64::from(s) << 20,
        };
    }
    if dmi > 0 {
        return dmi;
    }
    let memory = Path::new("/sys/devices/system/memory");
    if let Ok(size) = std::fs::read_to_string(memory.join("block_size_bytes")) {
        let size = u64::from_str_radix(size.trim(), 16).unwrap();
        let online = std::fs::read_dir(memory)
            .unwrap()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("memory")
                    .is_some_and(|n| n.parse::<u64>().is_ok())
                    && std::fs::read_to_string(e.path().join("online"))
                        .map(|t| t.trim() == "1")
                        .unwrap_or(true)
            })
            .count() as u64;
        if online > 0 {
            return online * size;
        }
    }
    mem_total_in_proc()
}

/// Whole physical disks with media, sorted by name, with their size in KiB: the entries of
/// `/proc/partitions` (sizes in 1 KiB blocks) that are not partitions and not virtual devices
/// (loop, ram, zram, device-mapper, md live under /sys/devices/virtual).
fn whole_disks_in_proc() -> Vec<(String, u64)> {
    let text = std::fs::read_to_string("/proc/partitions").unwrap();
    let mut disks: Vec<(String, u64)> = text
        .lines()
        .skip(2)
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let [_major, _minor, blocks, name] = words[..] else {
                return None;
            };
            Some((name.to_string(), blocks.parse::<u64>().unwrap()))
        })
        .filter(|(name, blocks)| {
            let dev = Path::new("/sys/class/block").join(name);
            let real = std::fs::canonicalize(&dev).unwrap_or_default();
            *blocks > 0
                && !dev.join("partition").exists()
                && !real.starts_with("/sys/devices/virtual")
        })
        .collect();
    disks.sort();
    disks
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_reports_this_machine_into_the_inventory_from_a_lease_the_test_writes_as_dnsmasq()
{
    let dir = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        out_dir: dir.path().to_path_buf(),
        inventory: None,
        ..RunContext::default()
    };
    let topology =
        HAClusterTopology::from_context(layout().unwrap(), BareMetalServices::default(), &ctx)
            .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = topology.serve_http_on(listener).unwrap();

    let facts = Facts::system();
    let report = match facts.report() {
        Ok(r) => r,
        Err(e) => panic!("this machine's facts cannot be read: {e}"),
    };
    // Reports are taken only from an address dnsmasq leased to one of the reported MACs. The
    // agent runs on this machine, not on one PXE-booted from Harmony's dnsmasq, so the test
    // plays dnsmasq's part: it writes the lease line dnsmasq would have written for 127.0.0.1.
    let url = Url::parse(&format!("http://{addr}/discovery")).unwrap();
    let refused = {
        let (url, report) = (url.clone(), report.clone());
        tokio::task::spawn_blocking(move || post(&url, &report, Duration::from_secs(10)))
            .await
            .unwrap()
            .unwrap_err()
    };
    assert!(
        refused.to_string().contains("403") && refused.to_string().contains("no DHCP lease"),
        "{refused}"
    );
    let expiry = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let lease_file = topology.dnsmasq().lease_file();
    std::fs::create_dir_all(lease_file.parent().unwrap()).unwrap();
    std::fs::write(
        &lease_file,
        format!("{expiry} {} 127.0.0.1 * *\n", report.macs[0]),
    )
    .unwrap();
    let sent = report.clone();
    tokio::task::spawn_blocking(move || post(&url, &sent, Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();

    let hosts = topology.known_hosts().await.unwrap();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let h = &hosts[0];
    assert_eq!(h.id, report.id);
    assert_eq!(h.macs, report.macs);
    // The recorded facts against this machine as the test reads it itself.
    assert_eq!(h.cpu_count, cpus_in_proc(), "CPUs: /proc/cpuinfo");
    assert_eq!(
        h.memory_bytes,
        installed_memory(),
        "memory: DMI memory devices, else memory blocks, else /proc/meminfo"
    );
    assert!(
        h.memory_bytes >= mem_total_in_proc(),
        "installed memory is at least what the kernel manages"
    );
    let disks: Vec<(String, u64)> = h
        .disks
        .iter()
        .map(|d| (d.name.clone(), d.size_bytes / 1024))
        .collect();
    let expected = whole_disks_in_proc();
    assert!(
        !expected.is_empty(),
        "this machine has no whole disk in /proc/partitions: the disk comparison would prove nothing"
    );
    assert_eq!(
        disks, expected,
        "disks (name, KiB): recorded vs /proc/partitions"
    );

    let bad = Url::parse(&format!("http://{addr}/nope")).unwrap();
    let err = tokio::task::spawn_blocking(move || post(&bad, &report, Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("405"), "{err}");
}
