//! `model.json`: the manifest of a model folder (`docs/torch.md`, "The
//! model folder"). Unknown fields are errors, except inside each role's
//! `from` (where the role was recorded) and `recorded_with` (versions),
//! which are kept as they are.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::Deserialize;

use super::{FORMAT, ModelDirError, VERSION};

/// The manifest.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `batchlab-model`.
    pub format: String,
    /// Always 1.
    pub version: u64,
    /// The model's name: the trace's `workload`. Not a zoo workload's name.
    pub name: String,
    /// The hidden size the recorder saw most (informational: the cells'
    /// dims are constants).
    pub hidden: u32,
    /// Samples recorded.
    pub instances: u64,
    /// Trace nodes.
    pub nodes: u64,
    /// The roles: a cell each, in the trace's type order.
    pub roles: Vec<RoleEntry>,
    /// The folder's other files.
    pub files: Files,
    /// Versions of what recorded it.
    #[serde(default)]
    pub recorded_with: BTreeMap<String, String>,
}

/// One role.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleEntry {
    /// Role name.
    pub role: String,
    /// Its cell: `cells/<cell>.yaml`.
    pub cell: String,
    /// The trace type of its nodes.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Whether its nodes may share a batch.
    pub batchable: bool,
    /// Whether its nodes' outputs are summed into the training loss.
    pub loss: bool,
    /// Per port of the cell, the roles that feed it.
    pub ports: Vec<Vec<String>>,
    /// Where it was recorded (module or op, source line); kept as is.
    #[serde(default)]
    pub from: serde_json::Value,
}

/// File names inside the folder.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Files {
    /// The trace.
    pub trace: String,
    /// The weights.
    pub weights: String,
    /// The recording framework's outputs, if written.
    #[serde(default)]
    pub expected: Option<String>,
}

impl Manifest {
    /// Reads and checks a manifest: JSON errors with line, column and field;
    /// then the values (format, version, names, files).
    pub fn read(path: &Path) -> Result<Manifest, ModelDirError> {
        let file = path.display().to_string();
        let text = crate::io::read_to_string(path).map_err(|source| ModelDirError::Io {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// Parses manifest text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Manifest, ModelDirError> {
        let field = |field: &str, message: String| ModelDirError::Field {
            file: file.to_string(),
            field: field.to_string(),
            message,
        };
        // The format and version first, so another file or a future version
        // is named as such rather than failing on its first unknown field.
        #[derive(Deserialize)]
        struct Head {
            format: Option<serde_json::Value>,
            version: Option<serde_json::Value>,
        }
        let json_err = |e: serde_json::Error| ModelDirError::Json {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            message: crate::fieldpath::json_message(&e, text),
        };
        let head: Head = serde_json::from_str(text).map_err(json_err)?;
        if head.format.as_ref().and_then(|v| v.as_str()) != Some(FORMAT) {
            return Err(field(
                "format",
                format!(
                    "expected \"{FORMAT}\", found {}",
                    head.format.map_or("nothing".into(), |v| v.to_string())
                ),
            ));
        }
        if head.version.as_ref().and_then(|v| v.as_u64()) != Some(VERSION) {
            return Err(field(
                "version",
                format!(
                    "unsupported version {} (this build reads version {VERSION})",
                    head.version.map_or("nothing".into(), |v| v.to_string())
                ),
            ));
        }
        let m: Manifest = serde_json::from_str(text).map_err(json_err)?;
        if m.name.is_empty() {
            return Err(field("name", "empty".into()));
        }
        if crate::workloads::workload(&m.name).is_some() {
            return Err(field(
                "name",
                format!(
                    "`{}` is a built-in workload's name (`engine workloads`); record the model under another name",
                    m.name
                ),
            ));
        }
        if m.roles.is_empty() {
            return Err(field(
                "roles",
                "empty: a model has at least one role".into(),
            ));
        }
        // Names seen so far: a set, so a manifest of many roles is checked
        // in linear time; the first duplicate in role order is reported.
        let mut roles_seen = HashSet::with_capacity(m.roles.len());
        let mut types_seen = HashSet::with_capacity(m.roles.len());
        for (i, r) in m.roles.iter().enumerate() {
            for (what, v) in [("role", &r.role), ("cell", &r.cell)] {
                if v.is_empty()
                    || !v
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                {
                    return Err(field(
                        &format!("roles[{i}].{what}"),
                        format!("invalid name {v:?} (use ASCII letters, digits, `_`, `.`, `-`)"),
                    ));
                }
            }
            if !roles_seen.insert(r.role.as_str()) {
                return Err(field(
                    &format!("roles[{i}].role"),
                    format!("`{}` listed twice", r.role),
                ));
            }
            if !types_seen.insert(r.type_name.as_str()) {
                return Err(field(
                    &format!("roles[{i}].type"),
                    format!("`{}` is the type of an earlier role too", r.type_name),
                ));
            }
        }
        let files = [
            ("files.trace", Some(&m.files.trace)),
            ("files.weights", Some(&m.files.weights)),
            ("files.expected", m.files.expected.as_ref()),
        ];
        for (name, f) in files {
            if let Some(f) = f
                && (f.is_empty() || f.contains(['/', '\\']) || f.starts_with('.'))
            {
                return Err(field(
                    name,
                    format!("{f:?}: a file name inside the folder (no path, not hidden)"),
                ));
            }
        }
        Ok(m)
    }
}
