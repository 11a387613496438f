//! The sweep runner: expands a spec, skips runs that already have a
//! successful row in `<out>/<spec>.jsonl`, runs the rest (independent,
//! untimed runs in parallel with rayon; timed runs one at a time), appends a
//! row per finished run, and writes `<spec>.csv` and `<spec>.json`.

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

use crate::config::Spec;
use crate::error::{RunError, RunFailure, chain};
use crate::expand::{Run, expand};
use crate::output::{JsonlWriter, RowsLock, read_jsonl, write_csv, write_json};
use crate::progress::{Event, Observer, log_lines, terminal_bar};
use crate::provenance::{Machine, timestamp, workspace_revision};
use crate::rows::{Metrics, Provenance, ROW_SCHEMA, Row};
use crate::spec::Kind;

/// How to run a spec.
#[derive(Clone)]
pub struct RunOptions {
    /// Folder for `<spec>.jsonl`, `.csv`, `.json` (created if missing).
    pub out_dir: PathBuf,
    /// No progress bar even on a terminal.
    pub quiet: bool,
    /// Receives progress events; when `None` and `quiet` is off, an
    /// indicatif bar if stderr is a terminal, else a log line every 30 s.
    pub observer: Option<Observer>,
    /// Kind `peers`: the peers' Python environment (`None`: every peer's row
    /// says how to install it).
    pub peers: Option<crate::peers::PeersEnv>,
    /// Kind `peers`: how to start a batchlab worker process (`None`:
    /// batchlab's systems cannot run).
    pub worker: Option<crate::peers::WorkerCommand>,
    /// Re-measure every run, ignoring earlier rows (they stay in the
    /// JSON-lines file; the tables hold this sweep's rows only).
    pub fresh: bool,
}

impl RunOptions {
    /// Options writing to `out_dir`, with the default progress display.
    pub fn new(out_dir: impl Into<PathBuf>) -> RunOptions {
        RunOptions {
            out_dir: out_dir.into(),
            quiet: false,
            observer: None,
            peers: None,
            worker: None,
            fresh: false,
        }
    }
}

/// What a sweep did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReport {
    /// Spec name.
    pub spec: String,
    /// Runs in the expansion.
    pub total: usize,
    /// Runs skipped because they already had a successful row.
    pub skipped: usize,
    /// Runs executed now.
    pub ran: usize,
    /// Of those, how many had an error row from an earlier sweep.
    pub retried: usize,
    /// Of those, how many failed (error rows).
    pub failed: usize,
    /// Of those, how many were not measured because their trace is larger
    /// than the run's `max_nodes` (kind `policies`): they have no row, so a
    /// sweep run again records their traces again, and leaves them out again.
    pub filtered: usize,
    /// Warnings (dropped truncated rows...).
    pub warnings: Vec<String>,
    /// The row files.
    pub jsonl: PathBuf,
    /// The CSV table.
    pub csv: PathBuf,
    /// The JSON array.
    pub json: PathBuf,
}

/// What a run produced: metrics and raw samples, or why it failed.
pub(crate) type Outcome = Result<(Metrics, Vec<f64>), RunFailure>;

/// Receives finished runs (from any thread): writes the row, tells the observer.
pub(crate) struct Sink {
    spec: String,
    quick: bool,
    revision: String,
    machine: Machine,
    writer: Mutex<JsonlWriter>,
    observer: Option<Observer>,
    failed: Mutex<usize>,
    filtered: Mutex<usize>,
}

impl Sink {
    /// The spec's name.
    pub(crate) fn spec(&self) -> &str {
        &self.spec
    }

    /// Reports that `run` starts.
    pub(crate) fn started(&self, run: &Run) {
        self.notify(&Event::RunStarted(run));
    }

    /// Records that `run` is not measured (its trace is above the run's
    /// `max_nodes`): no row, but the run is done.
    pub(crate) fn filtered(&self, run: &Run) {
        *self.filtered.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.notify(&Event::RunFinished { run, error: None });
    }

    /// Records the outcome of `run` on `device`.
    pub(crate) fn finish(
        &self,
        run: &Run,
        device: &str,
        seed: Option<u64>,
        outcome: Outcome,
    ) -> Result<(), RunError> {
        let (metrics, samples, error) = match outcome {
            Ok((m, s)) => (Some(m), s, None),
            Err(e) => (None, Vec::new(), Some(chain(&e))),
        };
        let row = Row {
            provenance: Provenance {
                schema: ROW_SCHEMA,
                spec: self.spec.clone(),
                quick: self.quick,
                config_hash: run.hash.clone(),
                run: run.index,
                git_revision: self.revision.clone(),
                machine: self.machine.clone(),
                device: device.to_string(),
                seed,
                crate_version: env!("CARGO_PKG_VERSION").to_string(),
                timestamp: timestamp(),
            },
            config: run.config.clone(),
            metrics,
            error,
            samples,
        };
        self.writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .append(&row)?;
        if row.error.is_some() {
            *self.failed.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        }
        self.notify(&Event::RunFinished {
            run,
            error: row.error.as_deref(),
        });
        Ok(())
    }

