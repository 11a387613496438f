//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use figures::{
    BarSeries, Figure, GroupedBars, LineChart, LineSeries, Panel, RefLine, Scale, StackComponent,
    StackedBars, Stamp,
};

pub const WORKLOADS: [&str; 15] = [
    "tree-lstm",
    "tree-lstm-2type",
    "tree-gru",
    "tree-fc",
    "mv-rnn",
    "lattice-lstm",
    "lattice-gru",
    "bilstm-tagger",
    "bilstm-tagger-withchar",
    "lstm-nmt",
    "fixed-lstm",
    "var-lstm",
    "td-lstm",
    "td-rnn",
    "re-reads",
];

pub fn stamp() -> Stamp {
    Stamp::new("figures-test", "rev0123")
}

pub fn grouped() -> GroupedBars {
    let n = WORKLOADS.len();
    GroupedBars {
        x_label: "workload".into(),
        y_label: "batches / lower bound".into(),
        y_scale: Scale::Log10,
        categories: WORKLOADS.iter().map(|s| s.to_string()).collect(),
        series: ["agenda", "depth", "fsm"]
            .iter()
            .enumerate()
            .map(|(j, name)| {
                BarSeries::new(*name, (0..n).map(|i| 1.0 + (i * (j + 1)) as f64 * 0.125))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .enumerate()
            .map(|(j, s)| {
                if j == 2 {
                    s.with_paper(vec![Some(1.2); n])
                } else {
                    s
                }
            })
            .collect(),
        reference_lines: vec![RefLine::new(1.0, "lower bound")],
    }
}

pub fn lines() -> LineChart {
    let x: Vec<f64> = (0..9).map(|k| f64::from(1u32 << k)).collect();
    LineChart {
        x_label: "batch size".into(),
        y_label: "instances per second".into(),
        x_scale: Scale::Log2,
        y_scale: Scale::Log10,
        series: vec![
            LineSeries::new("cavs", x.iter().map(|b| 100.0 * b)),
            LineSeries {
                name: "vpps".into(),
                x: None,
                y: x.iter()
                    .map(|b| (*b < 100.0).then_some(150.0 * b))
                    .collect(),
            },
        ],
        x,
        reference_lines: Vec::new(),
    }
}

pub fn stacked() -> StackedBars {
    StackedBars {
        x_label: "executor".into(),
        y_label: "seconds".into(),
        categories: ["dynet", "cavs", "edbatch", "vpps"]
            .map(String::from)
            .to_vec(),
        components: vec![
            StackComponent::new("construction", [0.2, 0.1, 0.1, 0.05]),
            StackComponent::new("scheduling", [0.3, 0.1, 0.02, 0.01]),
            StackComponent::new("execution", [0.6, 0.4, 0.3, 0.2]),
        ],
    }
}

pub fn panels() -> Figure {
    let p = |h: u32| Panel::new(format!("hidden = {h}"), grouped());
    Figure::grid("Per hidden size", vec![p(64), p(256)], 2, stamp())
}

/// A fresh, empty folder under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("figures-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Width and height from the IHDR chunk of a PNG, checking the signature.
pub fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() > 33, "PNG too short: {} bytes", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR", "first chunk is IHDR");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}
