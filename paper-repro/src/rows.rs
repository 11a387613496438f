//! Reading result rows back: `<rows>/<spec>.json` as written by
//! `experiments::run_spec` (one row per run of the spec's current expansion;
//! schema in `docs/experiments.md`). Rows are read as [`experiments::Row`],
//! the type they were written from, so a builder names the fields it uses in
//! Rust: a field renamed in `experiments` fails to compile here instead of
//! leaving a figure empty.
//!
//! A builder takes the successful rows of its kind ([`RowSet::replay`],
//! [`RowSet::peers`], …), each a [`Measured`]: the row with its config and
//! metrics of that kind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use experiments::Row;
use experiments::config::{
    PeersConfig, PlannerCompileConfig, PlannerMemoryConfig, PoliciesConfig, ReplayConfig,
    RunConfig, TrainingConfig,
};
use experiments::rows::{
    Metrics, PeerMetrics, PlannerCompileMetrics, PlannerMemoryMetrics, PolicyMetrics,
    ReplayMetrics, TrainingMetrics,
};

use crate::error::{ReproError, Result};

/// The rows of one spec.
#[derive(Clone, Debug)]
pub struct RowSet {
    /// Spec name.
    pub spec: String,
    /// The file read.
    pub path: PathBuf,
    /// All rows, successful and failed.
    pub rows: Vec<Row>,
}

/// A successful row of one kind: the row, and its config and metrics as
/// that kind's types.
#[derive(Debug)]
pub struct Measured<'a, C, M> {
    /// The whole row (provenance, samples).
    pub row: &'a Row,
    /// Its configuration.
    pub config: &'a C,
    /// Its measurements.
    pub metrics: &'a M,
}

// Derived `Clone`/`Copy` would require `C: Copy` and `M: Copy`; three
// references copy whatever they point to.
impl<C, M> Clone for Measured<'_, C, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C, M> Copy for Measured<'_, C, M> {}

/// A successful `policies` row.
pub type PolicyRow<'a> = Measured<'a, PoliciesConfig, PolicyMetrics>;
/// A successful `training` row.
pub type TrainingRow<'a> = Measured<'a, TrainingConfig, TrainingMetrics>;
/// A successful `planner-memory` row.
pub type PlannerMemoryRow<'a> = Measured<'a, PlannerMemoryConfig, PlannerMemoryMetrics>;
/// A successful `planner-compile` row.
pub type PlannerCompileRow<'a> = Measured<'a, PlannerCompileConfig, PlannerCompileMetrics>;
/// A successful `replay` row.
pub type ReplayRow<'a> = Measured<'a, ReplayConfig, ReplayMetrics>;
/// A successful `peers` row.
pub type PeersRow<'a> = Measured<'a, PeersConfig, PeerMetrics>;

/// Per kind: `Measured::of`, the row as that kind when it is one and
/// succeeded, and the `RowSet` method listing them.
macro_rules! kinds {
    ($($method:ident: $alias:ident = $config:ident / $metrics:ident, $name:literal;)*) => {
        $(
            impl<'a> $alias<'a> {
                /// `row` as this kind, when it is one and succeeded (no
                /// error, metrics present).
                pub fn of(row: &'a Row) -> Option<Self> {
                    match (&row.config, &row.metrics, &row.error) {
                        (RunConfig::$config(config), Some(Metrics::$metrics(metrics)), None) => {
                            Some(Measured { row, config, metrics })
                        }
                        _ => None,
                    }
                }
            }
        )*

        impl RowSet {
            $(
                #[doc = concat!("The successful rows of kind `", $name, "`, in file order.")]
                pub fn $method(&self) -> impl Iterator<Item = $alias<'_>> + Clone {
                    self.rows.iter().filter_map(<$alias>::of)
                }
            )*
        }
    };
}

kinds! {
    policies: PolicyRow = Policies / Policy, "policies";
    training: TrainingRow = Training / Training, "training";
    planner_memory: PlannerMemoryRow = PlannerMemory / PlannerMemory, "planner-memory";
    planner_compile: PlannerCompileRow = PlannerCompile / PlannerCompile, "planner-compile";
    replay: ReplayRow = Replay / Replay, "replay";
    peers: PeersRow = Peers / Peers, "peers";
}

impl RowSet {
    /// Reads `<dir>/<spec>.json`; `Ok(None)` when the file does not exist.
    pub fn load(dir: &Path, spec: &str) -> Result<Option<RowSet>> {
        let path = dir.join(format!("{spec}.json"));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ReproError::io(path, e)),
        };
        let rows: Vec<Row> = serde_json::from_str(&text).map_err(|e| ReproError::Rows {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(Some(RowSet {
            spec: spec.to_string(),
            path,
            rows,
        }))
    }

    /// Rows of runs that succeeded (no error, metrics present), any kind.
    pub fn ok(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| ok(r))
    }

    /// The error messages of failed runs.
    pub fn errors(&self) -> Vec<&str> {
        self.rows
            .iter()
            .filter_map(|r| r.error.as_deref())
            .collect()
    }

    /// Number of successful rows.
    pub fn ok_count(&self) -> usize {
        self.ok().count()
    }

    /// Distinct git revisions the rows were measured at.
    pub fn revisions(&self) -> BTreeSet<String> {
        self.rows
            .iter()
            .map(|r| r.provenance.git_revision.clone())
            .collect()
    }

    /// Whether the rows were measured in quick mode (the first row says).
    pub fn quick(&self) -> Option<bool> {
        self.rows.first().map(|r| r.provenance.quick)
    }

    /// The devices the successful rows were measured on
    /// (`provenance.device`), in first-seen order.
    pub fn devices(&self) -> Vec<String> {
        distinct(self.ok().map(|r| r.provenance.device.clone()))
    }
}

