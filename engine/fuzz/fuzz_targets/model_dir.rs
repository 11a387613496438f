//! A whole model folder → `ModelDir::open` (the folder checked whole: the
//! cells against the roles that read them, the manifest against the trace,
//! the weights against the cells), then `weights()` and `expected()`. The
//! input is the folder's files, framed as text:
//!
//! ```text
//! %%% model.json
//! {...}
//! %%% cells/leaf.yaml
//! name: leaf
//! ...
//! %%% weights.safetensors
//! <bytes>
//! ```
//!
//! Each section starts with a line `%%% NAME` (at the start of the input or
//! after a newline) and runs to the newline before the next one. NAME is a
//! file name (`[A-Za-z0-9._-]`, not hidden, not `cells`) or `cells/` and one; other
//! sections are ignored. The files are written into a folder of this
//! process's own under the temporary directory, emptied for every input.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use engine_core::modeldir::ModelDir;
use libfuzzer_sys::fuzz_target;

const HEAD: &[u8] = b"%%% ";

fn folder() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        std::env::temp_dir().join(format!("batchlab-fuzz-model-dir-{}", std::process::id()))
    })
}

fn valid_name(name: &str) -> bool {
    // `cells` itself is the folder of cell files.
    if name == "cells" {
        return false;
    }
    let file = name.strip_prefix("cells/").unwrap_or(name);
    !file.is_empty()
        && file.len() <= 64
        && !file.starts_with('.')
        && file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The sections of `data` as (name, contents).
fn sections(data: &[u8]) -> Vec<(&str, &[u8])> {
    let mut starts: Vec<usize> = Vec::new();
    if data.starts_with(HEAD) {
        starts.push(0);
    }
    for (i, w) in data.windows(1 + HEAD.len()).enumerate() {
        if w[0] == b'\n' && &w[1..] == HEAD {
            starts.push(i + 1);
        }
    }
    let mut out = Vec::new();
    for (k, &s) in starts.iter().enumerate() {
        let end = match starts.get(k + 1) {
            Some(&n) => n - 1, // the newline before the next header
            None => data.len(),
        };
        let part = &data[s + HEAD.len()..end.max(s + HEAD.len())];
        let (name, body) = match part.iter().position(|&b| b == b'\n') {
            Some(nl) => (&part[..nl], &part[nl + 1..]),
            None => (part, &part[part.len()..]),
        };
        if let Ok(name) = std::str::from_utf8(name)
            && valid_name(name)
        {
            out.push((name, body));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let dir = folder();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("cells")).expect("temporary folder");
    for (name, body) in sections(data).into_iter().take(32) {
        std::fs::write(dir.join(name), body).expect("write a file of the folder");
    }
    let d = match ModelDir::open(dir) {
        Ok(d) => d,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    // Opened means checked whole: the weights were read and fit the cells.
    for r in &d.workload.roles {
        let cell = d.cells.instantiate(&r.cell, d.manifest.hidden.max(1) as usize);
        if let Ok(cell) = cell {
            for &p in &cell.params {
                let v = cell.value(p);
                assert!(d.weights().require(&v.name, &v.shape, "fuzz").is_ok());
            }
        }
    }
    let _ = d.expected().map_err(|e| e.to_string());
    let _ = d.manifest_path();
    for r in &d.workload.roles {
        let _ = d.cells.instantiate(&r.cell, 4).map_err(|e| e.to_string());
    }
    assert_eq!(d.cells.workload(&d.manifest.name), Some(d.workload.clone()));
});
