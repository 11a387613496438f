//! Writes one figure of each kind, with realistic data, for a person to look
//! at: `cargo run -p figures --example preview -- /tmp/figs-preview`.

use std::path::PathBuf;

use figures::{
    BarSeries, Figure, GroupedBars, LineChart, LineSeries, Panel, RefLine, Scale, StackComponent,
    StackedBars, Stamp, render,
};

const WORKLOADS: [&str; 15] = [
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
const EXECUTORS: [&str; 5] = ["reference", "dynet", "cavs", "edbatch", "vpps"];

/// A deterministic pseudo-random value in `[0, 1)`.
fn noise(i: usize, j: usize) -> f64 {
    let h = (i as u64 * 2654435761 + j as u64 * 40503 + 7) % 1000;
    h as f64 / 1000.0
}

fn grouped(title: &str, hidden: f64) -> GroupedBars {
    let series = EXECUTORS
        .iter()
        .enumerate()
        .map(|(j, name)| {
            let speed = [1.0, 6.0, 9.0, 14.0, 22.0][j] * hidden / 256.0;
            let values = (0..WORKLOADS.len())
                .map(|i| {
                    let v = (speed * (0.5 + 1.5 * noise(i, j)) * 100.0).round() / 100.0;
                    (!(j == 4 && i % 7 == 3)).then_some(v.max(0.01))
                })
                .collect();
            let paper = if j == 3 {
                (0..WORKLOADS.len())
                    .map(|i| (i % 3 != 1).then(|| speed * (0.6 + noise(i, 9))))
                    .collect()
            } else {
                Vec::new()
            };
            BarSeries {
                name: name.to_string(),
                values,
                paper,
            }
        })
        .collect();
    let _ = title;
    GroupedBars {
        x_label: "workload".into(),
        y_label: "speed-up over reference (x)".into(),
        y_scale: Scale::Log10,
        categories: WORKLOADS.iter().map(|s| s.to_string()).collect(),
        series,
        reference_lines: vec![RefLine::new(1.0, "reference = 1x")],
    }
}

fn lines() -> LineChart {
    let x: Vec<f64> = (0..9).map(|k| f64::from(1u32 << k)).collect();
    let series = EXECUTORS
        .iter()
        .enumerate()
        .map(|(j, name)| LineSeries {
            name: name.to_string(),
            x: None,
            y: x.iter()
                .enumerate()
                .map(|(i, b)| {
                    let eff = [0.02, 0.5, 0.7, 0.85, 0.95][j];
                    let v = 180.0 * b.powf(eff) * (0.9 + 0.2 * noise(i, j));
                    (!(j == 4 && i >= 7)).then_some(v.round())
                })
                .collect(),
        })
        .collect();
    LineChart {
        x_label: "batch size (instances)".into(),
        y_label: "throughput (instances / s)".into(),
        x_scale: Scale::Log2,
        y_scale: Scale::Log10,
        x,
        series,
        reference_lines: Vec::new(),
    }
}

fn stacked() -> StackedBars {
    let cats = ["dynet", "cavs", "edbatch", "vpps"];
    StackedBars {
        x_label: "executor (tree-lstm, batch 64)".into(),
        y_label: "time per mini-batch (s)".into(),
        categories: cats.iter().map(|s| s.to_string()).collect(),
        components: vec![
            StackComponent::new("construction", [0.21, 0.05, 0.04, 0.03]),
            StackComponent::new("scheduling", [0.34, 0.12, 0.02, 0.01]),
            StackComponent::new("execution", [0.62, 0.41, 0.33, 0.18]),
        ],
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "/tmp/figs-preview".into()),
    );
    let stamp = Stamp::new("cargo run -p figures --example preview", "preview");
    let figs = [
        (
            "grouped_bars",
            Figure::new(
                "Speed-up per workload and executor (hidden 256)",
                grouped("", 256.0),
                stamp.clone(),
            ),
        ),
        (
            // Too narrow to wrap: the category labels turn vertical.
            "grouped_bars_narrow",
            Figure::new(
                "Speed-up, narrow figure (hidden 64)",
                grouped("", 64.0),
                stamp.clone(),
            )
            .with_size(900, 650),
        ),
        (
            "lines",
            Figure::new(
                "Throughput versus batch size (tree-lstm)",
                lines(),
                stamp.clone(),
            )
            .with_size(1200, 800),
        ),
        (
            "stacked",
            Figure::new("Where the time goes", stacked(), stamp.clone()).with_size(1000, 700),
        ),
        (
            "panels",
            Figure::grid(
                "Speed-up per hidden size",
                [64.0, 256.0, 512.0]
                    .iter()
                    .map(|&h| Panel::new(format!("hidden = {h}"), grouped("", h)))
                    .collect(),
                1,
                stamp.clone(),
            )
            .with_size(1600, 1800),
        ),
    ];
    for (name, fig) in &figs {
        let files = render(fig, &dir.join(name))?;
        println!("{}\n{}", files.png.display(), files.svg.display());
    }
    Ok(())
}
