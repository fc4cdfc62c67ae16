//! The example as an operator runs it: a real process with no terminal on stdin.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn run(cwd: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_example-okd-workers"))
        .args(args)
        .envs(envs.iter().map(|(k, v)| (*k, *v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("example binary starts");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the example hung for 60 s with args {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn renders_dnsmasq_haproxy_and_ipxe_files_twice_identically() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(dir.path(), &[], &[]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}{}",
        text(&first.stdout),
        text(&first.stderr)
    );
    let out = dir.path().join("harmony-out/okd");
    let before = files(&out);
    let names: Vec<&str> = before.keys().map(String::as_str).collect();
    // Render copies Debian's iPXE binaries when the `ipxe` package is installed (tests/setup.sh
    // installs it) and skips them otherwise.
    let ipxe = std::path::Path::new("/usr/lib/ipxe");
    let mut expected = vec![
        "dnsmasq/conf.d/pxe.conf",
        "dnsmasq/conf.d/wildcards.conf",
        "dnsmasq/dhcp-hosts",
        "dnsmasq/dnsmasq.conf",
        "dnsmasq/hosts",
        "dnsmasq/tftp/harmony-boot.ipxe",
    ];
    for (binary, rendered) in [
        ("ipxe.efi", "dnsmasq/tftp/ipxe.efi"),
        ("undionly.kpxe", "dnsmasq/tftp/undionly.kpxe"),
    ] {
        if ipxe.join(binary).is_file() {
            expected.push(rendered);
        }
    }
    expected.extend([
        "haproxy/haproxy.cfg",
        "http/ipxe-scripts.json",
        "http/www/boot.ipxe",
    ]);
    assert_eq!(names, expected);
    let wait = text(&before["dnsmasq/tftp/harmony-boot.ipxe"]);
    assert!(
        wait.contains("chain --autofree http://192.168.50.2:8080/boot.ipxe || goto wait"),
        "the TFTP script chains to the HTTP boot script and waits when it fails:\n{wait}"
    );
    let hosts = text(&before["dnsmasq/dhcp-hosts"]);
    assert_eq!(
        hosts,
        "52:54:00:50:00:21,192.168.50.21,worker0\n52:54:00:50:00:22,192.168.50.22,worker1\n"
    );
    // The per-host scripts are one table (name -> script), served as /ipxe/<name>.ipxe.
    let scripts = harmony::infra::http_boot::ScriptTable::in_dir(&out.join("http"))
        .read()
        .unwrap();
    assert_eq!(
        scripts.keys().collect::<Vec<_>>(),
        ["52-54-00-50-00-21.ipxe", "52-54-00-50-00-22.ipxe"]
    );
    let script = &scripts["52-54-00-50-00-22.ipxe"];
    assert!(
        script.contains("coreos.inst.ignition_url=http://192.168.50.2:8080/ignition/worker.ign"),
        "{script}"
    );
    assert!(text(&before["haproxy/haproxy.cfg"]).contains("bind 192.168.50.2:6443"));

    // No cluster exists: the join and bootstrap-removal phases contact none and say so, and
    // the rendered load balancer keeps the bootstrap host (the cluster bootstraps through it).
    let report = text(&first.stdout);
    assert!(
        report.contains("render mode: no cluster is contacted; with --apply this phase waits"),
        "{report}"
    );
    assert!(
        report.contains(
            "render mode: no cluster is contacted and the load balancer keeps the bootstrap host"
        ),
        "{report}"
    );
    assert!(
        text(&before["haproxy/haproxy.cfg"]).contains("server bootstrap 192.168.50.10:6443"),
        "the rendered load balancer lost the bootstrap host"
    );

    let second = run(dir.path(), &[], &[]);
    assert_eq!(second.status.code(), Some(0));
    let report = text(&second.stdout);
    assert!(
        report.contains("Summary: 0 succeeded, 6 unchanged"),
        "{report}"
    );
    assert_eq!(files(&out), before, "a second render rewrote bytes");
}

#[test]
fn workers_are_never_bound_to_control_plane_logical_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &["--filter", "prepare", "--filter", "workers"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let hosts =
        std::fs::read_to_string(dir.path().join("harmony-out/okd/dnsmasq/dhcp-hosts")).unwrap();
    for line in hosts.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        assert!(
            fields[2].starts_with("worker")
                && ["192.168.50.21", "192.168.50.22"].contains(&fields[1]),
            "a worker machine was bound outside the worker logical hosts: {line}"
        );
        for cp in ["cp0", "cp1", "cp2", "bootstrap", "192.168.50.1"] {
            assert!(
                !line.contains(&format!(",{cp}")),
                "worker bound to control plane: {line}"
            );
        }
    }
    assert_eq!(hosts.lines().count(), 2);
}

#[test]
fn apply_without_terminal_or_yes_exits_2_naming_yes_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let services = dir.path().join("services");
    let ignition = dir.path().join("ignition");
    std::fs::create_dir_all(&ignition).unwrap();
    for f in ["bootstrap.ign", "master.ign", "worker.ign"] {
        std::fs::write(ignition.join(f), "{}").unwrap();
    }
    let out = run(
        dir.path(),
        &["--apply"],
        &[
            ("HARMONY_OKD_SERVICES_DIR", services.as_path()),
            ("HARMONY_OKD_IGNITION_DIR", ignition.as_path()),
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(err.contains("reboot"), "{err}");
    assert!(err.contains("nothing was applied"), "{err}");
    assert!(!services.exists(), "the services folder was created");
    assert!(!dir.path().join("harmony-out").exists());
}

#[test]
fn a_render_is_the_same_bytes_in_any_folder_and_names_the_host_paths() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let out_a = a.path().join("out");
    let out_b = b.path().join("x/y/z/deeper-render");
    let mut trees = Vec::new();
    for (cwd, out) in [(a.path(), &out_a), (b.path(), &out_b)] {
        let run = run(cwd, &["--out", out.to_str().unwrap()], &[]);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{}{}",
            text(&run.stdout),
            text(&run.stderr)
        );
        let tree = files(&out.join("okd"));
        for (name, bytes) in &tree {
            let body = text(bytes);
            for dir in [a.path(), b.path()] {
                assert!(
                    !body.contains(dir.to_str().unwrap()),
                    "{name} names the render folder {}:\n{body}",
                    dir.display()
                );
            }
        }
        trees.push(tree);
    }
    assert!(
        trees[0].contains_key("dnsmasq/dnsmasq.conf"),
        "{:?}",
        trees[0].keys()
    );
    assert_eq!(
        trees[0].keys().collect::<Vec<_>>(),
        trees[1].keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &trees[0] {
        assert!(
            trees[1][name] == *bytes,
            "{name} differs between renders:\n{}\n---\n{}",
            text(bytes),
            text(&trees[1][name])
        );
    }
    let conf = text(&trees[0]["dnsmasq/dnsmasq.conf"]);
    for line in [
        "tftp-root=/var/lib/harmony/okd/dnsmasq/tftp",
        "dhcp-hostsfile=/var/lib/harmony/okd/dnsmasq/dhcp-hosts",
    ] {
        assert!(conf.contains(line), "{line} missing:\n{conf}");
    }
    assert!(
        text(&trees[0]["haproxy/haproxy.cfg"])
            .contains("stats socket /var/lib/harmony/okd/haproxy/haproxy.sock"),
        "haproxy's socket is on the host"
    );
}

#[test]
fn plan_after_a_render_in_the_same_folder_succeeds_without_the_ipxe_binaries() {
    // Render skips the iPXE binaries when Debian's `ipxe` package is not installed; plan must
    // do the same instead of failing to read them, and report nothing to change.
    let dir = tempfile::tempdir().unwrap();
    let render = run(dir.path(), &[], &[]);
    assert_eq!(render.status.code(), Some(0), "{}", text(&render.stderr));
    let before = files(&dir.path().join("harmony-out/okd"));
    let plan = run(dir.path(), &["--plan"], &[]);
    let report = text(&plan.stdout);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{report}{}",
        text(&plan.stderr)
    );
    assert!(
        report.contains("Summary: 0 succeeded, 6 unchanged"),
        "{report}"
    );
    assert_eq!(
        files(&dir.path().join("harmony-out/okd")),
        before,
        "plan wrote files"
    );
}

