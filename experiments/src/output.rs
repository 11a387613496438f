//! Row files: `<spec>.jsonl` (appended and flushed after every run, the
//! sweep's memory for resuming), and at the end `<spec>.csv` and `<spec>.json`
//! (written atomically) with one row per run of the current expansion; and
//! the lock ([`RowsLock`]) one run holds on a row file while it measures.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::RunError;
use crate::rows::Row;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// An exclusive hold on a row file for one run: a second run into the
/// same rows would measure every run again, under mutual contention, and
/// append duplicate rows. It is `.<file>.lock` beside the file, held with
/// `flock` (released by the kernel if the process dies, so never stale) and
/// removed when dropped; a second run is refused, naming the holder's pid.
pub struct RowsLock {
    path: PathBuf,
    file: File,
}

impl RowsLock {
    /// Takes the lock of the row file `rows` (its folder must exist).
    pub fn acquire(rows: &Path) -> Result<RowsLock, RunError> {
        use std::os::unix::fs::MetadataExt;
        use std::os::unix::io::AsRawFd;
        let name = rows
            .file_name()
            .map_or_else(|| "rows".into(), |n| n.to_string_lossy().into_owned());
        let path = rows.with_file_name(format!(".{name}.lock"));
        loop {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(io_err(&path))?;
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                    return Err(io_err(&path)(err));
                }
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                return Err(RunError::Locked {
                    rows: rows.display().to_string(),
                    lock: path.display().to_string(),
                    holder: holder.trim().to_string(),
                });
            }
            // The holder before us may have removed the file between our
            // open and our lock: then we hold a lock nobody else can see.
            let same = match (file.metadata(), std::fs::metadata(&path)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if !same {
                continue;
            }
            file.set_len(0).map_err(io_err(&path))?;
            writeln!(file, "pid {}", std::process::id()).map_err(io_err(&path))?;
            return Ok(RowsLock { path, file });
        }
    }
}

impl Drop for RowsLock {
    fn drop(&mut self) {
        // Removed while still held, so no other run can lock the old file
        // after this one is gone (acquire checks it locked the current one).
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.sync_all();
    }
}

/// Reads the rows of a JSON-lines file (none if it does not exist). A line
/// that is not a JSON object — normally the last one, cut short by an
/// interrupted run — is dropped with a warning, and the file is rewritten
/// without it so that appending starts on a fresh line.
pub fn read_jsonl(path: &Path) -> Result<(Vec<Value>, Vec<String>), RunError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(io_err(path)(e)),
    };
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => rows.push(v),
            _ if i == last => warnings.push(format!(
                "{}:{}: dropped a truncated last line (an interrupted run); that run is redone",
                path.display(),
                i + 1
            )),
            _ => warnings.push(format!(
                "{}:{}: dropped a line that is not a JSON row",
                path.display(),
                i + 1
            )),
        }
    }
    let clean = !warnings.is_empty() || !(text.is_empty() || text.ends_with('\n'));
    if clean {
        let mut out = String::new();
        for r in &rows {
            out.push_str(&serde_json::to_string(r)?);
            out.push('\n');
        }
        engine::io::write_atomic(path, out.as_bytes()).map_err(io_err(path))?;
    }
    Ok((rows, warnings))
}

/// Appends rows to a JSON-lines file, one line each, flushed at once.
pub struct JsonlWriter {
    path: PathBuf,
    file: File,
}

