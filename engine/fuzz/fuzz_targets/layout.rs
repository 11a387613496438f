//! Layout file text → `LayoutFile::parse` (shape, format, version); an
//! accepted file writes back (`to_json`) to text that reads to the same
//! file, and is checked by the planner (`check_layout`) against its cell,
//! instantiated from the built-in cells and the committed model folders'
//! cells at the file's hidden size (up to 4096: a layout of a larger cell
//! is checked by the same code at any size), as `planner check` and
//! `engine replay --layouts` do.
#![no_main]

use std::sync::OnceLock;

use engine_core::cells::CellLibrary;
use engine_core::layout::LayoutFile;
use libfuzzer_sys::fuzz_target;

fn library() -> &'static CellLibrary {
    static LIB: OnceLock<CellLibrary> = OnceLock::new();
    LIB.get_or_init(|| {
        let mut lib = CellLibrary::builtin().expect("built-in cells load");
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures");
        for folder in ["model-tree", "model-dag"] {
            let mut files: Vec<_> = std::fs::read_dir(fixtures.join(folder).join("cells"))
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            files.sort();
            for f in files {
                let _ = lib.load_file(&f);
            }
        }
        lib
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = match LayoutFile::parse(text, "l.json") {
        Ok(f) => f,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let json = file.to_json();
    let back = LayoutFile::parse(&json, "again.json").expect("written layout reads back");
    assert_eq!(back.to_json(), json);
    if file.hidden == 0 || file.hidden > 4096 || file.batch > 4096 {
        return;
    }
    let Ok(cell) = library().instantiate(&file.cell, file.hidden) else {
        return;
    };
    if let Err(e) = planner::check::check_layout(&file, &cell) {
        let _ = e.to_string();
    }
});
