//! `trace.json` text → `Trace::from_json` (header, nodes straight into the
//! graph builder, node data, graph validation); an accepted trace must
//! write back (`to_json`) to text that reads again to the same text.
#![no_main]

use engine_core::trace::Trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let t = match Trace::from_json(text, "trace.json") {
        Ok(t) => t,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let _ = (t.instances(), t.data_counts(), t.has_data());
    let json = t.to_json();
    let back = Trace::from_json(&json, "again.json").expect("written trace reads back");
    assert_eq!(back.to_json(), json);
});
