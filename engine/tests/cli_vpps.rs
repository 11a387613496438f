//! End-to-end tests of `engine script` and `engine replay --executor vpps`.

use std::process::{Command, Output};

fn engine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(args)
        .output()
        .expect("engine runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn script_json_reports_plan_script_and_emulation() {
    let dir = std::env::temp_dir().join(format!("batchlab-vpps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (bin, cu) = (dir.join("s.bin"), dir.join("k.cu"));
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
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn script_rejects_bad_flags_by_name() {
    let o = engine(&["script", "--workload", "rvnn", "--target", "v100x"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--target v100x"), "{}", stderr(&o));
    let o = engine(&["script", "--workload", "rvnn", "--ctas-per-sm", "3"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--ctas-per-sm"), "{}", stderr(&o));
}

#[test]
fn replay_vpps_never_falls_back_to_the_cpu() {
    let args = [
        "replay",
        "--workload",
        "rvnn",
        "--batch",
        "2",
        "--hidden",
        "8",
        "--executor",
        "vpps",
    ];
    let o = engine(&[&args[..], &["--device", "cpu"]].concat());
    assert!(!o.status.success());
    assert!(stderr(&o).contains("runs on CUDA only"), "{}", stderr(&o));
    let o = engine(&[&args[..], &["--device", "cuda"]].concat());
    if o.status.success() {
        println!("a GPU is present: engine replay --executor vpps --device cuda ran");
    } else {
        assert!(
            stderr(&o).contains("CUDA unavailable"),
            "not the typed error: {}",
            stderr(&o)
        );
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
    assert!(!o.status.success());
    assert!(stderr(&o).contains("/nonexistent/t.json"), "{}", stderr(&o));
}
