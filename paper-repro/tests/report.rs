//! Reporting from a fixture rows folder: every item's files and section,
//! a partial item, and CUDA failures reported as such.

mod common;

use std::path::PathBuf;

use common::{check_file, run, texts, tmp};
use experiments::Row;
use experiments::config::RunConfig;
use paper_repro::items::{ITEMS, Paper};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rows")
}

#[test]
fn report_from_fixture_rows_writes_every_file_and_section() {
    let out = tmp("report-fixture");
    let o = run(&[
        "report",
        "--rows",
        fixture().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let (stdout, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(s["mode"], "report");
    let items = s["items"].as_array().unwrap();
    assert_eq!(items.len(), ITEMS.len());
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    for (item, spec) in items.iter().zip(ITEMS.iter()) {
        assert_eq!(item["name"], spec.name);
        assert!(
            report.contains(&format!("## {}", spec.title)),
            "no section for {}",
            spec.name
        );
        let status = item["status"].as_str().unwrap();
        match spec.name {
            "cavs-fig8" => assert_eq!(status, "partial", "{item}"),
            "vpps" => {
                assert_eq!(status, "no-data", "{item}");
                assert_eq!(item["reason"], "CUDA not available: libcuda not found");
                continue;
            }
            _ => assert_eq!(status, "ok", "{item}"),
        }
        let files: Vec<&str> = item["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        for ext in ["png", "svg", "csv"] {
            assert!(
                files.iter().any(|f| f.ends_with(ext)),
                "{}: no {ext} in {files:?}",
                spec.name
            );
        }
        for f in files {
            check_file(&out.join(f));
        }
        assert!(report.contains(&format!("![{0}]({0}.png)", spec.name)));
    }
    assert!(report.contains("CUDA not available: libcuda not found"));
    assert!(report.contains("the first error: replay: fixture: a failed run"));
    assert_eq!(report.matches("**Reading.**").count(), ITEMS.len() - 1);
    // Every item reproducing a paper quotes it; `peers` compares with the real systems.
    let papers = ITEMS.iter().filter(|i| i.paper != Paper::Workbench).count();
    assert_eq!(report.matches("**The paper says** (*").count(), papers);
    // Cited by title and section, not by our text copy's file and line.
    assert!(
        report.contains("(*ED-Batch: Efficient Automatic Batching"),
        "{report}"
    );
    assert!(!report.contains(".txt:"), "{report}");
    assert!(!report.contains("shared/papers"), "{report}");
    // Fixture rows are quick-mode rows.
    assert!(report.contains("**Quick mode**"));
    check_file(&out.join("summary.json"));
}

#[test]
fn readings_compare_with_the_papers_numbers() {
    let out = tmp("report-readings");
    let o = run(&[
        "report",
        "--only",
        "table2,table6",
        "--rows",
        fixture().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", texts(&o).1);
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    // Table 2: TreeLSTM-Leaf matches the paper exactly (396 / 6 kB), LSTMCell 66.00× vs 65.88×.
    assert!(report.contains("| TreeLSTM-Leaf | tree_lstm.leaf | true | 3 / 1 | 3 / 1 | 396 / 6 | 396 / 6 | 66.00 | 66.00 |"), "{report}");
    assert!(
        report.contains("LSTMCell 66.00× vs the paper's 65.88×"),
        "{report}"
    );
    // Table 6: the paper's CPU row is shown beside ours.
    assert!(report.contains("| edbatch | ED-Batch |"));
    assert!(report.contains("| 1163 | 29.82 |"), "{report}");
    let csv = std::fs::read_to_string(out.join("table6.csv")).unwrap();
    assert!(csv.starts_with("executor,paper system,"));
}

/// The policy items render the tables of `docs/results/policies.md` (a)–(f)
/// from their rows, in the page's format.
#[test]
fn policy_items_render_the_tables_of_the_policies_page() {
    let out = tmp("report-policies");
    let o = run(&[
        "report",
        "--only",
        "policies,policies-exact,policies-hard,policies-unseen,optimise-scaling",
        "--rows",
        fixture().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", texts(&o).1);
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    for want in [
        // (a): cells `batches (ratio)`, the best FSM with its encoding.
        "| workload | nodes | LB | depth | agenda | agenda-upd | cavs | typewise | FSM-base | FSM-max | FSM-sort | FSM-sort-cond | FSM-sort-phase | best FSM | states | misses |",
        "| tree-lstm-2type | 2907 | 32 | 70 (2.19) | 106 (3.31) | 55 (1.72) | 47 (1.47) | 38 (1.19) |",
        "| sort 36 (1.125) | 7 | 0 |",
        "| lattice-lstm | 5861 | 135 |",
        // (b): the batch-32 FSM on another trace.
        "The best FSM, trained on the b32 s7 trace of the table above",
        "| lattice-lstm | 64 | sort-cond | 101 | 10726 | 170 | 183 | 1.076 | 3.8% | 184 | 235 |",
        // (c): one line per workload and trace set.
        "| tree-lstm-2type | 2 | 4 | 132–182 | 4 | 0 | 1.18 |",
        // (d) and its curves.
        "| graph | nodes | A.3 | certified bound | best-known | gap | typewise | reference FSM (best@ep) | default FSM (best@ep) | teacher FSM (encoding) | teacher FSM / best-known | FSM ≤ typewise |",
        "| tree-lstm-2type b8 | 895 | 29 | 32 (piece) | 32 | 1 | 37 |",
        "| random-dag n300 | 300 | 40 |",
        "| tree-lstm-2type b8 | sort-crit | 37 | 0:37 50:34 100:34 |",
        // (e): the training trace first.
        "| lattice-lstm | b32 s1 (sort-crit, 18 states) | same | 5879 | 178 | 0 (0%) | 196 | 178 | 1 | 1.101 |",
        "| random-dag | 3000 nodes s1 | 3000 nodes s2 | 3000 |",
        // (f): timings and the search's end.
        "| random-dag | 1000 |",
        "| tree-lstm-2type b32 | 2907 |",
    ] {
        assert!(report.contains(want), "no {want:?} in:\n{report}");
    }
    for csv in [
        "policies.csv",
        "policies-transfer.csv",
        "policies-exact.csv",
        "policies-hard.csv",
        "policies-hard-curves.csv",
        "policies-unseen.csv",
        "optimise-scaling.csv",
    ] {
        check_file(&out.join(csv));
    }
}

#[test]
fn report_of_an_item_without_rows_fails_when_asked_for_by_name() {
    let rows = tmp("report-empty-rows");
    let o = run(&[
        "report",
        "--only",
        "table6",
        "--rows",
        rows.to_str().unwrap(),
        "--out",
        rows.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(texts(&o).1.contains("no rows for this item"));
}

/// The fixture replay rows of `specs`, with every row's device set to
/// `device` (the config's and the provenance's), and table6's rows
/// relabelled as the paper's batch 256, hidden 512 (a like-with-like
/// comparison), in a fresh rows folder.
fn fixture_on(device: &str, specs: &[&str]) -> PathBuf {
    let dir = tmp(&format!("report-rows-{device}"));
    for spec in specs {
        let text = std::fs::read_to_string(fixture().join(format!("{spec}.json"))).unwrap();
        let mut rows: Vec<Row> = serde_json::from_str(&text).unwrap();
        for r in &mut rows {
            r.provenance.device = device.into();
            let RunConfig::Replay(c) = &mut r.config else {
                panic!("{spec}: not a replay row: {r:?}")
            };
            c.device = device.into();
            if *spec == "table6" {
                c.batch = 256;
                c.hidden = 512;
            }
        }
        std::fs::write(
            dir.join(format!("{spec}.json")),
            serde_json::to_string(&rows).unwrap(),
        )
        .unwrap();
    }
    dir
}

/// REPORT.md of `fig6,table6` from `rows`, and the two readings.
fn fig6_table6_report(rows: &std::path::Path, name: &str) -> (String, String, String) {
    let out = tmp(name);
    let o = run(&[
        "report",
        "--only",
        "fig6,table6",
        "--rows",
        rows.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", texts(&o).1);
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    let reading = |title: &str| -> String {
        let at = report.find(&format!("## {title}")).expect("section");
        report[at..]
            .lines()
            .find(|l| l.starts_with("**Reading.**"))
            .expect("reading")
            .to_string()
    };
    let (fig6, table6) = (reading("ED-Batch Fig. 6:"), reading("ED-Batch Table 6:"));
    (report, fig6, table6)
}

#[test]
fn readings_compare_with_the_papers_numbers_on_the_rows_device() {
    // Quick rows (batch 64, hidden 128): Table 6 is not compared with the
    // paper's batch 256, hidden 512 (issue 15: compare like with like).
    let (_, _, quick) = fig6_table6_report(&fixture(), "report-device-quick");
    assert!(quick.contains("Not compared with the paper"), "{quick}");
    assert!(!quick.contains("paper, CPU"), "{quick}");

    // CPU rows: the paper's CPU numbers.
    let cpu = fixture_on("cpu", &["fig6", "table6"]);
    let (report, fig6, table6) = fig6_table6_report(&cpu, "report-device-cpu");
    assert!(fig6.contains("on our CPU"), "{fig6}");
    assert!(fig6.contains("(paper, CPU: 1.20×, 1.11×)"), "{fig6}");
    assert!(fig6.contains("(paper, CPU: 1.32–2.97×)"), "{fig6}");
    assert!(table6.contains("On our CPU"), "{table6}");
    assert!(table6.contains("(paper, CPU: 29.82×)"), "{table6}");
    assert!(table6.contains("the paper's 1163 on the CPU"), "{table6}");
    assert!(report.contains("paper, CPU: edbatch / cavs"));
    assert!(!report.contains("GPU rows on"), "{report}");

    // The same rows marked as CUDA rows: the paper's GPU numbers.
    let gpu = fixture_on("cuda", &["fig6", "table6"]);
    let (report, fig6, table6) = fig6_table6_report(&gpu, "report-device-gpu");
    assert!(fig6.contains("on our GPU"), "{fig6}");
    assert!(fig6.contains("(paper, GPU: 1.20×, 1.12×)"), "{fig6}");
    assert!(
        fig6.contains("(paper, GPU: 1.23×, 1.29×; MV-RNN ≈ 1)"),
        "{fig6}"
    );
    assert!(fig6.contains("(paper, GPU: 2.54–3.71×)"), "{fig6}");
    assert!(!fig6.contains("CPU"), "{fig6}");
    // Table 6's GPU row: ED-Batch 6736, Torch 84 (80.19×), Cavs 6243, DyNet 2723.
    assert!(table6.contains("On our GPU"), "{table6}");
    assert!(table6.contains("(paper, GPU: 80.19×)"), "{table6}");
    assert!(table6.contains("(paper, GPU: 1.08×)"), "{table6}");
    assert!(table6.contains("the paper's 6736 on the GPU"), "{table6}");
    assert!(!table6.contains("CPU"), "{table6}");
    assert!(report.contains("| 6736 | 80.19 |"), "{report}");
    assert!(report.contains("| 84 | 1.00 | 26 |"), "{report}");
    assert!(report.contains("paper, GPU: edbatch / cavs"));
    assert!(
        report.contains("| tree-lstm | TreeLSTM | trees | 0.72 (1 run) | 0.586–0.855 | 1.23 |"),
        "{report}"
    );
    assert!(report.contains("GPU rows on `cuda`"), "{report}");
    assert!(!report.contains("paper, CPU"), "{report}");
}
