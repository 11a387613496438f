//! End-to-end tests of `engine script` and `engine replay --executor vpps`.

mod common;

use std::process::Output;

use common::{engine, engine_line, stderr, tmp};

/// A refusal: status 1 and one `error:` line containing `what`.
fn refused(o: &Output, what: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: ") && e.contains(what), "{e}");
}

#[test]
fn script_json_reports_plan_script_and_emulation() {
    let (bin, cu) = (tmp("s.bin"), tmp("k.cu"));
    let o = engine(&[
        "script",
        "--workload",
        "rvnn",
        "--batch",
        "2",
        "--hidden",
        "16",
        "--emulate",
        "--out",
        bin.to_str().unwrap(),
        "--kernel",
        cu.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["format"], "vpps-script");
    assert_eq!(r["version"], 1);
    assert_eq!(r["training"], true);
    assert_eq!(r["plan"]["vps"], r["script"]["vps"]);
    assert!(r["plan"]["summary"]["fits_on_chip"].as_bool().unwrap());
    let e = &r["emulation"];
    assert!(e["max_rel_error_outputs"].as_f64().unwrap() < 1e-4);
    assert!(e["max_rel_error_gradients"].as_f64().unwrap() < 1e-4);
    let words = std::fs::read(&bin).unwrap();
    assert_eq!(words.len() as u64, r["script"]["bytes"].as_u64().unwrap());
    assert_eq!(&words[..4], b"VPPS");
    let src = std::fs::read_to_string(&cu).unwrap();
    assert!(src.contains("vpps_kernel"));
}

#[test]
fn script_rejects_bad_flags_by_name() {
    let o = engine(&["script", "--workload", "rvnn", "--target", "v100x"]);
    refused(&o, "--target v100x");
    // Outside the flag's range: a usage error naming it and the range.
    let o = engine(&["script", "--workload", "rvnn", "--ctas-per-sm", "3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--ctas-per-sm") && stderr(&o).contains("1 to 2"));
    let o = engine(&["script", "--workload", "rvnn", "--backward-policy", "nope"]);
    refused(&o, "--backward-policy nope");
    // engine replay takes --ctas-per-sm for vpps only, and only 1 or 2.
    let line = "replay --workload rvnn --batch 2 --hidden 8 --ctas-per-sm";
    let o = engine_line(line, &["2", "--executor", "cavs"]);
    refused(&o, "--ctas-per-sm is for --executor vpps");
    let o = engine_line(line, &["3", "--executor", "vpps"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("1 to 2"), "{}", stderr(&o));
}

#[test]
fn replay_vpps_never_falls_back_to_the_cpu() {
    let line = "replay --workload rvnn --batch 2 --hidden 8 --executor vpps";
    let o = engine_line(line, &["--device", "cpu"]);
    refused(&o, "runs on CUDA only");
    let o = engine_line(line, &["--device", "cpu", "--train"]);
    refused(&o, "runs on CUDA only");
    // engine train runs on the CPU: the same typed error.
    let o = engine(&["train", "--workload", "tree-lstm", "--executor", "vpps"]);
    refused(&o, "runs on CUDA only");
    let o = engine_line(line, &["--device", "cuda", "--json"]);
    if o.status.success() {
        // A GPU is here: the kernel ran, and it must agree with the reference.
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(r["max_rel_error"].as_f64().unwrap() < 1e-4, "{r}");
        assert_eq!(r["counters"]["kernels"], 1, "{r}");
        assert!(r["vpps"]["vps"].as_u64().unwrap() > 0, "{r}");
    } else {
        refused(&o, "CUDA unavailable");
    }
}

#[test]
fn script_text_names_the_plan_and_a_missing_trace_file() {
    let o = engine(&[
        "script",
        "--workload",
        "td-lstm",
        "--batch",
        "2",
        "--hidden",
        "8",
        "--forward-only",
        "--listing",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("forward-only script"), "{text}");
    assert!(text.contains("0 backward batches"), "{text}");
    assert!(text.contains("processor 0:"), "{text}");
    let o = engine(&["script", "--trace", "/nonexistent/t.json"]);
    refused(&o, "/nonexistent/t.json");
}