impl JsonlWriter {
    /// Opens `path` for appending (creating it).
    pub fn open(path: &Path) -> Result<JsonlWriter, RunError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_err(path))?;
        Ok(JsonlWriter {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one row and flushes it to the OS.
    pub fn append(&mut self, row: &Row) -> Result<(), RunError> {
        let mut line = serde_json::to_string(row)?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(io_err(&self.path))
    }
}

/// Writes `rows` as a JSON array on one line (compact: committed runs keep
/// this file as their rows), atomically.
pub fn write_json(path: &Path, rows: &[Value]) -> Result<(), RunError> {
    let mut text = serde_json::to_string(rows)?;
    text.push('\n');
    engine::io::write_atomic(path, text.as_bytes()).map_err(io_err(path))
}

/// Writes `rows` as CSV, atomically: nested fields flattened to dotted
/// columns (`metrics.planned.copy_bytes`), lists joined with `;`, null as an
/// empty cell. Columns: provenance, config, metrics, error, samples, each
/// group in order of first appearance.
pub fn write_csv(path: &Path, rows: &[Value]) -> Result<(), RunError> {
    let flat: Vec<Vec<(String, String)>> = rows
        .iter()
        .map(|r| {
            let mut cells = Vec::new();
            flatten("", r, &mut cells);
            cells
        })
        .collect();
    let mut columns: Vec<String> = Vec::new();
    for cells in &flat {
        for (k, _) in cells {
            if !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    let group = |c: &str| {
        let top = c.split('.').next().unwrap_or(c);
        ["provenance", "config", "metrics", "error", "samples"]
            .iter()
            .position(|g| *g == top)
            .unwrap_or(5)
    };
    columns.sort_by_key(|c| group(c));
    let table: Vec<Vec<String>> = flat
        .iter()
        .map(|cells| {
            columns
                .iter()
                .map(|c| {
                    cells
                        .iter()
                        .find(|(k, _)| k == c)
                        .map_or(String::new(), |(_, v)| v.clone())
                })
                .collect()
        })
        .collect();
    let out = csv_text(&columns, &table).map_err(|e| RunError::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    engine::io::write_atomic(path, out.as_bytes()).map_err(io_err(path))
}

/// batchlab's one CSV writer (the `csv` crate, RFC 4180 quoting: a cell with
/// a comma, quote, CR or LF is quoted, quotes doubled; `\n` line ends):
/// `header` then `rows`, each as long as the header. Used for the row tables
/// here and for paper-repro's report tables.
pub fn csv_text<S: AsRef<str>>(header: &[S], rows: &[Vec<S>]) -> Result<String, csv::Error> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(header.iter().map(AsRef::as_ref))?;
    for r in rows {
        w.write_record(r.iter().map(AsRef::as_ref))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    // Every cell was a &str, so the bytes are UTF-8.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        Value::Null if prefix == "metrics" => {}
        other => out.push((prefix.to_string(), scalar(other))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(";"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_flattens_nested_fields_and_quotes() {
        let rows = vec![
            serde_json::json!({"config": {"a": 1}, "metrics": {"m": {"x": 2}}, "error": null, "samples": [0.5, 0.25]}),
            serde_json::json!({"config": {"a": 2}, "metrics": null, "error": "bad, \"very\"", "samples": []}),
        ];
        let dir = std::env::temp_dir().join(format!("batchlab-exp-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.csv");
        write_csv(&p, &rows).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            "config.a,metrics.m.x,error,samples\n1,2,,0.5;0.25\n2,,\"bad, \"\"very\"\"\",\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_text_quotes_what_needs_it_and_round_trips() {
        let rows = vec![
            vec!["1|2", "", "line\nbreak"],
            vec!["x, y", "say \"hi\"", "cr\rhere"],
        ];
        let t = csv_text(&["a", "b", "c"], &rows).unwrap();
        assert_eq!(
            t,
            "a,b,c\n1|2,,\"line\nbreak\"\n\"x, y\",\"say \"\"hi\"\"\",\"cr\rhere\"\n"
        );
        let mut r = csv::Reader::from_reader(t.as_bytes());
        let back: Vec<Vec<String>> = r
            .records()
            .map(|rec| rec.unwrap().iter().map(str::to_string).collect())
            .collect();
        assert_eq!(back[1][1], "say \"hi\"");
        assert_eq!(back[0][2], "line\nbreak");
    }

    /// Two paper-repro runs into one rows folder both measured: every run
    /// twice, under mutual contention, with duplicate rows. The second is
    /// refused, naming the holder; the lock goes with the first.
    #[test]
    fn second_run_into_the_same_rows_is_refused_not_measured_twice() {
        let dir = std::env::temp_dir().join(format!("batchlab-rows-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rows = dir.join("fig.jsonl");
        let first = RowsLock::acquire(&rows).unwrap();
        let lock = dir.join(".fig.jsonl.lock");
        assert!(lock.exists());
        let e = RowsLock::acquire(&rows)
            .err()
            .expect("a second holder is refused");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("another run (pid {})", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains(&lock.display().to_string()), "{msg}");
        // Another spec's rows in the same folder are not held.
        drop(RowsLock::acquire(&dir.join("other.jsonl")).unwrap());
        drop(first);
        assert!(!lock.exists(), "the lock file goes with its holder");
        drop(RowsLock::acquire(&rows).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn jsonl_file(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!(
            "batchlab-jsonl-{name}-{}.jsonl",
            std::process::id()
        ));
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The resume test once cut its row file one byte before a line end: the
    /// last row was whole but had lost its newline. Such a row is kept (it
    /// is a complete run), and the file gets its newline back so that the
    /// next append starts a new line.
    #[test]
    fn a_whole_last_row_without_its_newline_is_kept() {
        let p = jsonl_file("whole", "{\"a\":1}\n{\"a\":2}");
        let (rows, warnings) = read_jsonl(&p).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_cut_last_row_is_dropped_with_a_warning() {
        let p = jsonl_file("cut", "{\"a\":1}\n{\"a\":");
        let (rows, warnings) = read_jsonl(&p).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains(":2: dropped a truncated last line"),
            "{warnings:?}"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":1}\n");
        std::fs::remove_file(&p).unwrap();
    }
}