#[test]
fn apply_without_the_installed_clusters_kubeconfig_exits_2_naming_it_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let services = dir.path().join("services");
    let ignition = dir.path().join("ignition");
    std::fs::create_dir_all(&ignition).unwrap();
    for f in ["bootstrap.ign", "master.ign", "worker.ign"] {
        std::fs::write(ignition.join(f), "{}").unwrap();
    }
    // The ignition files are there, but not the admin kubeconfig the installer writes beside
    // them (auth/kubeconfig): the join and bootstrap-removal phases could not reach the cluster.
    let out = run(
        dir.path(),
        &["--apply", "--yes"],
        &[
            ("HARMONY_OKD_SERVICES_DIR", services.as_path()),
            ("HARMONY_OKD_IGNITION_DIR", ignition.as_path()),
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let expected = format!(
        "invalid cluster kubeconfig: {} is not a file",
        ignition.join("auth/kubeconfig").display()
    );
    assert!(err.contains(&expected), "{expected} missing from: {err}");
    assert!(err.contains("--cluster-kubeconfig FILE"), "{err}");
    assert!(!services.exists(), "the services folder was created");

    // Named explicitly, a missing file is refused the same way.
    let elsewhere = dir.path().join("no-such-kubeconfig");
    let out = run(
        dir.path(),
        &[
            "--apply",
            "--yes",
            "--cluster-kubeconfig",
            elsewhere.to_str().unwrap(),
        ],
        &[
            ("HARMONY_OKD_SERVICES_DIR", services.as_path()),
            ("HARMONY_OKD_IGNITION_DIR", ignition.as_path()),
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{} is not a file", elsewhere.display())),
        "{err}"
    );
    assert!(!services.exists(), "the services folder was created");
}

#[test]
fn discovery_image_flag_is_checked_and_unknown_macs_get_the_discovery_range() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image");
    std::fs::create_dir_all(&image).unwrap();
    std::fs::write(image.join("vmlinuz"), "k").unwrap();
    let out = run(
        dir.path(),
        &["--discovery-image", image.to_str().unwrap()],
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--discovery-image") && err.contains("has no initrd.img"),
        "{err}"
    );
    assert!(err.contains("discovery-image/build.sh"), "{err}");
    assert!(!dir.path().join("harmony-out").exists());

    std::fs::write(image.join("initrd.img"), "i").unwrap();
    let out = run(
        dir.path(),
        &[],
        &[("HARMONY_OKD_DISCOVERY_IMAGE", image.as_path())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let root = dir.path().join("harmony-out/okd");
    let conf = std::fs::read_to_string(root.join("dnsmasq/dnsmasq.conf")).unwrap();
    assert!(
        conf.contains("dhcp-range=set:discovery,192.168.50.205,192.168.50.254,255.255.255.0,10m"),
        "{conf}"
    );
    assert!(!conf.contains("dhcp-ignore"), "{conf}");
    let boot = std::fs::read_to_string(root.join("http/www/boot.ipxe")).unwrap();
    assert!(
        boot.contains("kernel http://192.168.50.2:8080/discovery/vmlinuz")
            && boot.contains("harmony.discovery=http://192.168.50.2:8080/discovery"),
        "{boot}"
    );
}
