//! Bare metal without hands (issue 28): the OKD host phases bring up QEMU machines behind
//! emulated BMCs (`harmony_e2e::bmc_lab`: libvirt VMs served over Redfish by sushy-tools) with
//! no operator at all: no terminal and no `--yes`, so any question fails the run (and is
//! recorded, so the test also says which one was asked).
//!
//! The VMs are defined powered off and booting from their blank disk first, each on a tap of
//! the site's bridge, and are given to Harmony only as `--bmc MAC=redfish://...` entries with
//! their roles as `--assign ROLE=mac:MAC` rules. Harmony sets each to PXE boot once and powers
//! it on: it boots Harmony's discovery image (`discovery-image/build.sh`) and reports itself;
//! the phase binds and scripts it, then power cycles it through its BMC into its per-MAC iPXE
//! script, whose kernel (a stand-in for the OKD live installer) fetches the role's ignition.
//!
//! The second test is about faults, each failing its own host only: wrong BMC credentials
//! (401, named with host and BMC, never the password), a BMC that accepts connections and
//! never answers (a timeout), a machine that accepts the PXE override but cannot network boot
//! (its NIC has no boot ROM: the discovery wait names it with the boot-order hint), and a
//! machine already running before the run (power cycled from On, discovered all the same).
//!
//! Every VM's serial console and QEMU log, the emulator's and libvirtd's logs and the runs'
//! progress lines are kept in `$CARGO_TARGET_TMPDIR/okd_hands_free_qemu/<test>/`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use harmony::domain::capability::{
    BootPhase, HaCluster, HostBmc, HostInventory, HttpServer, RoleRule, RootDeviceRule,
};
use harmony::domain::inventory::HostRole;
use harmony::domain::operator::{Operator, OperatorError, OperatorHandle};
use harmony::domain::{HarmonyEvent, Inventory, RunContext, ScoreReport, ScoreStatus};
use harmony::types::MacAddress;
use harmony_e2e::bmc_lab::{self, BmcLab, BmcLabOptions, BootFirst, VmSpec};
use harmony_e2e::discovery_boot::{
    build_image, console_text, print_kernel_banner, stand_in_installer, until,
};
use harmony_e2e::netns;
use harmony_e2e::okd_lab::{self, HTTP_PORT, OkdLab, SERVICES};
use harmony_modules::okd::{OkdHostsScore, OkdInstallation, OkdPrepareScore, ignition_file};

/// The emulated BMCs' password (basic auth); never to appear in a report.
const PASSWORD: &str = "Hands-free-s3cret-28";
/// A wrong one, for the fault test; never to appear either.
const WRONG_PASSWORD: &str = "not-the-Hands-free-s3cret";
/// Memory of each VM: the discovery image (its initramfs unpacks to RAM) and the stand-in
/// installer boot with 256 MiB (the discovery test's machine has 1536 MiB).
const MEMORY_MIB: u32 = 256;
/// The VMs' blank 64 MiB disk is what they install to.
const ROOT_DEVICE: [&str; 2] = ["bootstrap=min-size:32MiB", "worker=min-size:32MiB"];
/// How long a machine may take to get somewhere under software emulation with others
/// running (bounds every wait of the test; never reached when things work).
const BOOT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Nobody at a terminal and no `--yes`: every question is recorded, then refused as the
/// command line refuses it without a terminal.
#[derive(Debug, Clone, Default)]
struct NoPrompts(Arc<Mutex<Vec<String>>>);

impl NoPrompts {
    fn refuse(&self, question: &str, flag: &str) -> OperatorError {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(question.to_string());
        OperatorError::NoTerminal {
            question: question.to_string(),
            flag: flag.to_string(),
        }
    }

