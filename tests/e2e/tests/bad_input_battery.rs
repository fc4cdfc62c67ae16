//! The bad-input battery: every example program, started as a process, given inputs a user
//! could get wrong (flags, names, versions, regions, MACs, roles files, kubeconfigs, inventories,
//! token and CA files). For each case: the exit status, the flag or field named on stderr and a
//! phrase of the fix, no panic, no Rust debug formatting, nothing written (the working folder
//! holds only the inputs, no `harmony-out`, no `--out` folder), the inputs' bytes and mtimes
//! unchanged, and no connection made: control-plane URLs and kubeconfig servers point at a
//! listener of this test, which must have accepted nothing.
//!
//! A second table calls the `harmony_types` parsers the examples build their names, MACs, CIDRs
//! and versions with, and checks that their errors name the kind of value and what a valid one
//! looks like.
//!
//! A case marked `gap` shows a known shortcoming outside the examples (in `harmony_cli` or
//! `harmony`); it is skipped unless `HARMONY_BATTERY_GAPS=1`, which runs it with the same checks.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use harmony_types::{
    Dns1123Label, HostName, Id, InvalidValue, IpAddress, Ipv4Cidr, MacAddress, Quantity, RegionId,
    Url, Version,
};

/// The example programs (the `e2e-example-*` binaries of this package).
#[derive(Debug, Clone, Copy)]
enum Program {
    Webapp,
    ControlPlaneHa,
    MultisitePostgres,
    OkdWorkers,
    SplitPlane,
    ServiceInstance,
    Tenants,
}

impl Program {
    fn binary(self) -> &'static str {
        match self {
            Program::Webapp => env!("CARGO_BIN_EXE_e2e-example-webapp"),
            Program::ControlPlaneHa => env!("CARGO_BIN_EXE_e2e-example-control-plane-ha"),
            Program::MultisitePostgres => env!("CARGO_BIN_EXE_e2e-example-multisite-postgres"),
            Program::OkdWorkers => env!("CARGO_BIN_EXE_e2e-example-okd-workers"),
            Program::SplitPlane => env!("CARGO_BIN_EXE_e2e-example-split-plane"),
            Program::ServiceInstance => env!("CARGO_BIN_EXE_e2e-example-service-instance"),
            Program::Tenants => env!("CARGO_BIN_EXE_e2e-example-tenants"),
        }
    }

    /// Whether the program takes `--out DIR` (the `harmony_cli` programs do).
    fn takes_out(self) -> bool {
        !matches!(self, Program::ServiceInstance)
    }
}

use Program::*;

/// One bad input.
struct Case {
    /// Unique name, shown on failure.
    name: &'static str,
    program: Program,
    /// Arguments; `{cp}` becomes `https://127.0.0.1:PORT` of the test's listener.
    args: &'static [&'static str],
    /// Environment variables set for the run (all `HARMONY_*` ones are removed first).
    env: &'static [(&'static str, &'static str)],
    /// Files created in the working folder before the run (`{cp}` substituted); a path ending
    /// in `/` is an empty folder.
    files: &'static [(&'static str, &'static str)],
    /// Pass `--out out` (checked not to be created); false when the case gives its own.
    out: bool,
    /// Expected exit status.
    code: i32,
    /// Substrings stderr must contain: the flag or field, and a phrase of the fix.
    stderr: &'static [&'static str],
    /// A known shortcoming outside the examples, skipped unless HARMONY_BATTERY_GAPS=1.
    gap: Option<&'static str>,
}

/// Defaults for the table's entries.
const C: Case = Case {
    name: "",
    program: Webapp,
    args: &[],
    env: &[],
    files: &[],
    out: true,
    code: 2,
    stderr: &[],
    gap: None,
};

/// A kubeconfig with one context, `ctx-a`, whose server is the test's listener.
const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: {cp}
contexts:
- name: ctx-a
  context: {cluster: c1, user: u1}
current-context: ctx-a
users:
- name: u1
  user: {token: not-a-real-token}
";

const TOKEN: &str = "not-a-real-admin-token\n";

/// A `harmony_cli` flag the program's topology does not read.
macro_rules! not_offered {
    ($name:literal, $program:expr, $flag:literal $(, $arg:literal)*) => {
        Case {
            name: $name,
            program: $program,
            args: &[$flag $(, $arg)*],
            stderr: &[
                concat!("error: ", $flag, " does not apply to this program"),
                concat!("drop ", $flag),
            ],
            ..C
        }
    };
}

/// A roles file (`--roles r.toml`) for the OKD example.
macro_rules! roles {
    ($name:literal, $toml:literal, [$($s:literal),*] $(, gap = $gap:literal)?) => {
        Case {
            name: $name,
            program: OkdWorkers,
            args: &["--roles", "r.toml"],
            files: &[("r.toml", $toml)],
            stderr: &["roles file r.toml", $($s),*],
            $(gap: Some($gap),)?
            ..C
        }
    };
}

/// `--pg-version` of the multi-site example.
macro_rules! pg_version {
    ($name:literal, $v:literal, $problem:literal) => {
        Case {
            name: $name,
            program: MultisitePostgres,
            args: &["--pg-version", $v],
            stderr: &[
                concat!("--pg-version '", $v, "'"),
                $problem,
                "--pg-version 17",
            ],
            ..C
        }
    };
}

/// `--regions` of the tenants example.
macro_rules! regions {
    ($name:literal, $v:literal, $problem:literal) => {
        Case {
            name: $name,
            program: Tenants,
            args: &["--regions", $v],
            stderr: &["--regions", $problem, "such as --regions eu-west,us-east"],
            ..C
        }
    };
}

