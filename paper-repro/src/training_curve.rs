//! `paper-repro training-curve`: the learning curve of an `engine train
//! --json` report (train loss per sample, dev accuracy at the roots and over
//! all nodes, each epoch, with the dev split's majority-class baselines), as
//! a figure (PNG + SVG) and a CSV. Measuring (`engine train`, or
//! `python -m batchlab_torch.examples.train_sst --out`) and drawing are
//! separate, so a committed report redraws with one command. Given several
//! reports it compares the runs: train loss and dev root accuracy by epoch
//! and against cumulative training seconds, one line per run.

use std::path::{Path, PathBuf};

use figures::{Figure, LineChart, LineSeries, Panel, RefLine, Scale, Stamp};
use serde::Deserialize;

use crate::error::{ReproError, Result};
use crate::report::table::Table;

/// `paper-repro training-curve` arguments.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct CurveArgs {
    /// A report `engine train --json` printed (or `train_sst --out` wrote);
    /// repeat the flag to compare several runs in one figure.
    #[arg(long, value_name = "FILE", required = true)]
    pub report: Vec<PathBuf>,
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
    let reports = a
        .report
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>>>()?;
    let stamp = Stamp::new(command, experiments::provenance::workspace_revision());
    let (fig, table) = match reports.as_slice() {
        [one] => (one_figure(one, stamp), one_table(one)),
        _ => several(&reports, &a.report, stamp),
    };
    std::fs::create_dir_all(out).map_err(|e| ReproError::io(out, e))?;
    let stem = out.join("training-curve");
    figures::render(&fig, &stem).map_err(|source| ReproError::Figure {
        stem: "training-curve".into(),
        source,
    })?;
    let csv = out.join("training-curve.csv");
    engine::io::write_atomic(&csv, table.csv().as_bytes()).map_err(|e| ReproError::io(&csv, e))?;
    Ok(vec![
        stem.with_extension("png"),
        stem.with_extension("svg"),
        csv,
    ])
}

/// One report, checked to have epochs.
fn read(path: &Path) -> Result<TrainReport> {
    let text = engine::io::read_to_string(path).map_err(|e| ReproError::io(path, e))?;
    let r: TrainReport = serde_json::from_str(&text).map_err(|e| {
        ReproError::Usage(format!(
            "{}: not an `engine train --json` report: {e}",
            path.display()
        ))
    })?;
    if r.epochs.is_empty() {
        return Err(ReproError::Usage(format!(
            "{}: the report has no epochs",
            path.display()
        )));
    }
    Ok(r)
}

fn pct(v: Option<f64>) -> Option<f64> {
    v.map(|v| 100.0 * v)
}

/// A line chart; series with their own x leave `x` empty.
fn chart(x_label: &str, y_label: &str, x: Vec<f64>, series: Vec<LineSeries>) -> LineChart {
    LineChart {
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x,
        series,
        reference_lines: Vec::new(),
    }
}

/// One report: train loss, and dev accuracy at the roots and all nodes
/// with the majority-class baselines, by epoch.
fn one_figure(r: &TrainReport, stamp: Stamp) -> Figure {
    let x: Vec<f64> = r.epochs.iter().map(|e| f64::from(e.epoch)).collect();
    let loss = Panel::new(
        "train loss per sample",
        chart(
            "epoch",
            "mean loss per sample",
            x.clone(),
            vec![LineSeries::new(
                "train loss",
                r.epochs.iter().map(|e| e.train_loss),
            )],
        ),
    );
    let mut refs = Vec::new();
    if let Some(m) = &r.dev_majority {
        refs.push(RefLine::new(100.0 * m.root, "majority class, roots"));
        refs.push(RefLine::new(100.0 * m.node, "majority class, all nodes"));
    }
    let series = vec![
        LineSeries {
            name: "roots".into(),
            y: r.epochs.iter().map(|e| pct(e.dev_accuracy)).collect(),
            x: None,
        },
        LineSeries {
            name: "all nodes".into(),
            y: r.epochs.iter().map(|e| pct(e.dev_node_accuracy)).collect(),
            x: None,
        },
    ];
    let acc = Panel::new(
        format!("accuracy on {}", r.dev.as_deref().unwrap_or("no dev split")),
        LineChart {
            reference_lines: refs,
            ..chart("epoch", "accuracy (%)", x, series)
        },
    );
    Figure::grid(
        format!(
            "engine train: {} ({} executor, batch {}, hidden {})",
            r.workload, r.executor, r.batch, r.hidden
        ),
        vec![loss, acc],
        2,
        stamp,
    )
}

fn one_table(r: &TrainReport) -> Table {
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
        t.push(vec![
            e.epoch.to_string(),
            format!("{:.4}", e.train_loss),
            opt(e.dev_accuracy),
            opt(e.dev_node_accuracy),
            format!("{:.2}", e.seconds),
        ]);
    }
    t
}

fn opt(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.4}")).unwrap_or_default()
}

