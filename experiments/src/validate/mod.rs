//! From the file to a runnable [`Spec`]: every check happens here, before any
//! run starts, and every error names the file, line and column of the value
//! at fault (or of its field, for a missing or misplaced one).
//!
//! Both the full grid and the quick grid are checked whichever mode is asked
//! for, so a typo in the `quick` block fails a full run too.

mod exclude;
mod fields;
mod grid;
mod traces;

pub use traces::MAX_NODES;

use std::path::Path;

use engine::cells::CellLibrary;
use serde_saphyr::{Location, Spanned};

use crate::config::Spec;
use crate::error::SpecError;
use crate::spec::{Kind, List, parse_raw};

/// Largest batch size a spec may ask for.
pub const MAX_BATCH: u64 = 4096;
/// Largest hidden size a spec may ask for.
pub const MAX_HIDDEN: u64 = 4096;
/// Most timed repetitions per run.
pub const MAX_REPEATS: u64 = 1000;
/// Most CPU threads a spec may ask for.
pub const MAX_THREADS: u64 = 256;
/// Most rounds of a `peers` or `replay` spec.
pub const MAX_ROUNDS: u64 = 100;
/// Largest FSM episode budget.
pub const MAX_EPISODES: u64 = 1_000_000;

/// Reads and checks a spec file (see [`parse_spec`]).
pub fn load_spec(path: &Path, quick: bool) -> Result<Spec, SpecError> {
    let file = path.display().to_string();
    let text = engine::io::read_to_string(path).map_err(|source| SpecError::Io {
        file: file.clone(),
        source,
    })?;
    parse_spec(&text, &file, quick)
}

/// Parses and checks spec YAML; `file` names it in errors. Returns the full
/// grid, or with `quick` the grid with the `quick` block's overrides.
pub fn parse_spec(text: &str, file: &str, quick: bool) -> Result<Spec, SpecError> {
    let raw = parse_raw(text, file)?;
    let cells = CellLibrary::builtin().map_err(|e| SpecError::Invalid {
        file: file.into(),
        line: 0,
        column: 0,
        field: "cells".into(),
        message: format!("the built-in cell library does not load: {e}"),
    })?;
    let cx = Cx {
        file,
        kind: raw.kind.value,
        cells,
    };
    fields::check_fields(&cx, &raw)?;
    let name = &raw.name;
    let ok_name = !name.value.is_empty()
        && !name.value.starts_with('.')
        && (name.value.chars()).all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !ok_name {
        let msg = "must be letters, digits, `.`, `_` or `-` (it names the output files)";
        return Err(cx.at(name.referenced, "name", msg.into()));
    }
    let mut full = grid::grid(&cx, &raw, false)?;
    let mut quick_grid = grid::grid(&cx, &raw, true)?;
    let excludes = exclude::excludes(&cx, &raw, &full)?;
    full.exclude = excludes.clone();
    quick_grid.exclude = excludes;
    Ok(Spec {
        kind: cx.kind,
        name: name.value.clone(),
        description: raw.description.trim().to_string(),
        file: file.to_string(),
        quick,
        grid: if quick { quick_grid } else { full },
    })
}

/// What the checks need: the file (for messages), the kind, the cells.
struct Cx<'a> {
    file: &'a str,
    kind: Kind,
    cells: CellLibrary,
}

impl Cx<'_> {
    fn at(&self, loc: Location, field: &str, message: String) -> SpecError {
        SpecError::Invalid {
            file: self.file.to_string(),
            line: loc.line(),
            column: loc.column(),
            field: field.to_string(),
            message,
        }
    }

    fn range(&self, v: &Spanned<u64>, field: &str, lo: u64, hi: u64) -> Result<usize, SpecError> {
        if v.value < lo || v.value > hi {
            let msg = format!("{} is out of range {lo}..={hi}", v.value);
            return Err(self.at(v.referenced, field, msg));
        }
        Ok(v.value as usize)
    }

    /// A non-empty list without duplicates whose every element passes `check`.
    fn list<T: Clone + PartialEq + std::fmt::Debug>(
        &self,
        l: &List<T>,
        field: &str,
        check: impl Fn(&T) -> Result<(), String>,
    ) -> Result<Vec<T>, SpecError> {
        if l.value.is_empty() {
            return Err(self.at(l.referenced, field, "must not be empty".into()));
        }
        let mut out: Vec<T> = Vec::with_capacity(l.value.len());
        for (i, item) in l.value.iter().enumerate() {
            let path = format!("{field}[{i}]");
            check(&item.value).map_err(|m| self.at(item.referenced, &path, m))?;
            if out.contains(&item.value) {
                let msg = format!("{:?} is listed twice", item.value);
                return Err(self.at(item.referenced, &path, msg));
            }
            out.push(item.value.clone());
        }
        Ok(out)
    }

    /// Checks one name of a string-valued grid field (`workloads`, `cells`,
    /// `policies`, `encodings`, `executors`, `devices`).
    fn check_name(&self, field: &str, v: &str) -> Result<(), String> {
        use crate::config::{EXECUTOR_NAMES, parse_executor, parse_policy, policy_names};
        let ok = match field {
            // The random DAG is a trace source of kind `policies` only: the
            // other kinds replay, train or time the zoo's workloads.
            "workloads" => {
                engine::workloads::workload(v).is_some()
                    || (self.kind == crate::spec::Kind::Policies && v == crate::config::RANDOM_DAG)
            }
            "cells" => self.cells.spec(v).is_some(),
            "policies" => parse_policy(v).is_some(),
            "encodings" => engine::sched::Encoding::parse(v).is_some(),
            "executors" => parse_executor(v).is_some(),
            "systems" => crate::peers::parse_system(v).is_some(),
            "devices" => {
                return engine::device::DeviceKind::parse(v)
                    .map(|_| ())
                    .map_err(|e| e.to_string());
            }
            _ => true,
        };
        if ok {
            return Ok(());
        }
        let expected = match field {
            "workloads" if self.kind == crate::spec::Kind::Policies => {
                format!("see `engine workloads`, or {}", crate::config::RANDOM_DAG)
            }
            "workloads" => "see `engine workloads`".to_string(),
            "cells" => "see `engine cells`".to_string(),
            "policies" => format!("expected one of {}", policy_names()),
            "encodings" => format!(
                "expected {}, or [all]",
                engine::sched::Encoding::ALL.map(|e| e.name()).join(", ")
            ),
            "systems" => format!("expected one of {}", crate::peers::SYSTEM_NAMES),
            _ => format!("expected one of {EXECUTOR_NAMES}"),
        };
        let what = field.trim_end_matches('s').replace("policie", "policy");
        Err(format!("unknown {what} {v:?} ({expected})"))
    }
}