const CASES: &[Case] = &[
    // ---- webapp (DefaultTopology: Kubernetes flags only) ----
    not_offered!("webapp --apply", Webapp, "--apply"),
    not_offered!("webapp --inventory", Webapp, "--inventory", "inv.sqlite"),
    not_offered!("webapp --roles", Webapp, "--roles", "r.toml"),
    not_offered!(
        "webapp --discovery-timeout",
        Webapp,
        "--discovery-timeout",
        "5"
    ),
    Case {
        name: "webapp --filter matching nothing",
        args: &["--filter", "nomatch"],
        stderr: &[
            "--filter \"nomatch\" matched no Score",
            "known Scores: \"Namespace webshop\"",
        ],
        ..C
    },
    Case {
        name: "webapp --output yaml",
        args: &["--output", "yaml"],
        stderr: &["'--output <OUTPUT>'", "possible values: text, json"],
        ..C
    },
    Case {
        name: "webapp --output without a value",
        args: &["--output"],
        stderr: &["'--output <OUTPUT>'", "possible values: text, json"],
        ..C
    },
    Case {
        name: "webapp -q with -v",
        args: &["-q", "-v"],
        stderr: &[
            "'--quiet...' cannot be used with '--verbose...'",
            "try '--help'",
        ],
        ..C
    },
    Case {
        name: "webapp unknown flag",
        args: &["--bogus"],
        stderr: &["unexpected argument '--bogus'", "try '--help'"],
        ..C
    },
    Case {
        name: "webapp --kubeconfig without --yes and no terminal",
        args: &["--kubeconfig", "kc.yaml"],
        files: &[("kc.yaml", KUBECONFIG)],
        stderr: &["needs confirmation", "re-run with --yes"],
        ..C
    },
    Case {
        name: "webapp --context the kubeconfig lacks",
        args: &["--kubeconfig", "kc.yaml", "--context", "nope", "--plan"],
        files: &[("kc.yaml", KUBECONFIG)],
        code: 1,
        stderr: &[
            "--context nope: no such context in kc.yaml",
            "it has: ctx-a",
            "pass one of them to --context",
        ],
        ..C
    },
    Case {
        name: "webapp --out is an existing file",
        args: &["--out", "out", "--filter", "Namespace"],
        files: &[("out", "not a folder\n")],
        out: false,
        code: 1,
        stderr: &[
            "cannot create output folder out/local",
            "pass --out DIR with a writable folder",
        ],
        ..C
    },
    Case {
        name: "webapp --kubeconfig that does not parse",
        args: &["--kubeconfig", "kc.yaml", "--plan"],
        files: &[("kc.yaml", "not: [yaml\n")],
        code: 1,
        stderr: &["--kubeconfig kc.yaml", "fix:"],
        ..C
    },
    Case {
        name: "webapp --kubeconfig that is empty",
        args: &["--kubeconfig", "kc.yaml", "--plan"],
        files: &[("kc.yaml", "")],
        code: 1,
        stderr: &["--kubeconfig kc.yaml", "fix:"],
        ..C
    },
    Case {
        name: "webapp --kubeconfig that does not exist",
        args: &["--kubeconfig", "missing.yaml", "--plan"],
        code: 1,
        stderr: &["--kubeconfig missing.yaml", "fix:"],
        ..C
    },
    Case {
        name: "webapp --context without any kubeconfig",
        args: &["--context", "nope", "--plan"],
        code: 1,
        stderr: &["~/.kube/config", "--kubeconfig FILE"],
        ..C
    },
    // ---- control-plane-ha (DefaultTopology) ----
    not_offered!("control-plane-ha --apply", ControlPlaneHa, "--apply"),
    not_offered!(
        "control-plane-ha --roles",
        ControlPlaneHa,
        "--roles",
        "r.toml"
    ),
    Case {
        name: "control-plane-ha --filter matching nothing",
        program: ControlPlaneHa,
        args: &["--filter", "zzz"],
        stderr: &[
            "--filter \"zzz\" matched no Score",
            "known Scores: \"PostgreSQL harmony-system/harmony-control-plane-db\"",
        ],
        ..C
    },
    Case {
        name: "control-plane-ha --context the kubeconfig lacks",
        program: ControlPlaneHa,
        args: &["--kubeconfig", "kc.yaml", "--context", "prod", "--plan"],
        files: &[("kc.yaml", KUBECONFIG)],
        code: 1,
        stderr: &[
            "--context prod: no such context in kc.yaml",
            "pass one of them to --context",
        ],
        ..C
    },
    Case {
        name: "control-plane-ha --output xml",
        program: ControlPlaneHa,
        args: &["--output", "xml"],
        stderr: &["'--output <OUTPUT>'", "possible values: text, json"],
        ..C
    },
    Case {
        name: "control-plane-ha --out is an existing file",
        program: ControlPlaneHa,
        args: &["--out", "out"],
        files: &[("out", "not a folder\n")],
        out: false,
        code: 1,
        stderr: &[
            "cannot create output folder out/local",
            "pass --out DIR with a writable folder",
        ],
        ..C
    },
    // ---- multisite-postgres (MultiSiteTopology<DefaultTopology>, --pg-version) ----
    pg_version!(
        "multisite --pg-version twelve",
        "twelve",
        "\"twelve\" is not a version number"
    ),
    pg_version!(
        "multisite --pg-version 15 (passthrough Route)",
        "15",
        "PostgreSQL 15 cannot replicate through an OpenShift passthrough Route"
    ),
    pg_version!(
        "multisite --pg-version 17.1.2",
        "17.1.2",
        "is not MAJOR or MAJOR.MINOR"
    ),
    pg_version!(
        "multisite --pg-version empty",
        "",
        "\"\" is not a version number"
    ),
    pg_version!(
        "multisite --pg-version 19",
        "19",
        "PostgreSQL 19 is not supported"
    ),
    pg_version!(
        "multisite --pg-version 17.99",
        "17.99",
        "no CloudNativePG image of PostgreSQL 17.99"
    ),
    Case {
        name: "multisite --pg-version without a value",
        program: MultisitePostgres,
        args: &["--pg-version"],
        stderr: &[
            "a value is required for '--pg-version <MAJOR>'",
            "try '--help'",
        ],
        ..C
    },
    not_offered!(
        "multisite --inventory",
        MultisitePostgres,
        "--inventory",
        "inv.sqlite"
    ),
    not_offered!(
        "multisite --discovery-timeout",
        MultisitePostgres,
        "--discovery-timeout",
        "60"
    ),
    Case {
        name: "multisite --filter matching nothing",
        program: MultisitePostgres,
        args: &["--filter", "orders-db"],
        stderr: &[
            "--filter \"orders-db\" matched no Score",
            "known Scores: \"MultisitePostgreSQL tenant-a/finance-db\"",
        ],
        ..C
    },
    Case {
        name: "multisite --kubeconfig without the sites' contexts",
        program: MultisitePostgres,
        args: &["--kubeconfig", "kc.yaml", "--plan"],
        files: &[("kc.yaml", KUBECONFIG)],
        stderr: &[
            "--kubeconfig kc.yaml: no context named site-paris, site-newyork",
            "it has: ctx-a",
            "add contexts named site-paris, site-newyork",
        ],
        ..C
    },
    // ---- okd-workers (HAClusterTopology: bare-metal flags; --ignition-dir, --services-dir) ----
    not_offered!("okd --kubeconfig", OkdWorkers, "--kubeconfig", "kc.yaml"),
    not_offered!("okd --context", OkdWorkers, "--context", "ctx-a"),
    not_offered!("okd --prune", OkdWorkers, "--prune"),
    not_offered!("okd --force-conflicts", OkdWorkers, "--force-conflicts"),
    Case {
        name: "okd --apply without --ignition-dir",
        program: OkdWorkers,
        args: &["--apply", "--services-dir", "svc"],
        stderr: &[
            "--ignition-dir: required with --apply",
            "pass --ignition-dir DIR",
        ],
        ..C
    },
    Case {
        name: "okd --apply with HARMONY_OKD_IGNITION_DIR empty",
        program: OkdWorkers,
        args: &["--apply", "--yes", "--services-dir", "svc"],
        env: &[("HARMONY_OKD_IGNITION_DIR", "")],
        stderr: &[
            "--ignition-dir: required with --apply",
            "or set HARMONY_OKD_IGNITION_DIR",
        ],
        ..C
    },
    Case {
        name: "okd --apply with --ignition-dir empty",
        program: OkdWorkers,
        args: &[
            "--apply",
            "--yes",
            "--ignition-dir",
            "",
            "--services-dir",
            "svc",
        ],
        stderr: &[
            "--ignition-dir: required with --apply",
            "pass --ignition-dir DIR",
        ],
        ..C
    },
    Case {
        name: "okd --ignition-dir without ignition files",
        program: OkdWorkers,
        args: &["--ignition-dir", "ign"],
        files: &[("ign/", "")],
        stderr: &[
            "--ignition-dir: cannot read ign/bootstrap.ign",
            "openshift-install create ignition-configs --dir ign",
        ],
        ..C
    },
    Case {
        name: "okd --ignition-dir that does not exist",
        program: OkdWorkers,
        args: &[
            "--apply",
            "--yes",
            "--ignition-dir",
            "nowhere",
            "--services-dir",
            "svc",
        ],
        stderr: &[
            "--ignition-dir: cannot read nowhere/bootstrap.ign",
            "openshift-install create ignition-configs --dir nowhere",
        ],
        ..C
    },
    Case {
        name: "okd --apply without --yes and no terminal",
        program: OkdWorkers,
        args: &["--apply", "--ignition-dir", "ign", "--services-dir", "svc"],
        files: &[
            ("ign/bootstrap.ign", "{}\n"),
            ("ign/master.ign", "{}\n"),
            ("ign/worker.ign", "{}\n"),
        ],
        stderr: &["invalid --yes", "re-run with --yes"],
        ..C
    },
    Case {
        name: "okd HARMONY_OKD_SERVICES_DIR empty",
        program: OkdWorkers,
        env: &[("HARMONY_OKD_SERVICES_DIR", "")],
        stderr: &[
            "--services-dir: empty",
            "HARMONY_OKD_SERVICES_DIR is set but empty",
            "unset the variable",
        ],
        ..C
    },
    Case {
        name: "okd --services-dir empty",
        program: OkdWorkers,
        args: &["--services-dir", ""],
        stderr: &["--services-dir: empty", "leave --services-dir out"],
        ..C
    },
    Case {
        name: "okd --discovery-timeout abc",
        program: OkdWorkers,
        args: &["--discovery-timeout", "abc"],
        stderr: &[
            "invalid value 'abc' for '--discovery-timeout <SECONDS>'",
            "try '--help'",
        ],
        ..C
    },
    Case {
        name: "okd --discovery-timeout -1",
        program: OkdWorkers,
        args: &["--discovery-timeout", "-1"],
        stderr: &["--discovery-timeout", "try '--help'"],
        ..C
    },
    Case {
        name: "okd --inventory that is not SQLite",
        program: OkdWorkers,
        args: &["--inventory", "inv.sqlite"],
        files: &[("inv.sqlite", "this is not a database\n")],
        stderr: &["--inventory inv.sqlite", "leave it out"],
        ..C
    },
    Case {
        name: "okd --inventory that does not exist",
        program: OkdWorkers,
        args: &["--inventory", "missing.sqlite"],
        stderr: &[
            "--inventory missing.sqlite: no such file",
            "or leave it out",
        ],
        ..C
    },
    Case {
        name: "okd --roles that does not exist",
        program: OkdWorkers,
        args: &["--roles", "missing.toml"],
        stderr: &[
            "roles file missing.toml",
            "pass an existing file to --roles",
        ],
        ..C
    },
    Case {
        name: "okd --roles that is a folder",
        program: OkdWorkers,
        args: &["--roles", "roles"],
        files: &[("roles/", "")],
        stderr: &["roles file roles", "pass an existing file to --roles"],
        ..C
    },
    Case {
        name: "okd --assign without a unit",
        program: OkdWorkers,
        args: &["--assign", "worker=min-disk:120"],
        stderr: &["'--assign <ROLE=RULE>'", "has no unit", "write e.g. 16GiB"],
        ..C
    },
    Case {
        name: "okd --assign with an unknown role",
        program: OkdWorkers,
        args: &["--assign", "master=mac:52:54:00:50:00:31"],
        stderr: &["'--assign <ROLE=RULE>'", "unknown role", "control-plane"],
        ..C
    },
    Case {
        name: "okd --assign one MAC to two roles",
        program: OkdWorkers,
        args: &[
            "--assign",
            "worker=mac:52:54:00:50:00:31",
            "--assign",
            "bootstrap=mac:52:54:00:50:00:31",
        ],
        stderr: &[
            "--assign",
            "both name MAC 52:54:00:50:00:31",
            "one --assign rule",
        ],
        ..C
    },
    roles!(
        "okd roles: not TOML",
        "not toml [[\n",
        ["each [[host]] needs `mac` or `id`"]
    ),
    roles!(
        "okd roles: bad MAC",
        "[[host]]\nmac = \"52:54:00:zz:00:21\"\nrole = \"worker\"\n",
        [
            "invalid MAC address \"52:54:00:zz:00:21\"",
            "such as 52:54:00:12:34:56"
        ]
    ),
    roles!(
        "okd roles: short MAC",
        "[[host]]\nmac = \"52:54:00:50:21\"\nrole = \"worker\"\n",
        [
            "invalid MAC address \"52:54:00:50:21\"",
            "six hexadecimal octets"
        ]
    ),
    roles!(
        "okd roles: unknown role",
        "[[host]]\nmac = \"52:54:00:50:00:21\"\nrole = \"master\"\n",
        [
            "unknown variant `master`",
            "expected one of `bootstrap`, `control-plane`, `worker`"
        ]
    ),
    roles!(
        "okd roles: no role",
        "[[host]]\nmac = \"52:54:00:50:00:21\"\n",
        ["role", "each [[host]] needs `mac` or `id`, and `role`"]
    ),
    roles!(
        "okd roles: unknown logical host",
        "[[host]]\nmac = \"52:54:00:50:00:21\"\nrole = \"worker\"\nlogical = \"worker9\"\n",
        [
            "host[0]: worker9 is not a logical host",
            "use one of: worker0, worker1"
        ]
    ),
    roles!(
        "okd roles: worker bound to a control-plane host",
        "[[host]]\nmac = \"52:54:00:50:00:21\"\nrole = \"worker\"\nlogical = \"cp0\"\n",
        [
            "host[0]: cp0 is a control-plane logical host",
            "bind it to one of: worker0, worker1"
        ]
    ),
    roles!(
        "okd roles: neither mac nor id",
        "[[host]]\nrole = \"worker\"\n",
        ["host[0]", "give exactly one of `mac` or `id`"]
    ),
    roles!(
        "okd roles: both mac and id",
        "[[host]]\nmac = \"52:54:00:50:00:21\"\nid = \"rack14-u10\"\nrole = \"worker\"\n",
        ["host[0]", "give exactly one of `mac` or `id`"]
    ),
    roles!(
        "okd roles: bad id",
        "[[host]]\nid = \"Bad Id!\"\nrole = \"worker\"\n",
        [
            "invalid id \"Bad Id!\"",
            "1 to 128 characters of letters, digits"
        ]
    ),
    roles!(
        "okd roles: misspelt table",
        "[[hosts]]\nmac = \"52:54:00:50:00:21\"\nrole = \"worker\"\n",
        ["unknown field `hosts`, expected `host`"]
    ),
    roles!(
        "okd roles: a host twice",
        "[[host]]\nmac = \"52:54:00:50:00:21\"\nrole = \"worker\"\n[[host]]\nmac = \"52:54:00:50:00:21\"\nrole = \"worker\"\n",
        ["host[1]", "declared twice", "keep one"]
    ),
    Case {
        name: "okd --filter matching nothing",
        program: OkdWorkers,
        args: &["--filter", "masters"],
        stderr: &[
            "--filter \"masters\" matched no Score",
            "known Scores: \"OKD prepare\"",
        ],
        ..C
    },
    Case {
        name: "okd --out is an existing file",
        program: OkdWorkers,
        args: &["--out", "out"],
        files: &[("out", "not a folder\n")],
        out: false,
        code: 1,
        stderr: &[
            "cannot create out/okd/",
            "pass a writable folder (--out DIR",
        ],
        ..C
    },
    // ---- split-plane (render only) ----
    not_offered!("split-plane --context", SplitPlane, "--context", "ctx-a"),
    not_offered!(
        "split-plane --kubeconfig",
        SplitPlane,
        "--kubeconfig",
        "kc.yaml"
    ),
    not_offered!("split-plane --prune", SplitPlane, "--prune"),
    not_offered!("split-plane --apply", SplitPlane, "--apply"),
    Case {
        name: "split-plane --filter matching nothing",
        program: SplitPlane,
        args: &["--filter", "gadget"],
        stderr: &[
            "--filter \"gadget\" matched no Score",
            "known Scores: \"Widget API\", \"Widget platform\"",
        ],
        ..C
    },
    Case {
        name: "split-plane --out is an existing file",
        program: SplitPlane,
        args: &["--out", "out"],
        files: &[("out", "not a folder\n")],
        out: false,
        code: 1,
        stderr: &[
            "cannot create output folder out/control-plane",
            "pass --out DIR with a writable folder",
        ],
        ..C
    },
    // ---- service-instance (its own clap flags) ----
    Case {
        name: "service-instance without flags",
        program: ServiceInstance,
        stderr: &[
            "required arguments were not provided",
            "--type <SERVICE_TYPE>",
        ],
        ..C
    },
    Case {
        name: "service-instance --type empty",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--type: invalid DNS-1123 label \"\"",
            "such as --type container",
        ],
        ..C
    },
    Case {
        name: "service-instance --type with capitals and a space",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "Post Gres",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--type: invalid DNS-1123 label \"Post Gres\"",
            "such as --type container",
        ],
        ..C
    },
    Case {
        name: "service-instance --spec not JSON",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--spec",
            "image=nginx",
        ],
        files: &[("tok", TOKEN)],
        stderr: &["--spec is not JSON", "give a JSON object"],
        ..C
    },
    Case {
        name: "service-instance --spec an array",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--spec",
            "[1]",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--spec must be a JSON object",
            "e.g. '{\"image\":\"nginx:1.27\"}'",
        ],
        ..C
    },
    Case {
        name: "service-instance --spec a string",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--spec",
            "\"nginx\"",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--spec must be a JSON object",
            "e.g. '{\"image\":\"nginx:1.27\"}'",
        ],
        ..C
    },
    Case {
        name: "service-instance --wait-s abc",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--wait-s",
            "abc",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "invalid value 'abc' for '--wait-s <WAIT_S>'",
            "try '--help'",
        ],
        ..C
    },
    Case {
        name: "service-instance --region EU",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--region",
            "EU",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--region: invalid region id \"EU\"",
            "such as --region eu-west",
        ],
        ..C
    },
    Case {
        name: "service-instance --region eu_west",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--region",
            "eu_west",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--region: invalid region id \"eu_west\"",
            "such as --region eu-west",
        ],
        ..C
    },
    Case {
        name: "service-instance --admin-token-file missing",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "missing",
            "--type",
            "container",
        ],
        stderr: &[
            "--admin-token-file: cannot read missing",
            "give --admin-token-file a readable file",
        ],
        ..C
    },
    Case {
        name: "service-instance --admin-token-file empty",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
        ],
        files: &[("tok", "")],
        stderr: &[
            "--admin-token-file: tok's first line is empty",
            "write the admin token on the file's first line",
        ],
        ..C
    },
    Case {
        name: "service-instance --control-plane http://",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "http://127.0.0.1:1",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--control-plane: control plane url: scheme \"http\"",
            "give the control plane as https://HOST:PORT",
        ],
        ..C
    },
    Case {
        name: "service-instance --control-plane not a URL",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "cp example",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--control-plane: control plane url",
            "give the control plane as https://HOST:PORT",
        ],
        ..C
    },
    Case {
        name: "service-instance --ca missing",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--ca",
            "ca.pem",
        ],
        files: &[("tok", TOKEN)],
        stderr: &["--ca: cannot read ca.pem", "the PEM file of the CA"],
        ..C
    },
    Case {
        name: "service-instance --ca not PEM",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--ca",
            "ca.pem",
        ],
        files: &[("tok", TOKEN), ("ca.pem", "not a certificate\n")],
        stderr: &["--ca: no CERTIFICATE block", "-----BEGIN CERTIFICATE-----"],
        ..C
    },
    Case {
        name: "service-instance --kubeconfig",
        program: ServiceInstance,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--type",
            "container",
            "--kubeconfig",
            "kc.yaml",
        ],
        files: &[("tok", TOKEN)],
        stderr: &["unexpected argument '--kubeconfig'", "try '--help'"],
        ..C
    },
    // ---- tenants (TenantAdminTopology: no topology flags; its own flags) ----
    regions!("tenants --regions EU", "EU", "invalid region id \"EU\""),
    regions!(
        "tenants --regions eu_west",
        "eu_west",
        "invalid region id \"eu_west\""
    ),
    regions!(
        "tenants --regions twice",
        "eu-west,eu-west",
        "region \"eu-west\" is given twice"
    ),
    regions!("tenants --regions empty", "", "invalid region id \"\""),
    regions!(
        "tenants --regions trailing comma",
        "eu-west,",
        "invalid region id \"\""
    ),
    not_offered!("tenants --prune", Tenants, "--prune"),
    not_offered!("tenants --force-conflicts", Tenants, "--force-conflicts"),
    not_offered!("tenants --kubeconfig", Tenants, "--kubeconfig", "kc.yaml"),
    not_offered!("tenants --apply", Tenants, "--apply"),
    Case {
        name: "tenants --plan without a control plane",
        program: Tenants,
        args: &["--plan"],
        stderr: &[
            "--plan compares the declaration",
            "add --control-plane https://HOST:PORT",
        ],
        ..C
    },
    Case {
        name: "tenants --yes without a control plane",
        program: Tenants,
        args: &["--yes"],
        stderr: &[
            "--yes applies the declaration",
            "add --control-plane https://HOST:PORT",
        ],
        ..C
    },
    Case {
        name: "tenants --control-plane without a token file",
        program: Tenants,
        args: &["--control-plane", "{cp}"],
        stderr: &[
            "--admin-token-file: the control plane",
            "give --admin-token-file FILE (or set HARMONY_ADMIN_TOKEN_FILE)",
        ],
        ..C
    },
    Case {
        name: "tenants HARMONY_ADMIN_TOKEN_FILE empty",
        program: Tenants,
        env: &[("HARMONY_CP_URL", "{cp}"), ("HARMONY_ADMIN_TOKEN_FILE", "")],
        stderr: &[
            "--admin-token-file: the control plane",
            "give --admin-token-file FILE (or set HARMONY_ADMIN_TOKEN_FILE)",
        ],
        ..C
    },
    Case {
        name: "tenants --plan with HARMONY_CP_URL empty",
        program: Tenants,
        args: &["--plan"],
        env: &[("HARMONY_CP_URL", ""), ("HARMONY_ADMIN_TOKEN_FILE", "tok")],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--plan compares the declaration",
            "no control plane given",
            "add --control-plane https://HOST:PORT",
        ],
        ..C
    },
    Case {
        name: "tenants --admin-token-file missing",
        program: Tenants,
        args: &["--control-plane", "{cp}", "--admin-token-file", "missing"],
        stderr: &[
            "--admin-token-file: cannot read missing",
            "give --admin-token-file a readable file",
        ],
        ..C
    },
    Case {
        name: "tenants --admin-token-file empty",
        program: Tenants,
        args: &["--control-plane", "{cp}", "--admin-token-file", "tok"],
        files: &[("tok", "")],
        stderr: &[
            "--admin-token-file: tok's first line is empty",
            "write the admin token on the file's first line",
        ],
        ..C
    },
    Case {
        name: "tenants --admin-token-file with a blank first line",
        program: Tenants,
        args: &["--control-plane", "{cp}", "--admin-token-file", "tok"],
        files: &[("tok", "  \nnot-a-real-admin-token\n")],
        stderr: &[
            "--admin-token-file: tok's first line is empty",
            "write the admin token on the file's first line",
        ],
        ..C
    },
    Case {
        name: "tenants --control-plane http://",
        program: Tenants,
        args: &[
            "--control-plane",
            "http://127.0.0.1:1",
            "--admin-token-file",
            "tok",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--control-plane: control plane url: scheme \"http\"",
            "give the control plane as https://HOST:PORT",
        ],
        ..C
    },
    Case {
        name: "tenants HARMONY_CP_URL ftp:// from the environment",
        program: Tenants,
        env: &[
            ("HARMONY_CP_URL", "ftp://127.0.0.1:1"),
            ("HARMONY_ADMIN_TOKEN_FILE", "tok"),
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--control-plane: control plane url: scheme \"ftp\"",
            "give the control plane as https://HOST:PORT",
        ],
        ..C
    },
    Case {
        name: "tenants --ca-file missing",
        program: Tenants,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--ca-file",
            "ca.pem",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--ca-file: cannot read ca.pem",
            "give --ca-file a readable file",
        ],
        ..C
    },
    Case {
        name: "tenants --ca-file not PEM",
        program: Tenants,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--ca-file",
            "ca.pem",
        ],
        files: &[("tok", TOKEN), ("ca.pem", "not a certificate\n")],
        stderr: &[
            "--ca-file: no CERTIFICATE block",
            "the CA that signs the control plane's certificate",
        ],
        ..C
    },
    Case {
        name: "tenants --filter matching nothing",
        program: Tenants,
        args: &[
            "--control-plane",
            "{cp}",
            "--admin-token-file",
            "tok",
            "--filter",
            "globex",
        ],
        files: &[("tok", TOKEN)],
        stderr: &[
            "--filter \"globex\" matched no Score",
            "known Scores: \"Tenant acme\"",
        ],
        ..C
    },
    Case {
        name: "tenants with a control plane, without --yes and no terminal",
        program: Tenants,
        args: &["--control-plane", "{cp}", "--admin-token-file", "tok"],
        files: &[("tok", TOKEN)],
        stderr: &["needs confirmation", "re-run with --yes"],
        ..C
    },
    Case {
        name: "tenants --output yaml",
        program: Tenants,
        args: &["--output", "yaml"],
        stderr: &["'--output <OUTPUT>'", "possible values: text, json"],
        ..C
    },
];

