//! Measuring: runs the selected items' specs with `experiments::run_spec`
//! into the rows folder (resuming: runs with a successful row are skipped),
//! and records what it did in `<rows>/measure.json` for the report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use experiments::RunOptions;
use serde::{Deserialize, Serialize};

use crate::error::{ReproError, Result};
use crate::items::Item;
use crate::report::ctx::write;
use crate::specs::{LoadedSpec, is_cuda, set_device};

/// One spec's sweep.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SpecLog {
    /// Item name.
    pub item: String,
    /// Spec name.
    pub spec: String,
    /// Where the spec came from (`embedded:<path>` or a file).
    pub origin: String,
    /// Device of replay runs (`cpu` for the other kinds).
    pub device: String,
    /// Runs in the expansion.
    pub total: usize,
    /// Runs executed now.
    pub ran: usize,
    /// Runs skipped (already had a successful row).
    pub skipped: usize,
    /// Runs that failed now.
    pub failed: usize,
    /// Runs of this invocation left out, without a row, because their
    /// trace is above the spec's `max_nodes` (kind `policies`).
    #[serde(default)]
    pub filtered: usize,
    /// Wall seconds of the sweep (this invocation).
    pub seconds: f64,
    /// Wall seconds of every sweep whose rows are in the folder: this one
    /// plus the earlier invocations it resumed (reset by `--fresh`).
    #[serde(default)]
    pub total_seconds: f64,
    /// Invocations that measured this item's rows (1 after `--fresh`).
    #[serde(default)]
    pub invocations: u32,
}

impl SpecLog {
    /// [`SpecLog::total_seconds`], for logs written before it existed.
    pub fn all_seconds(&self) -> f64 {
        if self.invocations == 0 {
            self.seconds
        } else {
            self.total_seconds
        }
    }

    /// Whether this invocation measured runs and every one of them failed
    /// (runs left out by `max_nodes` were not measured).
    pub fn all_failed(&self) -> bool {
        let measured = self.ran - self.filtered.min(self.ran);
        measured > 0 && self.failed == measured
    }
}

/// An item that was not measured, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SkipLog {
    /// Item name.
    pub item: String,
    /// Why.
    pub reason: String,
}

/// `<rows>/measure.json`: what the measuring step did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MeasureLog {
    /// The command line.
    pub command: String,
    /// Quick mode.
    pub quick: bool,
    /// `--device`.
    pub device: String,
    /// UNIX time the measuring started.
    pub started: u64,
    /// Wall seconds of the whole measuring step (this invocation).
    pub seconds: f64,
    /// Sweeps, one per measured item (latest invocation's entry per item).
    pub specs: Vec<SpecLog>,
    /// Items not measured.
    pub skipped: Vec<SkipLog>,
}

impl MeasureLog {
    /// The log file in `rows`.
    pub fn path(rows: &Path) -> PathBuf {
        rows.join("measure.json")
    }

    /// Reads the log, `Ok(None)` when there is none.
    pub fn read(rows: &Path) -> Result<Option<MeasureLog>> {
        let path = Self::path(rows);
        match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| ReproError::Rows {
                    path,
                    message: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ReproError::io(path, e)),
        }
    }
}

/// How to measure.
#[derive(Clone, Debug)]
pub struct MeasureOptions {
    /// Rows folder.
    pub rows: PathBuf,
    /// Device for replay specs.
    pub device: String,
    /// No progress output at all (JSON mode).
    pub quiet: bool,
    /// The command line, for the log.
    pub command: String,
    /// Quick mode (for the log; the specs are already loaded accordingly).
    pub quick: bool,
    /// The peers' environment (item `peers`), or why there is none.
    pub peers: std::result::Result<experiments::peers::PeersEnv, String>,
    /// How to start batchlab worker processes (item `peers`).
    pub worker: Option<experiments::peers::WorkerCommand>,
    /// Re-measure every run instead of reusing the rows already there.
    pub fresh: bool,
}

/// Why a CUDA-only item is not measured on `device`, with what the
/// measuring machine says about CUDA (recorded in `measure.json`, so a later
/// redraw elsewhere repeats the measuring machine's state, not its own).
pub fn cuda_skip_reason(device: &str) -> String {
    let cuda = engine::device::probe()
        .into_iter()
        .find(|d| d.name.starts_with("cuda"))
        .map(|d| {
            if d.available {
                format!("{} is available", d.detail)
            } else {
                d.detail
            }
        })
        .unwrap_or_else(|| "no CUDA device".into());
    format!(
        "Needs a CUDA device and was not requested (`--device {device}`; run with `--device cuda`). \
         The measuring machine ({}): {cuda}.",
        experiments::provenance::Machine::probe().hostname
    )
}

