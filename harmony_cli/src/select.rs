use harmony::domain::{Score, Topology};

/// Indices of Scores whose name contains any filter (case-insensitive), or an error listing
/// each filter that matched nothing together with the known names.
pub(crate) fn filter<T: Topology>(
    scores: &[Box<dyn Score<T>>],
    filters: &[String],
) -> Result<Vec<usize>, String> {
    if filters.is_empty() {
        return Ok((0..scores.len()).collect());
    }
    let names: Vec<String> = scores.iter().map(|s| s.name()).collect();
    let matches = |f: &str, n: &str| n.to_lowercase().contains(&f.to_lowercase());
    let unmatched: Vec<&String> = filters
        .iter()
        .filter(|f| !names.iter().any(|n| matches(f, n)))
        .collect();
    if !unmatched.is_empty() {
        return Err(format!(
            "--filter {} matched no Score; known Scores: {}",
            unmatched
                .iter()
                .map(|f| format!("\"{f}\""))
                .collect::<Vec<_>>()
                .join(", "),
            names
                .iter()
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok((0..names.len())
        .filter(|&i| filters.iter().any(|f| matches(f, &names[i])))
        .collect())
}

/// Asks the operator which Scores to run, all preselected. `None` when cancelled.
pub(crate) fn prompt<T: Topology>(
    scores: &[Box<dyn Score<T>>],
) -> Result<Option<Vec<usize>>, String> {
    let names: Vec<String> = scores.iter().map(|s| s.name()).collect();
    let all: Vec<usize> = (0..names.len()).collect();
    match inquire::MultiSelect::new("Scores to run (space toggles, enter runs):", names.clone())
        .with_default(&all)
        .raw_prompt()
    {
        Ok(chosen) => Ok(Some(chosen.into_iter().map(|o| o.index).collect())),
        Err(
            inquire::InquireError::OperationCanceled | inquire::InquireError::OperationInterrupted,
        ) => Ok(None),
        Err(e) => Err(format!(
            "cannot ask which Scores to run: {e}; pass --filter NAME or --yes"
        )),
    }
}

/// Asks for confirmation before changing infrastructure. `Ok(false)` when declined.
pub(crate) fn confirm(question: &str) -> Result<bool, String> {
    match inquire::Confirm::new(question).with_default(false).prompt() {
        Ok(answer) => Ok(answer),
        Err(
            inquire::InquireError::OperationCanceled | inquire::InquireError::OperationInterrupted,
        ) => Ok(false),
        Err(e) => Err(format!(
            "cannot ask for confirmation: {e}; pass --yes to confirm"
        )),
    }
}
