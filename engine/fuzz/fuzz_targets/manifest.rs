//! `model.json` text → `Manifest::parse` (JSON shape, then the values:
//! format, version, names, duplicate roles and types, file names).
#![no_main]

use engine_core::modeldir::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The reader reads the file with `read_to_string`: text that is not
    // UTF-8 never reaches the parser.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Manifest::parse(text, "model.json").map_err(|e| e.to_string());
    }
});
