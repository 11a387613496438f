//! `paper-repro training-curve`: the learning curve of an `engine train
//! --json` report (train loss per sample, dev accuracy at the roots and over
//! all nodes, each epoch, with the dev split's majority-class baselines), as
//! a figure (PNG + SVG) and a CSV. Measuring (`engine train`) and drawing are
//! separate, so a committed report redraws with one command.

use std::path::{Path, PathBuf};

use figures::{Figure, LineChart, LineSeries, Panel, RefLine, Scale, Stamp};
use serde::Deserialize;

use crate::error::{ReproError, Result};
use crate::report::table::Table;

/// `paper-repro training-curve` arguments.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct CurveArgs {
    /// The report `engine train --json` printed.
    #[arg(long, value_name = "FILE")]
    pub report: PathBuf,
}

/// The fields of `engine train --json` the curve reads (unknown ones are
/// ignored: the report may grow).
#[derive(Debug, Deserialize)]
struct TrainReport {
    workload: String,
    executor: String,
    batch: usize,
    hidden: usize,
    #[serde(default)]
    dev: Option<String>,
    #[serde(default)]
    dev_majority: Option<Majority>,
    epochs: Vec<Epoch>,
}

#[derive(Debug, Deserialize)]
struct Majority {
    root: f64,
    node: f64,
}

#[derive(Debug, Deserialize)]
struct Epoch {
    epoch: u32,
    train_loss: f64,
    dev_accuracy: Option<f64>,
    dev_node_accuracy: Option<f64>,
    seconds: f64,
}

/// Draws `training-curve.{png,svg,csv}` into `out`; returns the files.
pub fn draw(a: &CurveArgs, out: &Path, command: &str) -> Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(&a.report).map_err(|e| ReproError::io(&a.report, e))?;
    let r: TrainReport = serde_json::from_str(&text).map_err(|e| {
        ReproError::Usage(format!(
            "{}: not an `engine train --json` report: {e}",
            a.report.display()
        ))
    })?;
    if r.epochs.is_empty() {
        return Err(ReproError::Usage(format!(
            "{}: the report has no epochs",
            a.report.display()
        )));
    }
    let x: Vec<f64> = r.epochs.iter().map(|e| f64::from(e.epoch)).collect();
    let loss = Panel::new(
        "train loss per sample",
        LineChart {
            x_label: "epoch".into(),
            y_label: "mean loss per sample".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x: x.clone(),
            series: vec![LineSeries::new(
                "train loss",
                r.epochs.iter().map(|e| e.train_loss),
            )],
            reference_lines: Vec::new(),
        },
    );
    let pct = |v: Option<f64>| v.map(|v| 100.0 * v);
    let mut refs = Vec::new();
    if let Some(m) = &r.dev_majority {
        refs.push(RefLine::new(100.0 * m.root, "majority class, roots"));
        refs.push(RefLine::new(100.0 * m.node, "majority class, all nodes"));
    }
    let acc = Panel::new(
        format!("accuracy on {}", r.dev.as_deref().unwrap_or("no dev split")),
        LineChart {
            x_label: "epoch".into(),
            y_label: "accuracy (%)".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x,
            series: vec![
                LineSeries {
                    name: "roots".into(),
                    y: r.epochs.iter().map(|e| pct(e.dev_accuracy)).collect(),
                },
                LineSeries {
                    name: "all nodes".into(),
                    y: r.epochs.iter().map(|e| pct(e.dev_node_accuracy)).collect(),
                },
            ],
            reference_lines: refs,
        },
    );
    let fig = Figure::grid(
        format!(
            "engine train: {} ({} executor, batch {}, hidden {})",
            r.workload, r.executor, r.batch, r.hidden
        ),
        vec![loss, acc],
        2,
        Stamp::new(command, experiments::provenance::workspace_revision()),
    );
    std::fs::create_dir_all(out).map_err(|e| ReproError::io(out, e))?;
    let stem = out.join("training-curve");
    figures::render(&fig, &stem).map_err(|source| ReproError::Figure {
        stem: "training-curve".into(),
        source,
    })?;
    let mut t = Table::new(
        "training-curve",
        "",
        &[
            "epoch",
            "train loss per sample",
            "dev accuracy roots",
            "dev accuracy all nodes",
            "seconds",
        ],
    );
    for e in &r.epochs {
        let f = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
        t.push(vec![
            e.epoch.to_string(),
            format!("{:.4}", e.train_loss),
            f(e.dev_accuracy),
            f(e.dev_node_accuracy),
            format!("{:.2}", e.seconds),
        ]);
    }
    let csv = out.join("training-curve.csv");
    engine::io::write_atomic(&csv, t.csv().as_bytes()).map_err(|e| ReproError::io(&csv, e))?;
    Ok(vec![
        stem.with_extension("png"),
        stem.with_extension("svg"),
        csv,
    ])
}