    fn asked(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Operator for NoPrompts {
    fn assumes_yes(&self) -> bool {
        false
    }

    fn can_prompt(&self) -> bool {
        false
    }

    fn confirm(&self, question: &str) -> Result<bool, OperatorError> {
        Err(self.refuse(question, "--yes"))
    }

    fn choose(
        &self,
        question: &str,
        _options: &[String],
        _count: usize,
    ) -> Result<Vec<usize>, OperatorError> {
        Err(self.refuse(question, "--assign ROLE=RULE or --roles FILE"))
    }
}

/// The discovery image, built once per test binary.
fn image() -> PathBuf {
    static IMAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    IMAGE
        .get_or_init(build_image)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `$CARGO_TARGET_TMPDIR/okd_hands_free_qemu/<test>/`, emptied.
fn log_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("okd_hands_free_qemu")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// VM `name` with `mac`, powered off, disk first, memory as the discovery image needs.
fn vm(name: &str, mac: &str) -> VmSpec {
    VmSpec {
        name: name.into(),
        mac: mac.into(),
        memory_mib: MEMORY_MIB,
        boot: BootFirst::Disk,
        tap: None,
        pxe_rom: true,
    }
}

/// VM `i`'s `--bmc` entry, as an operator writes it, its credentials (`admin:password`) in a
/// file of `dir`.
fn bmc_entry(bmc: &BmcLab, i: usize, dir: &Path, password: &str) -> HostBmc {
    let file = dir.join(format!("bmc-{i}.credentials"));
    std::fs::write(&file, format!("{}:{password}\n", bmc.username())).unwrap();
    let url = bmc.bmc_url(i).replacen("https://", "redfish://", 1);
    let flag = format!(
        "{}={url},credentials=file:{}",
        bmc.vms()[i].mac,
        file.display()
    );
    HostBmc::parse(&flag).unwrap_or_else(|e| panic!("--bmc {flag}: {e}"))
}

/// A site (namespaces, services, topology in apply mode), its VMs behind emulated BMCs on its
/// bridge, and what the test watches. Fields drop in order: the VMs stop (and their logs are
/// kept) before the site's namespaces go.
struct Site {
    bmc: BmcLab,
    okd: OkdLab,
    image: PathBuf,
    install: OkdInstallation,
    prompts: NoPrompts,
    progress: Arc<Mutex<Vec<String>>>,
    logs: PathBuf,
    /// The BMC CA and credential files.
    _files: tempfile::TempDir,
}

impl Site {
    /// Starts the site `tag` with `vms` (each on a tap of its bridge, libvirtd in its services
    /// namespace), the topology's `--bmc` entries from `bmcs` (given the lab and a folder for
    /// credential files), `--assign` rules and discovery timeout; serves HTTP boot.
    fn start(
        test: &str,
        tag: &str,
        mut vms: Vec<VmSpec>,
        assign: &[String],
        discovery_timeout: Duration,
        bmcs: impl FnOnce(&BmcLab, &Path) -> Vec<HostBmc>,
    ) -> Self {
        if let Err(e) = netns::available().and_then(|()| bmc_lab::available()) {
            panic!("{e}");
        }
        let image = image();
        let logs = log_dir(test);
        let net = okd_lab::network(tag, &[]).unwrap_or_else(|e| panic!("{e}"));
        for (i, v) in vms.iter_mut().enumerate() {
            let tap = format!("vmtap{i}");
            okd_lab::user_tap(&net, &tap, "nobody").unwrap_or_else(|e| panic!("{e}"));
            v.tap = Some(tap);
        }
        let mut bmc = BmcLab::start(BmcLabOptions {
            vms,
            netns: Some(net.services.name().to_string()),
            username: "admin".into(),
            password: PASSWORD.into(),
        })
        .unwrap_or_else(|e| panic!("{e}"));
        bmc.keep_logs_in(logs.clone());
        let files = tempfile::tempdir().unwrap();
        let ca = files.path().join("bmc-ca.pem");
        std::fs::write(&ca, bmc.ca_pem()).unwrap();
        let prompts = NoPrompts::default();
        let ctx = RunContext {
            apply: true,
            operator: OperatorHandle::new(prompts.clone()),
            discovery_timeout: Some(discovery_timeout),
            assign: assign
                .iter()
                .map(|r| RoleRule::parse(r).unwrap_or_else(|e| panic!("{r}: {e}")))
                .collect(),
            root_device: ROOT_DEVICE
                .iter()
                .map(|r| RootDeviceRule::parse(r).unwrap())
                .collect(),
            bmc: bmcs(&bmc, files.path()),
            bmc_ca_file: Some(ca),
            ..RunContext::default()
        };
        let inventory = Inventory {
            location: None,
            hosts: vec![],
            assignments: vec![],
        };
        let mut okd = OkdLab::with_context(net, inventory, Some(image.clone()), &ctx)
            .unwrap_or_else(|e| panic!("{e}"));
        // Progress lines, as they come, into the log folder too (a hung run shows where).
        let progress = Arc::new(Mutex::new(Vec::new()));
        let sink = progress.clone();
        let progress_file = logs.join("progress.log");
        let started = Instant::now();
        okd.maestro.subscribe(move |e| {
            let line = match e {
                HarmonyEvent::InterpretProgress { score, message } => format!("{score}: {message}"),
                HarmonyEvent::InterpretFinished {
                    score,
                    status,
                    message,
                } => format!("{score}: finished {status:?}: {message}"),
                _ => return,
            };
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&progress_file)
            {
                let _ = writeln!(f, "[{:>6.1}s] {line}", started.elapsed().as_secs_f64());
            }
            sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        });
        let addr: SocketAddr = format!("{SERVICES}:{HTTP_PORT}").parse().unwrap();
        let listener = okd.lab.services.bind_tcp(addr).unwrap();
        okd.topology().serve_http_on(listener).unwrap();
        let install = okd.installation().unwrap();
        Self {
            bmc,
            okd,
            image,
            install,
            prompts,
            progress,
            logs,
            _files: files,
        }
    }

    /// Runs the prepare phase (dnsmasq, TFTP, HTTP files), then puts the stand-in installer
    /// (the discovery kernel, an initramfs fetching the ignition URL) where the per-MAC
    /// scripts boot it from.
    async fn prepare(&mut self) {
        let reports = self.run(OkdPrepareScore::new(self.install.clone())).await;
        assert_eq!(reports.status, ScoreStatus::Success, "{reports:#?}");
        let www = self.okd.topology().http().root();
        std::fs::create_dir_all(www.join("images")).unwrap();
        std::fs::copy(self.image.join("vmlinuz"), www.join(&self.install.kernel)).unwrap();
        let initrd = stand_in_installer(&self.image, self.okd.dir.path()).unwrap();
        std::fs::write(www.join(&self.install.initramfs), initrd).unwrap();
    }

    /// Registers and runs one Score; its report (also written to the log folder).
    async fn run(
        &mut self,
        score: impl harmony::domain::Score<harmony::infra::okd::HAClusterTopology> + 'static,
    ) -> ScoreReport {
        let started = Instant::now();
        let mut reports = self
            .okd
            .run(vec![Box::new(score)])
            .await
            .unwrap_or_else(|e| panic!("the run did not start: {e}"));
        let report = reports.remove(0);
        eprintln!(
            "{}: {:?} after {:.0} s",
            report.name,
            report.status,
            started.elapsed().as_secs_f64()
        );
        let file = self.logs.join(format!(
            "report-{}.txt",
            report.name.to_lowercase().replace(' ', "-")
        ));
        let _ = std::fs::write(file, format!("{report:#?}\n"));
        report
    }

    /// The progress lines so far.
    fn progress(&self) -> Vec<String> {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What to read when something failed: progress, the emulator's and libvirtd's logs, the
    /// VMs' states and the end of their consoles.
    fn diagnosis(&self) -> String {
        let mut out = format!(
            "logs kept in {}\n--- progress\n{}\n{}",
            self.logs.display(),
            self.progress().join("\n"),
            self.bmc.log_tail()
        );
        for (i, v) in self.bmc.vms().iter().enumerate() {
            let text = console_text(&self.bmc.serial_log(i));
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!(
                "\n--- {} ({}, {}): console tail\n{}",
                v.name,
                v.mac,
                self.bmc.domain_state(i),
                lines[lines.len().saturating_sub(15)..].join("\n")
            ));
        }
        out
    }

    /// Waits (bounded) until the inventory knows VM `i` by its MAC; the host's id.
    async fn discovered(&self, i: usize) -> harmony::types::Id {
        let mac = MacAddress::parse(&self.bmc.vms()[i].mac).unwrap();
        let topology = self.okd.topology();
        let what = format!("{} reported to discovery", self.bmc.vms()[i].name);
        until(&what, BOOT_TIMEOUT, || async {
            let hosts = topology.known_hosts().await.map_err(|e| e.to_string())?;
            Ok(hosts
                .into_iter()
                .find(|h| h.macs.contains(&mac))
                .map(|h| h.id))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.diagnosis()))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bmc_hosts_are_discovered_bound_and_booted_into_their_installer_without_prompts() {
    let started = Instant::now();
    let machines = [
        ("hf-bootstrap", "52:54:00:77:01:10", HostRole::Bootstrap),
        ("hf-worker-a", "52:54:00:77:01:21", HostRole::Worker),
        ("hf-worker-b", "52:54:00:77:01:22", HostRole::Worker),
    ];
    let assign: Vec<String> = machines
        .iter()
        .map(|(_, mac, role)| format!("{role}=mac:{mac}"))
        .collect();
    let mut site = Site::start(
        "hands_free",
        "hf",
        machines.iter().map(|(n, m, _)| vm(n, m)).collect(),
        &assign,
        BOOT_TIMEOUT,
        |bmc, dir| {
            (0..machines.len())
                .map(|i| bmc_entry(bmc, i, dir, PASSWORD))
                .collect()
        },
    );
    site.prepare().await;
    for i in 0..machines.len() {
        assert_eq!(site.bmc.domain_state(i), "shut off", "defined powered off");
    }
    eprintln!("site ready after {:.0} s", started.elapsed().as_secs_f64());

    // The bootstrap phase powers every --bmc host not discovered yet (all three) into
    // discovery, binds the bootstrap machine and power cycles it into its script; the
    // workers phase finds the two workers reported and does the same with them.
    let mut reports = Vec::new();
    for role in [HostRole::Bootstrap, HostRole::Worker] {
        let report = site
            .run(OkdHostsScore::new(role, site.install.clone()))
            .await;
        reports.push(report.clone());
        assert_eq!(
            report.status,
            ScoreStatus::Success,
            "{report:#?}\n{}",
            site.diagnosis()
        );
        let text = format!("{report:?}");
        assert!(!text.contains(PASSWORD), "{text}");
        for (_, mac, _) in machines.iter().filter(|m| m.2 == role) {
            assert!(
                report
                    .details
                    .iter()
                    .any(|d| d.contains(&format!("host {mac} power cycled by its BMC"))),
                "the {role} phase's report says {mac} was power cycled by its BMC: {report:#?}"
            );
        }
    }
    assert_eq!(
        site.prompts.asked(),
        Vec::<String>::new(),
        "no question was asked"
    );
    eprintln!(
        "both phases done after {:.0} s",
        started.elapsed().as_secs_f64()
    );

    let topology = site.okd.topology();
    let hosts = topology.known_hosts().await.unwrap();
    let bindings = topology.host_bindings().await.unwrap();
    let progress = site.progress();
    for (i, (name, mac_text, role)) in machines.iter().enumerate() {
        let mac = MacAddress::parse(mac_text).unwrap();
        assert_eq!(
            site.bmc.domain_state(i),
            "running",
            "{name} was powered by Harmony\n{}",
            site.diagnosis()
        );
        assert!(
            progress.iter().any(|l| l.contains(&format!(
                "discovery: host {mac_text} power cycled by its BMC"
            ))),
            "{name} was powered into discovery: {progress:#?}"
        );
        let host = hosts
            .iter()
            .find(|h| h.macs.contains(&mac))
            .unwrap_or_else(|| panic!("{name} is in the inventory: {hosts:#?}"));
        assert_eq!(
            host.id.as_str(),
            site.bmc.system_ids()[i],
            "{name}'s id is its DMI UUID, the Redfish system's id"
        );
        let binding = bindings
            .iter()
            .find(|b| b.host == host.id)
            .unwrap_or_else(|| panic!("{name} is bound: {bindings:#?}"));
        assert_eq!(binding.role, *role, "{name}");
        assert_eq!(binding.mac, mac, "{name} is bound by its boot MAC");
    }

    // Power cycled by the reboot step, each machine PXE boots from its reserved address into
    // its per-MAC script, whose kernel fetches the role's ignition.
    for (i, (name, mac_text, role)) in machines.iter().enumerate() {
        let mac = MacAddress::parse(mac_text).unwrap();
        let binding = bindings.iter().find(|b| b.mac == mac).unwrap();
        let ip = topology
            .layout()
            .hosts_for(*role)
            .iter()
            .find(|l| l.name == binding.logical)
            .map(|l| l.ip.to_string())
            .expect("bound to a logical host of its role");
        let script = format!("/ipxe/{}.ipxe", mac.to_hyphenated());
        let ignition = format!("/ignition/{}", ignition_file(*role));
        let what = format!("{name} fetched {script}, then {ignition}, from {ip}");
        until(&what, BOOT_TIMEOUT, || async {
            let log = topology.access_log().await.map_err(|e| e.to_string())?;
            let from = |path: &str| {
                log.iter()
                    .position(|a| a.path == path && a.client == ip && a.status == 200)
            };
            Ok(match (from(&script), from(&ignition)) {
                (Some(s), Some(g)) if s < g => Some(()),
                _ => None,
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", site.diagnosis()));
        let console = site.bmc.serial_log(i);
        let line = format!("stand-in installer: fetched http://{SERVICES}:{HTTP_PORT}{ignition}");
        until(
            &format!("{name}'s console says {line:?}"),
            Duration::from_secs(60),
            || async { Ok(console_text(&console).contains(&line).then_some(())) },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", site.diagnosis()));
    }
    for (i, (name, ..)) in machines.iter().enumerate() {
        eprintln!("--- {name}");
        print_kernel_banner(&site.bmc.serial_log(i));
    }

    // Every machine's time, phase by phase: its discovery boot, then its install boot. The
    // ignition fetch comes after the phase's report, so the timeline is read again here.
    let macs: Vec<MacAddress> = machines
        .iter()
        .map(|(_, m, _)| MacAddress::parse(m).unwrap())
        .collect();
    let timelines = topology.timelines(&macs).await.unwrap();
    for (t, (name, ..)) in timelines.iter().zip(&machines) {
        eprintln!("timeline {}", t.line());
        let phases = |b: &harmony::domain::capability::BootTimeline| {
            b.phases.iter().map(|p| p.phase).collect::<Vec<_>>()
        };
        assert_eq!(
            t.boots.len(),
            2,
            "{name}: a discovery and an install boot: {t:#?}"
        );
        assert_eq!(
            phases(&t.boots[0]),
            [
                BootPhase::PowerOnRequested,
                BootPhase::DhcpLease,
                BootPhase::ScriptFetched,
                BootPhase::KernelFetched,
                BootPhase::InitrdFetched,
                BootPhase::DiscoveryReported
            ],
            "{name}'s discovery boot: {t:#?}"
        );
        assert_eq!(
            phases(&t.boots[1]),
            [
                BootPhase::PowerOnRequested,
                BootPhase::DhcpLease,
                BootPhase::ScriptFetched,
                BootPhase::KernelFetched,
                BootPhase::InitrdFetched,
                BootPhase::IgnitionFetched
            ],
            "{name}'s install boot: {t:#?}"
        );
        for boot in &t.boots {
            assert!(
                boot.phases.windows(2).all(|w| w[0].at_ms <= w[1].at_ms),
                "{name}: phases in time order: {t:#?}"
            );
        }
    }
    // The phases' reports carry their hosts' timelines for the JSON report, and the terminal
    // got one line per host per phase as it was seen.
    for (report, role) in reports.iter().zip([HostRole::Bootstrap, HostRole::Worker]) {
        let data = report.data.as_ref().expect("the phase reports data");
        let listed: Vec<&str> = data["timeline"]
            .as_array()
            .expect("a timeline array")
            .iter()
            .filter_map(|t| t["mac"].as_str())
            .collect();
        for (_, mac, _) in machines.iter().filter(|m| m.2 == role) {
            assert!(listed.contains(mac), "{role}: {data}");
        }
        assert!(
            report.details.iter().any(|d| d.starts_with("timeline ")),
            "{report:#?}"
        );
    }
    // Each phase watches its own hosts' install boots (and the bootstrap phase the discovery
    // boot of the host it waits for; the workers may report while it installs). Progress
    // lines are prefixed by the Score's name.
    let progress = site.progress();
    for (_, mac, role) in &machines {
        let mut phases = vec!["DHCP lease at", "iPXE script fetched at"];
        if *role == HostRole::Bootstrap {
            phases.push("discovery report at");
        }
        for phase in phases {
            assert!(
                progress
                    .iter()
                    .any(|l| l.contains(&format!(": {mac}: {phase}"))),
                "{mac}: a progress line for {phase:?}: {progress:#?}"
            );
        }
    }
    assert_eq!(site.prompts.asked(), Vec::<String>::new());
    eprintln!(
        "hands-free bring-up of {} machines: {:.0} s",
        machines.len(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn each_bmc_fault_fails_its_own_host_and_names_it() {
    let started = Instant::now();
    // (d) already on before the run; (c) no boot ROM; (a) wrong credentials (never powered).
    let on = ("hff-on", "52:54:00:77:02:21");
    let no_rom = ("hff-norom", "52:54:00:77:02:22");
    let locked = ("hff-locked", "52:54:00:77:02:23");
    // (b) a BMC that accepts connections and never answers.
    let silent_mac = "52:54:00:77:02:24";
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_bmc = format!(
        "redfish://127.0.0.1:{}/redfish/v1/Systems/1",
        silent.local_addr().unwrap().port()
    );
    let mut vms = vec![
        vm(on.0, on.1),
        vm(no_rom.0, no_rom.1),
        vm(locked.0, locked.1),
    ];
    vms[1].pxe_rom = false;
    let assign = [
        format!("worker=mac:{}", on.1),
        format!("worker=mac:{}", no_rom.1),
    ];
    let mut site = Site::start(
        "faults",
        "hff",
        vms,
        &assign,
        Duration::from_secs(90),
        |bmc, dir| {
            let credentials = dir.join("silent.credentials");
            std::fs::write(&credentials, format!("admin:{PASSWORD}\n")).unwrap();
            vec![
                bmc_entry(bmc, 0, dir, PASSWORD),
                bmc_entry(bmc, 1, dir, PASSWORD),
                bmc_entry(bmc, 2, dir, WRONG_PASSWORD),
                HostBmc::parse(&format!(
                    "{silent_mac}={silent_bmc},credentials=file:{}",
                    credentials.display()
                ))
                .unwrap(),
            ]
        },
    );
    site.prepare().await;
    site.bmc.virsh(&["start", on.0]).unwrap();
    assert_eq!(site.bmc.domain_state(0), "running");
    let locked_bmc = site.bmc.bmc_url(2).replacen("https://", "redfish://", 1);

    let report = site
        .run(OkdHostsScore::new(HostRole::Worker, site.install.clone()))
        .await;
    let text = format!("{report:#?}");
    let message = &report.message;
    assert_eq!(report.status, ScoreStatus::Failed, "{text}");
    eprintln!("the workers phase failed, as it must: {message}");
    // (c) powered, never reported: named, with the boot-order hint after it.
    let no_rom_note = message
        .find(no_rom.1)
        .map(|at| &message[at..])
        .unwrap_or_else(|| panic!("{} is named: {text}\n{}", no_rom.1, site.diagnosis()));
    assert!(
        no_rom_note.contains("boot order")
            && no_rom_note.contains("may ignore one-time boot overrides"),
        "{text}"
    );
    assert!(message.contains("more worker host(s)"), "{text}");
    // (a) refused by its BMC: host, BMC and 401 named.
    let locked_line = message
        .split("; ")
        .find(|l| l.contains(locked.1))
        .unwrap_or_else(|| panic!("{} is named: {text}", locked.1));
    assert!(
        locked_line.contains(&locked_bmc) && locked_line.contains("401"),
        "{locked_line}"
    );
    // (b) no answer: host, BMC and the timeout named.
    let silent_line = message
        .split("; ")
        .find(|l| l.contains(silent_mac))
        .unwrap_or_else(|| panic!("{silent_mac} is named: {text}"));
    assert!(
        silent_line.contains(&silent_bmc) && silent_line.contains("no answer within"),
        "{silent_line}"
    );
    let progress = site.progress().join("\n");
    for secret in [PASSWORD, WRONG_PASSWORD] {
        assert!(!text.contains(secret), "{text}");
        assert!(!progress.contains(secret), "{progress}");
    }
    // The others were powered all the same; the refused one was not.
    assert_eq!(site.bmc.domain_state(0), "running", "{}", site.diagnosis());
    assert_eq!(site.bmc.domain_state(1), "running", "{}", site.diagnosis());
    assert_eq!(site.bmc.domain_state(2), "shut off", "{}", site.diagnosis());
    // (d) on before the run: power cycled from On into discovery.
    assert!(
        progress.contains(&format!(
            "discovery: host {} power cycled by its BMC {} (On -> On, sent ForceRestart)",
            on.1,
            site.bmc.bmc_url(0).replacen("https://", "redfish://", 1)
        )),
        "{progress}"
    );
    let id = site.discovered(0).await;
    assert_eq!(id.as_str(), site.bmc.system_ids()[0]);
    let roles = site.okd.topology().role_assignments().await.unwrap();
    assert!(
        roles
            .iter()
            .any(|r| r.host == id && r.role == HostRole::Worker),
        "given the worker role by its --assign rule: {roles:?}"
    );
    assert_eq!(site.prompts.asked(), Vec::<String>::new());
    drop(silent);
    eprintln!("faults: {:.0} s", started.elapsed().as_secs_f64());
}