/// Markers of Rust debug formatting in a message meant for people.
const DEBUG_MARKERS: &[&str] = &["Some(", "Err(", "Ok(", "{ ", "'\""];

/// What a file or folder given as input looked like before the run.
#[derive(Debug, PartialEq)]
struct Snapshot {
    bytes: Option<Vec<u8>>,
    modified: SystemTime,
}

fn snapshot(root: &Path) -> BTreeMap<PathBuf, Snapshot> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the case's folder") {
            let path = entry.expect("a folder entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            let bytes = if meta.is_dir() {
                stack.push(path.clone());
                None
            } else {
                Some(std::fs::read(&path).expect("read an input file"))
            };
            let modified = meta.modified().expect("mtime");
            out.insert(
                path.strip_prefix(root).unwrap().to_path_buf(),
                Snapshot { bytes, modified },
            );
        }
    }
    out
}

/// Runs `case` in a fresh folder and returns what went wrong (empty when it behaved).
fn run_case(case: &Case, cp: &str, listener: &TcpListener) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path();
    for (path, content) in case.files {
        let full = cwd.join(path);
        if path.ends_with('/') {
            std::fs::create_dir_all(&full).expect("create an input folder");
        } else {
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).expect("create an input folder");
            }
            std::fs::write(&full, content.replace("{cp}", cp)).expect("write an input file");
        }
    }
    let before = snapshot(cwd);

    let mut args: Vec<String> = case.args.iter().map(|a| a.replace("{cp}", cp)).collect();
    if case.out && case.program.takes_out() {
        args.extend(["--out".to_string(), "out".to_string()]);
    }
    let mut cmd = Command::new(case.program.binary());
    cmd.args(&args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("HARMONY_") {
            cmd.env_remove(&key);
        }
    }
    // No kubeconfig of the machine running the tests: HOME points at a folder that does not
    // exist (inside the case's folder, so creating it would show as a write).
    cmd.env_remove("KUBECONFIG")
        .env("HOME", cwd.join("no-home"))
        .env("NO_COLOR", "1")
        .envs(case.env.iter().map(|(k, v)| (k, v.replace("{cp}", cp))));
    let child = cmd.spawn().expect("start the example program");
    let output = wait_bounded(child);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();

    let mut problems = Vec::new();
    let code = output.status.code();
    if code != Some(case.code) {
        problems.push(format!("exit status {code:?}, expected {}", case.code));
    }
    if code == Some(101) || stderr.contains("panicked") {
        problems.push("panicked".into());
    }
    for want in case.stderr {
        if !stderr.contains(want) {
            problems.push(format!("stderr lacks `{want}`"));
        }
    }
    for marker in DEBUG_MARKERS {
        if stderr.contains(marker) {
            problems.push(format!("stderr has debug formatting `{marker}`"));
        }
    }
    let after = snapshot(cwd);
    for (path, snap) in &after {
        match before.get(path) {
            None => problems.push(format!("wrote {}", path.display())),
            Some(old) if old != snap => problems.push(format!("changed input {}", path.display())),
            Some(_) => {}
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        problems.push(format!("removed input {}", path.display()));
    }
    let mut contacted = 0;
    while listener.accept().is_ok() {
        contacted += 1;
    }
    if contacted > 0 {
        problems.push(format!("made {contacted} connection(s) to {cp}"));
    }
    if !problems.is_empty() {
        problems.push(format!(
            "args: {args:?}\n--- stderr ---\n{stderr}--------------"
        ));
    }
    problems
}

