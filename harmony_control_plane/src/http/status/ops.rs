//! The status page's Ops column, collapsed: the set of ops most agents advertise is shown once
//! (a summary above the table), and a zone's cell shows only how its agent differs from it.
//! Every agent usually offers the same ops, so the column reads "common set" on every row
//! instead of a list that wraps each row to many lines.

use std::collections::BTreeMap;

/// The ops most agents advertise, for the summary above the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpsSummary {
    /// The most common set (sorted).
    pub common: Vec<String>,
    /// How many agents advertise exactly that set.
    pub sharing: usize,
    /// How many agents advertised ops at all.
    pub agents: usize,
}

/// One zone's Ops cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpsCell {
    /// Its agent never said (never connected): `—`.
    Unknown,
    /// Exactly the common set.
    Common,
    /// Not the common set: the ops it adds and those it lacks (each sorted).
    Differs {
        /// Advertised by this agent, not in the common set.
        adds: Vec<String>,
        /// In the common set, not advertised by this agent.
        lacks: Vec<String>,
    },
}

fn sorted(ops: &[String]) -> Vec<String> {
    let mut v = ops.to_vec();
    v.sort();
    v.dedup();
    v
}

/// The most common non-empty op set among `sets` (ties: the larger set, then the first in
/// order), or `None` when no agent advertised any op.
pub fn summarize<'a>(sets: impl IntoIterator<Item = &'a [String]>) -> Option<OpsSummary> {
    let mut counts: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for set in sets.into_iter().filter(|s| !s.is_empty()) {
        *counts.entry(sorted(set)).or_default() += 1;
    }
    let agents = counts.values().sum();
    counts
        .into_iter()
        .max_by(|(a, n), (b, m)| n.cmp(m).then(a.len().cmp(&b.len())).then(b.cmp(a)))
        .map(|(common, sharing)| OpsSummary {
            common,
            sharing,
            agents,
        })
}

/// The cell of a zone whose agent advertised `ops`, against the common set.
pub fn cell(ops: &[String], summary: Option<&OpsSummary>) -> OpsCell {
    if ops.is_empty() {
        return OpsCell::Unknown;
    }
    let ops = sorted(ops);
    let common = summary.map(|s| s.common.as_slice()).unwrap_or_default();
    if ops == common {
        return OpsCell::Common;
    }
    OpsCell::Differs {
        adds: ops
            .iter()
            .filter(|o| !common.contains(o))
            .cloned()
            .collect(),
        lacks: common
            .iter()
            .filter(|o| !ops.contains(o))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_common_set_is_the_most_frequent_and_cells_show_only_differences() {
        let full = ops(&["get_inventory", "apply_manifests", "delete"]);
        let same_other_order = ops(&["delete", "get_inventory", "apply_manifests"]);
        let less = ops(&["get_inventory", "apply_manifests", "probe"]);
        let sets = [full.clone(), same_other_order.clone(), less.clone(), vec![]];
        let summary = summarize(sets.iter().map(Vec::as_slice)).unwrap();
        assert_eq!(
            summary,
            OpsSummary {
                common: ops(&["apply_manifests", "delete", "get_inventory"]),
                sharing: 2,
                agents: 3,
            }
        );
        assert_eq!(cell(&same_other_order, Some(&summary)), OpsCell::Common);
        assert_eq!(cell(&[], Some(&summary)), OpsCell::Unknown);
        assert_eq!(
            cell(&less, Some(&summary)),
            OpsCell::Differs {
                adds: ops(&["probe"]),
                lacks: ops(&["delete"]),
            }
        );
        assert_eq!(summarize([[].as_slice()]), None);
    }

    #[test]
    fn a_tie_goes_to_the_larger_set() {
        let small = ops(&["a"]);
        let big = ops(&["a", "b"]);
        let summary = summarize([small.as_slice(), big.as_slice()]).unwrap();
        assert_eq!(summary.common, big);
        assert_eq!(summary.sharing, 1);
    }
}
