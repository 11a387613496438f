//! Typed errors: a spec that cannot be run ([`SpecError`], always before any
//! run starts), a sweep that cannot go on ([`RunError`]: output files), and a
//! single run that failed ([`RunFailure`], which becomes an error row).

use thiserror::Error;

/// Why a spec cannot be run. Every variant names the file; the located ones
/// also give line and column (1-based; 0 when unknown).
#[derive(Debug, Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// YAML syntax or shape: unknown field, wrong type, missing `kind`/`name`.
    #[error("{file}:{line}:{column}: {message}")]
    Yaml {
        /// The file.
        file: String,
        /// Line.
        line: u64,
        /// Column.
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// A value that parses but cannot be run: unknown workload, batch 0, a
    /// field the kind does not use, a hidden size a cell cannot take...
    #[error("{file}:{line}:{column}: {field}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// Line of the offending value (or of its field).
        line: u64,
        /// Column.
        column: u64,
        /// Field path, e.g. `workloads[2]` or `quick.batches[0]`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Why a sweep stopped (a single run's failure never stops it).
#[derive(Debug, Error)]
pub enum RunError {
    /// Output folder or file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Serialising a row failed.
    #[error("serialising a row: {0}")]
    Json(#[from] serde_json::Error),
    /// Another run is writing these rows.
    #[error(
        "{rows}: another run ({holder}) is measuring into these rows (it holds {lock}); wait for it to finish, or give this run another --out (or --rows)"
    )]
    Locked {
        /// The row file.
        rows: String,
        /// Its lock file.
        lock: String,
        /// What the lock file says of its holder (`pid N`).
        holder: String,
    },
}

/// Why one run failed; written into its row's `error` field with its cause
/// chain.
#[derive(Debug, Error)]
pub enum RunFailure {
    /// Recording the trace failed.
    #[error("recording the trace: {0}")]
    Record(#[from] engine::workloads::RecordError),
    /// A cell failed to instantiate.
    #[error(transparent)]
    Cell(#[from] engine::cells::CellError),
    /// A policy failed to run.
    #[error(transparent)]
    Policy(#[from] engine::sched::PolicyError),
    /// A policy file was unusable.
    #[error(transparent)]
    PolicyFile(#[from] engine::sched::PolicyFileError),
    /// The planner failed.
    #[error("planning: {0}")]
    Plan(#[from] planner::PlanError),
    /// The replay failed.
    #[error("replay: {0}")]
    Replay(#[from] engine::error::ReplayError),
    /// The device cannot be used.
    #[error(transparent)]
    Device(#[from] engine::device::DeviceError),
    /// The random DAG generator refused its parameters.
    #[error("random DAG: {0}")]
    Dag(#[from] search::synth::DagError),
    /// The exact search could not run (a graph above its node limit).
    #[error("exact optimum: {0}")]
    Optimal(#[from] search::optimal::OptimalError),
    /// The offline optimiser failed.
    #[error("optimiser: {0}")]
    Optimise(#[from] search::optimise::OptimiseError),
    /// A schedule did not replay (a bug of the search that made it).
    #[error("invalid schedule: {0}")]
    Schedule(#[from] engine::sched::ScheduleError),
    /// A failure already rendered as text: one shared from a cached step
    /// (the FSM of a workload, the layouts of a hidden size), with its chain.
    #[error("{0}")]
    Message(String),
    /// The run panicked (a bug; reported as a row, never an abort).
    #[error("panic: {0}")]
    Panic(String),
}

/// `err` and its `source()` chain, joined with `: ` (each cause once).
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = e.source();
    }
    out
}