/// Waits for the program; one that is still running after two minutes is waiting on something
/// a bad input should never reach (a network, a prompt), so it is killed and reported.
fn wait_bounded(mut child: std::process::Child) -> std::process::Output {
    // `None`: it still ran, and was killed; its output says how far it got.
    harmony_e2e::command::wait_or_kill(&mut child, Duration::from_secs(120))
        .expect("wait for the program");
    child
        .wait_with_output()
        .expect("collect the program's output")
}

#[test]
fn every_example_refuses_bad_input_naming_the_field_and_the_fix() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a listener");
    listener
        .set_nonblocking(true)
        .expect("non-blocking listener");
    let cp = format!("https://{}", listener.local_addr().unwrap());
    let run_gaps = std::env::var("HARMONY_BATTERY_GAPS").is_ok_and(|v| v == "1");

    let mut names = std::collections::BTreeSet::new();
    for case in CASES {
        assert!(
            names.insert(case.name),
            "case name {:?} is used twice",
            case.name
        );
    }

    let mut failures = Vec::new();
    let mut ran = 0;
    let mut gaps = Vec::new();
    for case in CASES {
        if let Some(gap) = case.gap
            && !run_gaps
        {
            gaps.push(format!("{}: {gap}", case.name));
            continue;
        }
        ran += 1;
        let problems = run_case(case, &cp, &listener);
        if !problems.is_empty() {
            failures.push(format!("[{}] {}", case.name, problems.join("\n  ")));
        }
    }
    let validators = validator_failures();
    println!(
        "bad-input battery: {ran} program case(s) run, {} validator case(s), {} known gap(s) skipped (HARMONY_BATTERY_GAPS=1 runs them)",
        VALIDATORS.len(),
        gaps.len()
    );
    for gap in &gaps {
        println!("  known gap: {gap}");
    }
    assert!(
        ran + VALIDATORS.len() >= 60,
        "the battery has {} case(s); it should have at least 60",
        ran + VALIDATORS.len()
    );
    failures.extend(validators);
    assert!(
        failures.is_empty(),
        "{} of {} case(s) misbehaved:\n{}",
        failures.len(),
        ran + VALIDATORS.len(),
        failures.join("\n\n")
    );
}

