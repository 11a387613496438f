//! The machine-readable summary (`--json` on stdout, and `<out>/summary.json`
//! after reporting); fields documented in `docs/paper-repro.md`.

use serde::Serialize;

use crate::measure::{MeasureLog, SpecLog};
use crate::report::Reported;
use crate::report::section::Status;

/// Version of the summary format.
pub const SUMMARY_SCHEMA: u32 = 1;

/// What one invocation produced.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// [`SUMMARY_SCHEMA`].
    pub schema: u32,
    /// `run`, `measure` or `report`.
    pub mode: String,
    /// The command line.
    pub command: String,
    /// Quick mode (as asked for `run`/`measure`; as the rows say for `report`).
    pub quick: bool,
    /// `--device`.
    pub device: String,
    /// Output folder.
    pub out: String,
    /// Rows folder.
    pub rows: String,
    /// `REPORT.md`, when reported.
    pub report: Option<String>,
    /// Revision(s) of the rows (or of the source tree).
    pub revision: String,
    /// Seconds spent measuring (this invocation), when measured.
    pub measure_seconds: Option<f64>,
    /// Seconds spent reporting, when reported.
    pub report_seconds: Option<f64>,
    /// One entry per selected item.
    pub items: Vec<ItemSummary>,
}

impl Summary {
    /// Items whose measuring step ran runs in this invocation and saw every
    /// one fail (`vpps on --device cuda` without CUDA): the invocation then
    /// exits non-zero, after writing what it could.
    pub fn failed_steps(&self) -> Vec<String> {
        self.items
            .iter()
            .filter_map(|i| {
                let m = i.measure.as_ref().filter(|m| m.all_failed())?;
                let why = i
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                Some(format!("{}: all {} runs failed{why}", i.name, m.ran))
            })
            .collect()
    }
}

/// One item.
#[derive(Clone, Debug, Serialize)]
pub struct ItemSummary {
    /// Item name.
    pub name: String,
    /// Spec name.
    pub spec: String,
    /// `ok`, `partial`, `skipped`, `no-data` (report), or `measured` (measure only).
    pub status: String,
    /// Why it was skipped or has no data.
    pub reason: Option<String>,
    /// Rows: total, successful, failed (`null` when not reported).
    pub rows: Option<RowCounts>,
    /// Files written in the output folder (figures, CSVs), relative to it.
    pub files: Vec<String>,
    /// This invocation's sweep, when measured.
    pub measure: Option<SpecLog>,
}

/// Row counts of one item.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RowCounts {
    /// Rows read.
    pub total: usize,
    /// Successful rows.
    pub ok: usize,
    /// Failed rows.
    pub failed: usize,
}

impl ItemSummary {
    /// From a measured sweep or skip (measure mode).
    pub fn measured(name: &str, spec: &str, log: &MeasureLog) -> ItemSummary {
        let m = log.specs.iter().find(|s| s.item == name).cloned();
        let skip = log.skipped.iter().find(|s| s.item == name);
        ItemSummary {
            name: name.into(),
            spec: spec.into(),
            status: if skip.is_some() {
                "skipped"
            } else {
                "measured"
            }
            .into(),
            reason: skip.map(|s| s.reason.clone()),
            rows: None,
            files: Vec::new(),
            measure: m,
        }
    }
}

/// The item summaries of a report (with this invocation's sweeps, if any).
pub fn from_report(rep: &Reported, log: Option<&MeasureLog>) -> Vec<ItemSummary> {
    rep.sections
        .iter()
        .map(|s| ItemSummary {
            name: s.item.name.into(),
            spec: s.item.spec.into(),
            status: match s.status {
                Status::Ok => "ok",
                Status::Partial => "partial",
                Status::Skipped => "skipped",
                Status::NoData => "no-data",
            }
            .into(),
            reason: s.reason.clone(),
            rows: Some(RowCounts {
                total: s.rows_total,
                ok: s.rows_ok,
                failed: s.rows_total - s.rows_ok,
            }),
            files: s.files.clone(),
            measure: log.and_then(|l| l.specs.iter().find(|m| m.item == s.item.name).cloned()),
        })
        .collect()
}