/// Measures the `selected` items, whose specs are in `specs` (all loaded and
/// checked already).
pub fn measure(
    selected: &[&'static Item],
    specs: &[LoadedSpec],
    opts: &MeasureOptions,
) -> Result<MeasureLog> {
    let start = Instant::now();
    let mut log = MeasureLog {
        command: opts.command.clone(),
        quick: opts.quick,
        device: opts.device.clone(),
        started: experiments::provenance::timestamp(),
        ..MeasureLog::default()
    };
    for item in selected {
        if item.cuda_only && !is_cuda(&opts.device) {
            let reason = cuda_skip_reason(&opts.device);
            if !opts.quiet {
                eprintln!("paper-repro: {}: skipped: {reason}", item.name);
            }
            log.skipped.push(SkipLog {
                item: item.name.into(),
                reason,
            });
            continue;
        }
        if item.peers
            && let Err(why) = &opts.peers
        {
            let reason = format!("Needs the peers' Python environment: {why}.");
            if !opts.quiet {
                eprintln!("paper-repro: {}: skipped: {reason}", item.name);
            }
            log.skipped.push(SkipLog {
                item: item.name.into(),
                reason,
            });
            continue;
        }
        let Some(loaded) = specs.iter().find(|l| l.item.name == item.name) else {
            continue;
        };
        let mut spec = loaded.spec.clone();
        set_device(&mut spec, &opts.device);
        let runs = experiments::expand(&spec).len();
        if !opts.quiet {
            eprintln!(
                "paper-repro: {}: {runs} runs ({})",
                item.name, loaded.origin
            );
        }
        let t = Instant::now();
        let run_opts = RunOptions {
            out_dir: opts.rows.clone(),
            quiet: opts.quiet,
            observer: None,
            peers: opts.peers.clone().ok(),
            worker: opts.worker.clone(),
            fresh: opts.fresh,
        };
        let r = experiments::run_spec(&spec, &run_opts)?;
        let seconds = t.elapsed().as_secs_f64();
        if !opts.quiet {
            let left_out = if r.filtered > 0 {
                format!(", {} left out (trace above max_nodes)", r.filtered)
            } else {
                String::new()
            };
            eprintln!(
                "paper-repro: {}: {} ran, {} failed{left_out} in {seconds:.1} s",
                item.name, r.ran, r.failed
            );
            if r.skipped > 0 {
                eprintln!(
                    "paper-repro: {}: {} rows reused from {}; --fresh to re-measure",
                    item.name,
                    r.skipped,
                    opts.rows.display()
                );
            }
            for w in &r.warnings {
                eprintln!("paper-repro: {}: warning: {w}", item.name);
            }
        }
        log.specs.push(SpecLog {
            item: item.name.into(),
            spec: spec.name.clone(),
            origin: loaded.origin.clone(),
            device: if matches!(
                spec.kind,
                experiments::Kind::Replay | experiments::Kind::Peers
            ) {
                opts.device.clone()
            } else {
                "cpu".into()
            },
            total: r.total,
            ran: r.ran,
            skipped: r.skipped,
            failed: r.failed,
            filtered: r.filtered,
            seconds,
            total_seconds: seconds,
            invocations: 1,
        });
    }
    log.seconds = start.elapsed().as_secs_f64();
    // Keep earlier entries of items not measured now (e.g. `--only` runs),
    // and add the earlier sweeps' time to the items resumed now.
    if let Some(old) = MeasureLog::read(&opts.rows)? {
        if !opts.fresh {
            for s in &mut log.specs {
                if let Some(o) = old.specs.iter().find(|o| o.item == s.item) {
                    s.total_seconds += o.all_seconds();
                    s.invocations += o.invocations.max(1);
                }
            }
        }
        let measured = |n: &str| {
            log.specs.iter().any(|s| s.item == n) || log.skipped.iter().any(|s| s.item == n)
        };
        let keep: Vec<SpecLog> = old
            .specs
            .into_iter()
            .filter(|s| !measured(&s.item))
            .collect();
        let keep_skip: Vec<SkipLog> = old
            .skipped
            .into_iter()
            .filter(|s| !measured(&s.item))
            .collect();
        log.specs.splice(0..0, keep);
        log.skipped.splice(0..0, keep_skip);
    }
    let path = MeasureLog::path(&opts.rows);
    write(&path, serde_json::to_string_pretty(&log)?.as_bytes())?;
    Ok(log)
}
