//! The shipped specs (`experiments/specs/*.yaml`) parse in both modes, and
//! their grids have the sizes their descriptions promise.

use std::path::Path;

use experiments::{Kind, expand, load_spec};

fn specs() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_shipped_spec_parses_in_full_and_quick_mode() {
    let names: Vec<String> = specs()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "cavs-fig8",
        "fig6",
        "fig7",
        "fig9",
        "table2",
        "table4",
        "table5",
        "table6",
        "policies",
        "policies-exact",
        "policies-hard",
        "policies-unseen",
        "optimise-scaling",
    ] {
        assert!(names.iter().any(|n| n == want), "missing spec {want}");
    }
    for p in specs() {
        for quick in [false, true] {
            let s = load_spec(&p, quick).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                s.name,
                p.file_stem().unwrap().to_string_lossy(),
                "name = file stem"
            );
            assert!(!s.description.is_empty(), "{}: describe the grid", s.name);
            let runs = expand(&s);
            assert!(!runs.is_empty());
            if quick {
                assert!(runs.len() <= expand(&load_spec(&p, false).unwrap()).len());
            }
        }
    }
}

#[test]
fn table6_point_is_in_a_replay_spec() {
    let s = load_spec(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/table6.yaml"),
        false,
    )
    .unwrap();
    assert_eq!(s.kind, Kind::Replay);
    let labels: Vec<String> = expand(&s).iter().map(|r| r.label()).collect();
    assert!(labels.contains(&"tree-lstm b256 h512 s101 reference cpu".to_string()));
    assert!(labels.contains(&"tree-lstm b256 h512 s101 edbatch cpu".to_string()));
}

#[test]
fn fig6_grid_size() {
    let s = load_spec(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/fig6.yaml"),
        false,
    )
    .unwrap();
    // 8 workloads x 6 batches x 5 hiddens x 4 executors, minus mv-rnn at 2 hiddens.
    assert_eq!(expand(&s).len(), 8 * 6 * 5 * 4 - 6 * 2 * 4);
}