/// A `harmony_types` parser given a bad value: the kind of value its error must name, and a
/// phrase of what a valid value looks like (the fix).
struct Validator {
    parse: fn(&str) -> Result<(), InvalidValue>,
    input: &'static str,
    kind: &'static str,
    fix: &'static str,
}

fn label(s: &str) -> Result<(), InvalidValue> {
    Dns1123Label::parse(s).map(drop)
}
fn host(s: &str) -> Result<(), InvalidValue> {
    HostName::parse(s).map(drop)
}
fn mac(s: &str) -> Result<(), InvalidValue> {
    MacAddress::parse(s).map(drop)
}
fn ip(s: &str) -> Result<(), InvalidValue> {
    IpAddress::parse(s).map(drop)
}
fn cidr(s: &str) -> Result<(), InvalidValue> {
    Ipv4Cidr::parse(s).map(drop)
}
fn version(s: &str) -> Result<(), InvalidValue> {
    Version::parse(s).map(drop)
}
fn region(s: &str) -> Result<(), InvalidValue> {
    RegionId::parse(s).map(drop)
}
fn id(s: &str) -> Result<(), InvalidValue> {
    Id::parse(s).map(drop)
}
fn quantity(s: &str) -> Result<(), InvalidValue> {
    Quantity::parse(s).map(drop)
}
fn url(s: &str) -> Result<(), InvalidValue> {
    Url::parse(s).map(drop)
}

