//! One cell file's YAML text → `CellSpec::parse`, then what a model folder
//! does with it (`CellLibrary::add_yaml`: validation at the load-check
//! hidden size) and instantiation at other hidden sizes, the largest a
//! manifest's `hidden` (u32) allows included.
#![no_main]

use engine_core::cells::{CellLibrary, CellSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let spec = match CellSpec::parse(text, "cells/x.yaml") {
        Ok(spec) => spec,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    for hidden in [1, 3, 64, u32::MAX as usize] {
        let _ = spec.instantiate(hidden).map_err(|e| e.to_string());
    }
    let mut lib = CellLibrary::new();
    if let Ok(name) = lib
        .add_yaml(text, "cells/x.yaml")
        .map_err(|e| e.to_string())
    {
        let _ = lib.instantiate(&name, 4).map_err(|e| e.to_string());
        // The same name twice is a clash, never a panic.
        assert!(lib.add_yaml(text, "cells/y.yaml").is_err());
    }
});
