//! The `harmony_cli` flags of each group, to explain a refusal: a flag the program's topology does
//! not read is an unknown argument to clap, but the user should hear which group it belongs to.

/// The flags of each group that [`FlagGroups`](harmony::domain::flags::FlagGroups) switches on.
const GROUPS: [(&str, &[&str]); 3] = [
    ("a Kubernetes cluster flag", &["--kubeconfig", "--context"]),
    (
        "a flag for topologies that apply live objects",
        &[
            "--prune",
            "--force-conflicts",
            "--no-wait",
            "--wait-timeout",
            "--no-skip",
        ],
    ),
    (
        "a bare-metal flag",
        &[
            "--apply",
            "--inventory",
            "--roles",
            "--discovery-timeout",
            "--assign",
            "--root-device",
            "--bmc",
            "--bmc-ca-file",
            "--bmc-insecure",
        ],
    ),
];

/// The group `flag` (e.g. `--apply`) belongs to, when it is not a common flag.
pub(crate) fn group_of(flag: &str) -> Option<&'static str> {
    GROUPS
        .iter()
        .find(|(_, flags)| flags.contains(&flag))
        .map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::group_of;

    #[test]
    fn each_group_flag_is_named_and_common_flags_are_not() {
        assert_eq!(group_of("--apply"), Some("a bare-metal flag"));
        assert_eq!(group_of("--context"), Some("a Kubernetes cluster flag"));
        assert_eq!(group_of("--plan"), None);
    }
}