/// Several reports compared: train loss and dev root accuracy by epoch and
/// against cumulative training seconds (each run's own x), one line per
/// run named by its executor, and one CSV of every run's epochs.
fn several(reports: &[TrainReport], paths: &[PathBuf], stamp: Stamp) -> (Figure, Table) {
    let names = run_names(reports, paths);
    let epochs =
        |r: &TrainReport| -> Vec<f64> { r.epochs.iter().map(|e| f64::from(e.epoch)).collect() };
    let elapsed = |r: &TrainReport| -> Vec<f64> { cumulative(r).collect() };
    let loss = |x: &dyn Fn(&TrainReport) -> Vec<f64>| -> Vec<LineSeries> {
        reports
            .iter()
            .zip(&names)
            .map(|(r, n)| LineSeries::new(n, r.epochs.iter().map(|e| e.train_loss)).at(x(r)))
            .collect()
    };
    let root = |x: &dyn Fn(&TrainReport) -> Vec<f64>| -> Vec<LineSeries> {
        reports
            .iter()
            .zip(&names)
            .map(|(r, n)| LineSeries {
                name: n.clone(),
                y: r.epochs.iter().map(|e| pct(e.dev_accuracy)).collect(),
                x: Some(x(r)),
            })
            .collect()
    };
    let time = "cumulative training seconds";
    let mut panels = vec![
        Panel::new(
            "train loss per sample, by epoch",
            chart("epoch", "mean loss per sample", Vec::new(), loss(&epochs)),
        ),
        Panel::new(
            "train loss per sample, against training time",
            chart(time, "mean loss per sample", Vec::new(), loss(&elapsed)),
        ),
    ];
    // Accuracy panels only where some run was scored on a dev split.
    if reports
        .iter()
        .flat_map(|r| &r.epochs)
        .any(|e| e.dev_accuracy.is_some())
    {
        let dev = common(reports, |r| r.dev.clone()).flatten();
        let dev = dev.as_deref().unwrap_or("each run's dev split");
        // The baseline only when it is the same for every run.
        let refs: Vec<RefLine> = common(reports, |r| {
            r.dev_majority.as_ref().map(|m| m.root.to_bits())
        })
        .flatten()
        .map(|bits| RefLine::new(100.0 * f64::from_bits(bits), "majority class, roots"))
        .into_iter()
        .collect();
        let acc = |x_label: &str, series: Vec<LineSeries>| LineChart {
            reference_lines: refs.clone(),
            ..chart(x_label, "root accuracy (%)", Vec::new(), series)
        };
        panels.insert(
            1,
            Panel::new(
                format!("root accuracy on {dev}, by epoch"),
                acc("epoch", root(&epochs)),
            ),
        );
        panels.push(Panel::new(
            format!("root accuracy on {dev}, against training time"),
            acc(time, root(&elapsed)),
        ));
    }
    let workloads =
        common(reports, |r| r.workload.clone()).unwrap_or_else(|| "several workloads".into());
    let mut title = format!("training curves: {workloads}, {} runs", reports.len());
    if let (Some(b), Some(h)) = (common(reports, |r| r.batch), common(reports, |r| r.hidden)) {
        title.push_str(&format!(" (batch {b}, hidden {h})"));
    }
    let fig = Figure::grid(title, panels, 2, stamp);
    let mut t = Table::new(
        "training-curve",
        "",
        &[
            "report",
            "run",
            "epoch",
            "train loss per sample",
            "dev accuracy roots",
            "dev accuracy all nodes",
            "seconds",
            "cumulative seconds",
        ],
    );
    for ((r, name), path) in reports.iter().zip(&names).zip(paths) {
        for (e, total) in r.epochs.iter().zip(cumulative(r)) {
            t.push(vec![
                path.display().to_string(),
                name.clone(),
                e.epoch.to_string(),
                format!("{:.4}", e.train_loss),
                opt(e.dev_accuracy),
                opt(e.dev_node_accuracy),
                format!("{:.2}", e.seconds),
                format!("{total:.2}"),
            ]);
        }
    }
    (fig, t)
}

/// The training seconds up to the end of each epoch.
fn cumulative(r: &TrainReport) -> impl Iterator<Item = f64> + '_ {
    r.epochs.iter().scan(0.0, |sum, e| {
        *sum += e.seconds;
        Some(*sum)
    })
}

/// The value every report has, if they agree.
fn common<T: PartialEq>(reports: &[TrainReport], f: impl Fn(&TrainReport) -> T) -> Option<T> {
    let mut values = reports.iter().map(&f);
    let first = values.next()?;
    values.all(|v| v == first).then_some(first)
}

/// Each run's legend name: its executor, with the batch, hidden size or
/// workload where the runs differ in them, and its file where that still
/// leaves two runs alike (the figure's series names must differ).
fn run_names(reports: &[TrainReport], paths: &[PathBuf]) -> Vec<String> {
    let differ = |f: &dyn Fn(&TrainReport) -> String| common(reports, f).is_none();
    let (workload, batch, hidden) = (
        differ(&|r| r.workload.clone()),
        differ(&|r| r.batch.to_string()),
        differ(&|r| r.hidden.to_string()),
    );
    let mut names: Vec<String> = reports
        .iter()
        .map(|r| {
            let mut n = r.executor.clone();
            if workload {
                n = format!("{} {n}", r.workload);
            }
            if batch {
                n.push_str(&format!(", batch {}", r.batch));
            }
            if hidden {
                n.push_str(&format!(", hidden {}", r.hidden));
            }
            n
        })
        .collect();
    let alike = |names: &[String], i: usize| names.iter().filter(|n| **n == names[i]).count() > 1;
    let clash: Vec<bool> = (0..names.len()).map(|i| alike(&names, i)).collect();
    for (i, n) in names.iter_mut().enumerate() {
        if clash[i] {
            n.push_str(&format!(" ({})", paths[i].display()));
        }
    }
    let clash: Vec<bool> = (0..names.len()).map(|i| alike(&names, i)).collect();
    for (i, n) in names.iter_mut().enumerate() {
        if clash[i] {
            n.push_str(&format!(" #{}", i + 1));
        }
    }
    names
}