    fn notify(&self, e: &Event) {
        if let Some(o) = &self.observer {
            o(e);
        }
    }
}

/// Runs `f`, turning a panic into a [`RunFailure::Panic`].
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, RunFailure>) -> Result<T, RunFailure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(RunFailure::Panic(msg))
    })
}

/// Runs `spec` into `opts.out_dir` (see the module docs).
pub fn run_spec(spec: &Spec, opts: &RunOptions) -> Result<RunReport, RunError> {
    let dir = &opts.out_dir;
    std::fs::create_dir_all(dir).map_err(|source| RunError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let jsonl = dir.join(format!("{}.jsonl", spec.name));
    // Held from before the rows are read (what is done) until the last is
    // written: a second run into these rows is refused, not measured twice.
    let _lock = RowsLock::acquire(&jsonl)?;
    let runs = expand(spec);
    let (mut old, warnings) = read_jsonl(&jsonl)?;
    // Rows before this sweep: with `fresh`, neither reused nor reported.
    let earlier = old.len();
    if opts.fresh {
        old.clear();
    }
    let status = |ok: bool| -> HashSet<String> {
        old.iter()
            .filter(|r| r["error"].is_null() == ok)
            .filter_map(|r| r["provenance"]["config_hash"].as_str().map(str::to_owned))
            .collect()
    };
    let (done, errored) = (status(true), status(false));
    let todo: Vec<Run> = runs
        .iter()
        .filter(|r| !done.contains(&r.hash))
        .cloned()
        .collect();
    let observer = opts.observer.clone().or_else(|| {
        (!opts.quiet).then(|| {
            if std::io::stderr().is_terminal() {
                terminal_bar()
            } else {
                log_lines(std::time::Duration::from_secs(30))
            }
        })
    });
    let sink = Sink {
        spec: spec.name.clone(),
        quick: spec.quick,
        revision: workspace_revision(),
        machine: Machine::probe(),
        writer: Mutex::new(JsonlWriter::open(&jsonl)?),
        observer,
        failed: Mutex::new(0),
        filtered: Mutex::new(0),
    };
    for w in &warnings {
        sink.notify(&Event::Warning(w));
    }
    sink.notify(&Event::Start {
        spec: &spec.name,
        total: runs.len(),
        todo: todo.len(),
    });
    match spec.kind {
        Kind::Policies => crate::run_policies::run(&todo, &sink)?,
        Kind::Training => crate::run_training::run(&todo, &sink)?,
        Kind::PlannerMemory => crate::run_planner::run_memory(&todo, &sink)?,
        Kind::PlannerCompile => crate::run_planner::run_compile(&todo, &sink)?,
        Kind::Replay => crate::run_replay::run(&todo, &sink)?,
        Kind::Peers => crate::peers::run(&todo, &sink, opts)?,
    }
    let (csv, json) = (
        dir.join(format!("{}.csv", spec.name)),
        dir.join(format!("{}.json", spec.name)),
    );
    let (mut all, _) = read_jsonl(&jsonl)?;
    if opts.fresh {
        all.drain(..earlier.min(all.len()));
    }
    let table = current_rows(&runs, all);
    write_csv(&csv, &table)?;
    write_json(&json, &table)?;
    sink.notify(&Event::Done);
    let failed = *sink.failed.lock().unwrap_or_else(|e| e.into_inner());
    let filtered = *sink.filtered.lock().unwrap_or_else(|e| e.into_inner());
    Ok(RunReport {
        spec: spec.name.clone(),
        total: runs.len(),
        skipped: runs.len() - todo.len(),
        ran: todo.len(),
        retried: todo.iter().filter(|r| errored.contains(&r.hash)).count(),
        failed,
        filtered,
        warnings,
        jsonl,
        csv,
        json,
    })
}

/// One row per run of the expansion, in expansion order: its last successful
/// row, else its last error row. Rows of configurations no longer in the spec
/// stay in the JSON-lines file only.
fn current_rows(runs: &[Run], all: Vec<Value>) -> Vec<Value> {
    let mut by_hash: HashMap<String, Value> = HashMap::new();
    for r in all {
        let Some(h) = r["provenance"]["config_hash"].as_str().map(str::to_owned) else {
            continue;
        };
        let keep_old = by_hash
            .get(&h)
            .is_some_and(|o| o["error"].is_null() && !r["error"].is_null());
        if !keep_old {
            by_hash.insert(h, r);
        }
    }
    runs.iter()
        .filter_map(|r| by_hash.remove(&r.hash))
        .collect()
}
