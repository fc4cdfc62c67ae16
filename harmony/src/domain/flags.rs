//! Which groups of [`RunContext`](super::RunContext) settings a topology reads, so a command line
//! offers exactly those: a Kubernetes program has no bare-metal flags, an OKD program no
//! `--kubeconfig`, and a flag a program would ignore can be refused instead of doing nothing.

/// The groups of flags, beyond the common ones, a program accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlagGroups {
    /// `--kubeconfig`, `--context`: the topology can apply to a Kubernetes cluster.
    pub cluster: bool,
    /// `--prune`, `--force-conflicts`: the topology applies objects it owns to a live API.
    pub ownership: bool,
    /// `--apply`, `--inventory`, `--roles`, `--discovery-timeout`: bare-metal services.
    pub bare_metal: bool,
}

impl FlagGroups {
    /// Only the common flags: a topology that renders files.
    pub const RENDER: Self = Self {
        cluster: false,
        ownership: false,
        bare_metal: false,
    };
    /// A topology that applies to the cluster the flags name.
    pub const KUBERNETES: Self = Self {
        cluster: true,
        ownership: true,
        bare_metal: false,
    };
    /// A bare-metal topology (dnsmasq, haproxy, HTTP boot, discovered hosts).
    pub const BARE_METAL: Self = Self {
        cluster: false,
        ownership: false,
        bare_metal: true,
    };

    /// The flags of either group: for a topology that is one of two, or made of two.
    pub const fn union(self, other: Self) -> Self {
        Self {
            cluster: self.cluster || other.cluster,
            ownership: self.ownership || other.ownership,
            bare_metal: self.bare_metal || other.bare_metal,
        }
    }
}

/// The flags a topology reads from the [`RunContext`](harmony::domain::RunContext), so
/// `harmony_cli::run` offers exactly those. Implement it for your own topology type:
///
/// ```
/// use harmony::domain::flags::{FlagGroups, TopologyFlags};
/// struct LabTopology;
/// impl TopologyFlags for LabTopology {
///     const FLAGS: FlagGroups = FlagGroups::KUBERNETES;
/// }
/// assert!(!LabTopology::FLAGS.bare_metal);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which command-line flags it reads",
    label = "harmony_cli offers flags per topology",
    note = "implement `harmony::domain::flags::TopologyFlags` (re-exported as `harmony_cli::TopologyFlags`) for `{Self}`: `const FLAGS: FlagGroups = FlagGroups::KUBERNETES;` (or RENDER, BARE_METAL, or a union)"
)]
pub trait TopologyFlags {
    /// The groups of flags the topology reads.
    const FLAGS: FlagGroups;
}

impl<T: TopologyFlags + ?Sized> TopologyFlags for &T {
    const FLAGS: FlagGroups = T::FLAGS;
}
