//! Policy file text → `PolicyFile::from_yaml` (shape, format, version,
//! encoding, states and their tokens, duplicate states); an accepted file
//! must become an `FsmPolicy`, or be refused with an error, run (or refuse)
//! on every graph of `graphs.rs` to a valid schedule, and write back
//! (`to_yaml`) to text that reads to the same file.
#![no_main]

mod graphs;

use engine_core::sched::{FsmPolicy, PolicyFile, run_policy, validate_schedule};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = match PolicyFile::from_yaml(text, "p.yaml") {
        Ok(f) => f,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let yaml = file.to_yaml().expect("an accepted policy writes");
    let back = PolicyFile::from_yaml(&yaml, "again.yaml").expect("written policy reads back");
    assert_eq!(back, file);
    let mut fsm = match FsmPolicy::new(file) {
        Ok(f) => f,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    for (g, st) in graphs::graphs() {
        if let Ok((s, _)) = run_policy(g, st, &mut fsm) {
            validate_schedule(g, &s).expect("a policy's schedule is valid");
        }
    }
});