/// Whether `row` measured: no error, metrics present.
pub fn ok(row: &Row) -> bool {
    row.error.is_none() && row.metrics.is_some()
}

/// The distinct values of `items`, in first-seen order.
pub fn distinct<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// The distinct values of `items`, ascending.
pub fn ascending<T: Ord>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    items
        .into_iter()
        .collect::<BTreeSet<T>>()
        .into_iter()
        .collect()
}

/// Rows built in Rust for the report's unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use experiments::Row;
    use experiments::config::{ReplayConfig, RunConfig};
    use experiments::provenance::Machine;
    use experiments::rows::{Metrics, Provenance, ReplayMetrics};

    use super::RowSet;

    /// A successful replay row of `executor` at batch 8 on `device`, its
    /// throughput `instances_per_s`, its timed runs `samples`.
    pub fn replay(executor: &str, device: &str, instances_per_s: f64, samples: &[f64]) -> Row {
        Row {
            provenance: Provenance {
                schema: experiments::rows::ROW_SCHEMA,
                spec: "fig6".into(),
                quick: false,
                config_hash: "0".into(),
                run: 0,
                git_revision: "abc".into(),
                machine: Machine {
                    hostname: "vm".into(),
                    cpu: "cpu".into(),
                    cores: 2,
                },
                device: device.into(),
                seed: Some(101),
                crate_version: "0.1.0".into(),
                timestamp: 0,
            },
            config: RunConfig::Replay(ReplayConfig {
                workload: "lattice-gru".into(),
                batch: 8,
                hidden: 128,
                seed: 101,
                executor: executor.into(),
                device: device.into(),
                repeats: 1,
                rounds: samples.len().max(1),
                check: false,
                threads: None,
                fsm: None,
                layout_batch: None,
                train: false,
                eager: false,
                unfused: false,
            }),
            metrics: Some(Metrics::Replay(ReplayMetrics {
                nodes: 10,
                instances: 8,
                batches: 4,
                kernels: 4,
                bytes_gathered: 0,
                bytes_scattered: 0,
                construction_s: 0.0,
                scheduling_s: 0.0,
                execution_s: 0.0,
                total_s: 8.0 / instances_per_s,
                instances_per_s,
                max_rel_error: None,
                policy_misses: 0,
                policy: None,
                device_s: None,
                cpu_s: None,
                page_faults: None,
                threads: None,
                train: None,
            })),
            error: None,
            samples: samples.to_vec(),
        }
    }

    /// `rows` as the rows of spec `x`.
    pub fn set(rows: Vec<Row>) -> RowSet {
        RowSet {
            spec: "x".into(),
            path: "x.json".into(),
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{replay, set};
    use super::*;

    #[test]
    fn kinds_and_filters() {
        let mut failed = replay("cavs", "cpu", 1.0, &[]);
        failed.metrics = None;
        failed.error = Some("boom".into());
        let mut quick = replay("edbatch", "cuda", 2.0, &[0.5, 0.25]);
        quick.provenance.quick = true;
        let set = set(vec![quick, failed]);
        assert_eq!(set.ok_count(), 1);
        assert_eq!(set.errors(), ["boom"]);
        let ok: Vec<ReplayRow> = set.replay().collect();
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].config.executor, "edbatch");
        assert_eq!(ok[0].metrics.instances_per_s, 2.0);
        assert_eq!(set.peers().count(), 0, "replay rows are no peers rows");
        assert_eq!(set.devices(), ["cuda"]);
        assert_eq!(set.quick(), Some(true));
        assert_eq!(set.revisions().len(), 1);
    }

    #[test]
    fn distinct_keeps_first_seen_order_and_ascending_sorts() {
        assert_eq!(distinct([3, 1, 3, 2, 1]), [3, 1, 2]);
        assert_eq!(ascending([3, 1, 3, 2, 1]), [1, 2, 3]);
    }

    /// Every rows file committed under `results/` reads typed: the report
    /// regenerates from them (older revisions' rows lack fields added
    /// since, which read at their defaults).
    #[test]
    fn every_committed_rows_file_reads() {
        let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
        let mut files = 0;
        for run in std::fs::read_dir(&results).unwrap() {
            let rows = run.unwrap().path().join("rows");
            let Ok(entries) = std::fs::read_dir(&rows) else {
                continue;
            };
            for e in entries {
                let path = e.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                // measure.json is the measuring log, model.jsonl another schema.
                let Some(spec) = name.strip_suffix(".json") else {
                    continue;
                };
                if spec == "measure" {
                    continue;
                }
                let set = RowSet::load(&rows, spec)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                    .unwrap();
                assert!(!set.rows.is_empty(), "{}", path.display());
                files += 1;
            }
        }
        assert!(files > 0, "no rows under {}", results.display());
    }
}
