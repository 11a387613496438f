//! What the policy items (`policies`, `policies-exact`, `policies-hard`,
//! `policies-unseen`, `optimise-scaling`; `docs/results/policies.md` tables
//! (a)–(f)) share: a trace's identity and label, the training trace of its
//! FSM rows, and the rounding of their tables.

use experiments::config::{PoliciesConfig, RANDOM_DAG};

use crate::rows::{PolicyRow, RowSet, distinct};

/// A trace of a `policies` row: what its runs share.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceId {
    /// Workload (`random-dag` for the random DAG).
    pub workload: String,
    /// Batch size (a random DAG's instances).
    pub batch: usize,
    /// Hidden size (0 for a random DAG).
    pub hidden: usize,
    /// Record seed (a random DAG's generator seed).
    pub seed: u64,
    /// Data, when not the workload's default.
    pub data: Option<String>,
    /// Nodes of a random DAG.
    pub nodes: Option<usize>,
}

impl TraceId {
    /// The trace of a row.
    pub fn of(c: &PoliciesConfig) -> TraceId {
        TraceId {
            workload: c.workload.clone(),
            batch: c.batch,
            hidden: c.hidden,
            seed: c.seed,
            data: c.data.clone(),
            nodes: c.dag.map(|d| d.nodes),
        }
    }

    /// The trace the row's FSM was trained on (`experiments`' rule: the
    /// `fsm` rule's sizes and seed where it names them, else the row's own);
    /// `None` for rows without an FSM rule.
    pub fn training(c: &PoliciesConfig) -> Option<TraceId> {
        let rule = c.fsm.as_ref()?;
        let mut t = TraceId::of(c);
        t.seed = rule.seed.unwrap_or(t.seed);
        match &mut t.nodes {
            Some(n) => *n = rule.nodes.unwrap_or(*n),
            None => {
                t.batch = rule.batch.unwrap_or(t.batch);
                t.hidden = rule.hidden.unwrap_or(t.hidden);
            }
        }
        Some(t)
    }

    /// Whether it is a random DAG.
    pub fn is_dag(&self) -> bool {
        self.workload == RANDOM_DAG
    }

    /// `b32 s7`, `b1 synthetic s3`, or `3000 nodes s1` for a random DAG.
    pub fn sample(&self) -> String {
        match (self.nodes, &self.data) {
            (Some(n), _) => format!("{n} nodes s{}", self.seed),
            (None, Some(d)) => format!("b{} {d} s{}", self.batch, self.seed),
            (None, None) => format!("b{} s{}", self.batch, self.seed),
        }
    }

    /// `lattice-lstm b32`, or `random-dag n3000` (the seed left out: the
    /// tables that use it say it).
    pub fn graph(&self) -> String {
        match self.nodes {
            Some(n) => format!("{} n{n}", self.workload),
            None => format!("{} b{}", self.workload, self.batch),
        }
    }
}

/// The traces of `rows`, in row order.
pub fn traces(rows: &RowSet) -> Vec<TraceId> {
    distinct(rows.policies().map(|r| TraceId::of(r.config)))
}

/// The row of `policy` on trace `t`.
pub fn find<'a>(rows: &'a RowSet, t: &TraceId, policy: &str) -> Option<PolicyRow<'a>> {
    rows.policies()
        .find(|r| r.config.policy == policy && TraceId::of(r.config) == *t)
}

/// Any row of trace `t` (the per-trace fields, e.g. the best-known schedule,
/// are on every row of it).
pub fn any<'a>(rows: &'a RowSet, t: &TraceId) -> Option<PolicyRow<'a>> {
    rows.policies().find(|r| TraceId::of(r.config) == *t)
}

/// `x` rounded half away from zero to `digits` decimals, trailing zeros
/// dropped: 1.125 → `1.13`, 1.90 → `1.9`, 1.0 → `1` (how the tables of
/// `docs/results/policies.md` have always printed ratios).
pub fn round(x: f64, digits: i32) -> String {
    let scale = 10f64.powi(digits);
    let r = (x * scale).round() / scale;
    let s = format!("{r:.prec$}", prec = digits.max(0) as usize);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `a / b` rounded to `digits` decimals (empty when `b` is 0).
pub fn over(a: u64, b: u64, digits: i32) -> String {
    if b == 0 {
        String::new()
    } else {
        round(a as f64 / b as f64, digits)
    }
}

/// A policy name as a column header: `fsm-sort:reference` → `FSM-sort`.
pub fn column(policy: &str) -> String {
    let base = policy
        .strip_suffix(experiments::config::REFERENCE_SUFFIX)
        .unwrap_or(policy);
    match base.strip_prefix("fsm-") {
        Some(rest) => format!("FSM-{rest}"),
        None if base == "agenda-updated" => "agenda-upd".into(),
        None => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_half_away_from_zero_and_trimmed() {
        assert_eq!(round(1.125, 2), "1.13");
        assert_eq!(round(1.9, 2), "1.9");
        assert_eq!(round(1.0, 3), "1");
        assert_eq!(round(36.0 / 32.0, 3), "1.125");
        assert_eq!(round(0.029, 1), "0");
        assert_eq!(over(145, 135, 3), "1.074");
        assert_eq!(over(1, 0, 2), "");
        assert_eq!(column("fsm-sort-cond:reference"), "FSM-sort-cond");
        assert_eq!(column("agenda-updated"), "agenda-upd");
    }
}
