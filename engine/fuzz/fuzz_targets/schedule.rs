//! Schedule file text → `ScheduleFile::from_json` (shape, format, version,
//! counts that agree, a certified bound within the file's own batches); an
//! accepted file is checked (`to_schedule`) against every graph of
//! `graphs.rs` of its node count, which must give a valid schedule or an
//! error, and writes back to text that reads to the same file.
#![no_main]

mod graphs;

use engine_core::sched::schedule_file::ScheduleFile;
use engine_core::sched::validate_schedule;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = match ScheduleFile::from_json(text, "s.json") {
        Ok(f) => f,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert!(file.certified_bound <= file.batches);
    let json = serde_json::to_string(&file).expect("an accepted schedule writes");
    let back = ScheduleFile::from_json(&json, "again.json").expect("written schedule reads back");
    assert_eq!(back, file);
    for (g, _) in graphs::graphs() {
        if file.nodes != g.len() as u64 {
            continue;
        }
        match file.to_schedule(g, "s.json") {
            Ok(s) => validate_schedule(g, &s).expect("an accepted schedule is valid"),
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
});