const LABEL_FIX: &str = "at most 63 lower-case letters, digits or '-'";

// One line per case reads as a table.
#[rustfmt::skip]
const VALIDATORS: &[Validator] = &[
    // Namespaces and cluster names (webapp's `webshop`, OKD's cluster name).
    Validator { parse: label, input: "", kind: "DNS-1123 label", fix: LABEL_FIX },
    Validator { parse: label, input: "WebShop", kind: "DNS-1123 label", fix: LABEL_FIX },
    Validator { parse: label, input: "-shop", kind: "DNS-1123 label", fix: LABEL_FIX },
    Validator { parse: label, input: "shop-", kind: "DNS-1123 label", fix: LABEL_FIX },
    Validator { parse: label, input: "web_shop", kind: "DNS-1123 label", fix: LABEL_FIX },
    Validator { parse: label, input: "a-label-of-sixty-four-characters-is-one-more-than-dns-allows-xyz", kind: "DNS-1123 label", fix: LABEL_FIX },
    // OKD host names and base domain.
    Validator { parse: host, input: "cp0..example.com", kind: "host name", fix: "e.g. \"cp0.okd.example.com\"" },
    Validator { parse: host, input: "cp_0.example.com", kind: "host name", fix: "e.g. \"cp0.okd.example.com\"" },
    // OKD machines' MACs.
    Validator { parse: mac, input: "52:54:00:zz:00:21", kind: "MAC address", fix: "such as 52:54:00:12:34:56" },
    Validator { parse: mac, input: "52:54:00:00:21", kind: "MAC address", fix: "such as 52:54:00:12:34:56" },
    Validator { parse: mac, input: "", kind: "MAC address", fix: "such as 52:54:00:12:34:56" },
    // OKD addresses and network.
    Validator { parse: ip, input: "192.168.50.256", kind: "IPv4 address", fix: "such as 192.168.10.5" },
    Validator { parse: ip, input: "192.168.50", kind: "IPv4 address", fix: "such as 192.168.10.5" },
    Validator { parse: cidr, input: "192.168.50.0", kind: "CIDR", fix: "such as 192.168.10.0/24" },
    Validator { parse: cidr, input: "192.168.50.0/33", kind: "CIDR", fix: "such as 192.168.10.0/24" },
    Validator { parse: cidr, input: "300.168.50.0/24", kind: "CIDR", fix: "such as 192.168.10.0/24" },
    // Versions.
    Validator { parse: version, input: "", kind: "version", fix: "1 to 3 dot-separated numbers" },
    Validator { parse: version, input: "seventeen", kind: "version", fix: "1 to 3 dot-separated numbers" },
    Validator { parse: version, input: "1.2.3.4", kind: "version", fix: "1 to 3 dot-separated numbers" },
    Validator { parse: version, input: "17-", kind: "version", fix: "1 to 3 dot-separated numbers" },
    // Sites and regions.
    Validator { parse: region, input: "EU-West", kind: "region id", fix: LABEL_FIX },
    Validator { parse: region, input: "eu west", kind: "region id", fix: LABEL_FIX },
    // Machine ids (OKD inventory, roles files).
    Validator { parse: id, input: "rack 14", kind: "id", fix: "1 to 128 characters of letters, digits" },
    Validator { parse: id, input: "", kind: "id", fix: "1 to 128 characters of letters, digits" },
    // Sizes (PostgreSQL storage, quotas).
    Validator { parse: quantity, input: "10GB", kind: "quantity", fix: "such as \"10Gi\"" },
    Validator { parse: quantity, input: "ten", kind: "quantity", fix: "such as \"10Gi\"" },
    // Control-plane URLs.
    Validator { parse: url, input: "cp.example.com", kind: "URL", fix: "such as https://cp.example.com:443/path" },
    Validator { parse: url, input: "https://", kind: "URL", fix: "such as https://cp.example.com:443/path" },
];

/// Each validator case that did not refuse its input naming the kind of value and the fix.
fn validator_failures() -> Vec<String> {
    let mut failures = Vec::new();
    for v in VALIDATORS {
        let message = match (v.parse)(v.input) {
            Ok(()) => {
                failures.push(format!("[{} {:?}] accepted", v.kind, v.input));
                continue;
            }
            Err(e) => e.to_string(),
        };
        let named = format!("invalid {} \"{}\"", v.kind, v.input);
        for want in [named.as_str(), v.fix] {
            if !message.contains(want) {
                failures.push(format!(
                    "[{} {:?}] `{message}` lacks `{want}`",
                    v.kind, v.input
                ));
            }
        }
        for marker in DEBUG_MARKERS {
            if message.contains(marker) {
                failures.push(format!(
                    "[{} {:?}] `{message}` has debug formatting `{marker}`",
                    v.kind, v.input
                ));
            }
        }
    }
    failures
}
