//! Reading result rows back: `<rows>/<spec>.json` as written by
//! `experiments::run_spec` (one row per run of the spec's current expansion;
//! schema in `docs/experiments.md`). Rows are kept as JSON values and read
//! by dotted paths, so the report only depends on the fields it uses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{ReproError, Result};

/// The rows of one spec.
#[derive(Clone, Debug)]
pub struct RowSet {
    /// Spec name.
    pub spec: String,
    /// The file read.
    pub path: PathBuf,
    /// All rows, successful and failed.
    pub rows: Vec<Value>,
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
        let value: Value = serde_json::from_str(&text).map_err(|e| ReproError::Rows {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let Value::Array(rows) = value else {
            return Err(ReproError::Rows {
                path,
                message: "expected a JSON array of rows".into(),
            });
        };
        Ok(Some(RowSet {
            spec: spec.to_string(),
            path,
            rows,
        }))
    }

    /// Rows of runs that succeeded (no error, metrics present).
    pub fn ok(&self) -> impl Iterator<Item = &Value> {
        self.rows
            .iter()
            .filter(|r| r["error"].is_null() && r["metrics"].is_object())
    }

    /// The error messages of failed runs.
    pub fn errors(&self) -> Vec<&str> {
        self.rows
            .iter()
            .filter_map(|r| r["error"].as_str())
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
            .filter_map(|r| text(r, "provenance.git_revision"))
            .map(str::to_string)
            .collect()
    }

    /// Whether the rows were measured in quick mode (the first row says).
    pub fn quick(&self) -> Option<bool> {
        self.rows
            .first()
            .and_then(|r| r["provenance"]["quick"].as_bool())
    }

    /// Distinct values of the string field `path` over successful rows, in
    /// first-seen order.
    pub fn distinct(&self, path: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.ok() {
            if let Some(s) = field_string(r, path)
                && !out.contains(&s)
            {
                out.push(s);
            }
        }
        out
    }

    /// Distinct values of the integer field `path` over successful rows,
    /// ascending.
    pub fn distinct_u64(&self, path: &str) -> Vec<u64> {
        let set: BTreeSet<u64> = self.ok().filter_map(|r| uint(r, path)).collect();
        set.into_iter().collect()
    }

    /// The first successful row whose fields equal `want` (path, value).
    pub fn find(&self, want: &[(&str, &str)]) -> Option<&Value> {
        self.ok().find(|r| {
            want.iter()
                .all(|(p, v)| field_string(r, p).as_deref() == Some(*v))
        })
    }
}

/// The value at a dotted path (`metrics.planned.copy_bytes`).
pub fn at<'a>(row: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(row, |v, k| &v[k])
}

/// A string field.
pub fn text<'a>(row: &'a Value, path: &str) -> Option<&'a str> {
    at(row, path).as_str()
}

/// A number field.
pub fn num(row: &Value, path: &str) -> Option<f64> {
    at(row, path).as_f64()
}

/// An unsigned integer field.
pub fn uint(row: &Value, path: &str) -> Option<u64> {
    at(row, path).as_u64()
}

/// A string, integer or boolean field as text (for matching).
pub fn field_string(row: &Value, path: &str) -> Option<String> {
    match at(row, path) {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_and_filters() {
        let set = RowSet {
            spec: "x".into(),
            path: "x.json".into(),
            rows: vec![
                json!({"config": {"w": "a", "b": 8}, "metrics": {"r": 1.5}, "error": null,
                       "provenance": {"git_revision": "abc", "quick": true}}),
                json!({"config": {"w": "b", "b": 8}, "metrics": null, "error": "boom",
                       "provenance": {"git_revision": "abc"}}),
            ],
        };
        assert_eq!(set.ok_count(), 1);
        assert_eq!(set.errors(), ["boom"]);
        assert_eq!(set.distinct("config.w"), ["a"]);
        assert_eq!(set.distinct_u64("config.b"), [8]);
        let r = set.find(&[("config.w", "a"), ("config.b", "8")]).unwrap();
        assert_eq!(num(r, "metrics.r"), Some(1.5));
        assert_eq!(set.quick(), Some(true));
        assert_eq!(set.revisions().len(), 1);
    }
}
