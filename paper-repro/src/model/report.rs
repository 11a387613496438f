//! The model report: REPORT.md, `model-steps.{png,svg}` and CSV tables from
//! the rows and the analysis (no measuring).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use engine::modeldir::ModelDir;
use figures::{BarSeries, Figure, GroupedBars, Panel, Scale, Stamp};

use super::{Analysis, BATCHLAB, BUILTIN, Row};
use crate::error::{ReproError, Result};
use crate::report::table::Table;

/// A system's rounds in one mode.
#[derive(Debug, Clone)]
pub struct Summary {
    /// `batchlab` or `pytorch`.
    pub family: String,
    /// The system.
    pub system: String,
    /// Median, least and most wall seconds over the rounds.
    pub median: f64,
    /// Least.
    pub min: f64,
    /// Most.
    pub max: f64,
    /// Median CPU seconds.
    pub cpu: Option<f64>,
    /// Median minor page faults per mini-batch.
    pub faults: Option<f64>,
    /// Batches.
    pub batches: Option<u64>,
    /// A policy file's misses, of its last round.
    pub misses: Option<u64>,
    /// bt.run: its deferred decisions, of its last round.
    pub deferred: Option<u64>,
    /// The loss of its last round.
    pub loss: Option<f64>,
    /// bt.run's median split (discover, schedule, execute).
    pub split: Option<[f64; 3]>,
    /// Rounds measured, and the errors of the others.
    pub rounds: usize,
    /// The first error, if a round failed.
    pub error: Option<String>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Per mode, each system's summary, in the order first measured.
pub fn summarise(rows: &[Row]) -> BTreeMap<String, Vec<Summary>> {
    let mut out: BTreeMap<String, Vec<Summary>> = BTreeMap::new();
    let mut order: Vec<(String, String, String)> = Vec::new();
    for r in rows {
        let k = (r.mode.clone(), r.family.clone(), r.system.clone());
        if !order.contains(&k) {
            order.push(k);
        }
    }
    order.sort_by_key(|(m, _, _)| m.clone());
    for (mode, family, system) in order {
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.mode == mode && r.system == system && r.family == family)
            .collect();
        let mut t: Vec<f64> = mine.iter().filter_map(|r| r.total_s).collect();
        let mut c: Vec<f64> = mine.iter().filter_map(|r| r.cpu_s).collect();
        let mut f: Vec<f64> = mine.iter().filter_map(|r| r.faults).collect();
        let splits: Vec<[f64; 3]> = mine.iter().filter_map(|r| r.split).collect();
        let split = (!splits.is_empty()).then(|| {
            let mut s = [0.0; 3];
            for (i, x) in s.iter_mut().enumerate() {
                *x = median(&mut splits.iter().map(|v| v[i]).collect::<Vec<_>>());
            }
            s
        });
        let (min, max) = t
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        out.entry(mode.clone()).or_default().push(Summary {
            family,
            system,
            median: median(&mut t),
            min,
            max,
            cpu: (!c.is_empty()).then(|| median(&mut c)),
            faults: (!f.is_empty()).then(|| median(&mut f)),
            batches: mine.iter().rev().find_map(|r| r.batches),
            misses: mine.iter().rev().find_map(|r| r.misses),
            deferred: mine.iter().rev().find_map(|r| r.deferred),
            loss: mine.iter().rev().find_map(|r| r.loss),
            split,
            rounds: t.len(),
            error: mine.iter().find_map(|r| r.error.clone()),
        });
    }
    out
}

/// `a ÷ b` per round (same round, both measured), as (median, least, most).
pub fn ratio(rows: &[Row], mode: &str, a: &str, b: &str) -> Option<(f64, f64, f64)> {
    let at = |sys: &str, round: usize| {
        rows.iter()
            .find(|r| r.mode == mode && r.system == sys && r.round == round)
            .and_then(|r| r.total_s)
    };
    let rounds: usize = rows.iter().map(|r| r.round + 1).max().unwrap_or(0);
    let mut v: Vec<f64> = (0..rounds)
        .filter_map(|i| Some(at(a, i)? / at(b, i)?))
        .collect();
    if v.is_empty() {
        return None;
    }
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(x, y), &r| {
            (x.min(r), y.max(r))
        });
    Some((median(&mut v), lo, hi))
}

fn ms(s: f64) -> String {
    if s.is_finite() {
        format!("{:.2}", s * 1e3)
    } else {
        "—".into()
    }
}

fn show_ratio(r: Option<(f64, f64, f64)>) -> String {
    r.map_or("—".into(), |(m, lo, hi)| {
        format!("{m:.2}× ({lo:.2}–{hi:.2})")
    })
}

/// Writes REPORT.md, the figure and the CSV tables into `out`; returns
/// REPORT.md's path.
pub fn write(
    dir: &ModelDir,
    analysis: &Analysis,
    rows: &[Row],
    out: &Path,
    command: &str,
) -> Result<PathBuf> {
    let m = &dir.manifest;
    let g = &dir.trace.graph;
    let expected_loss = super::recorded_loss(dir);
    let mut md = String::new();
    let _ = writeln!(md, "# Model report: {}\n", m.name);
    let _ = writeln!(
        md,
        "Model folder `{}`: {} nodes, {} samples, {} roles, recorded with {}. Generated by `{command}`.\n",
        dir.path.display(),
        g.len(),
        m.instances,
        m.roles.len(),
        m.recorded_with
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut tables = Vec::new();
    // Batches.
    let mut t = Table::new(
        "model-batches",
        format!(
            "Batches per policy on the recorded trace: the A.3 lower bound is {}, the certified bound {} (`search::bound`); the FSM is `search train`'s, encoding {}.",
            analysis.a3, analysis.certified, analysis.fsm_encoding
        ),
        &["policy", "batches", "÷ certified bound"],
    );
    for (p, b) in &analysis.policies {
        t.push(vec![
            p.clone(),
            b.to_string(),
            format!("{:.3}", *b as f64 / analysis.certified.max(1) as f64),
        ]);
    }
    tables.push(t);
    // Planner.
    let mut t = Table::new(
        "model-planner",
        "The planner's layouts per cell (batch 8): memory kernels and bytes copied per batch, planned (PQ-tree) against DyNet's declaration order.",
        &[
            "cell",
            "ops",
            "copy bytes planned",
            "copy bytes DyNet order",
            "memory kernels planned",
            "memory kernels DyNet order",
        ],
    );
    for (c, ops, pb, bb, pk, bk) in &analysis.planner {
        t.push(vec![
            c.clone(),
            ops.to_string(),
            pb.to_string(),
            bb.to_string(),
            pk.to_string(),
            bk.to_string(),
        ]);
    }
    tables.push(t);
    let sums = summarise(rows);
    let has_eager = rows.iter().any(|r| r.system == "eager");
    for (mode, list) in &sums {
        let mut t = Table::new(
            format!("model-{mode}"),
            format!(
                "{} per mini-batch of {} samples: median over {} rounds (least–most), process CPU time and page faults beside; each system in its own process, {} timed mini-batches each, the order rotated every round; ratios per round against the eager loop. A loss ✓ equals the recording's within 1e-4.",
                if mode == "training" {
                    "Training steps"
                } else {
                    "Inference"
                },
                m.instances,
                list.iter().map(|s| s.rounds).max().unwrap_or(0),
                rows.first().map_or(0, |r| r.provenance.repeats)
            ),
            &[
                "system",
                "family",
                "ms (least–most)",
                "CPU ms",
                "page faults",
                "samples/s",
                "batches",
                "÷ eager time",
                "loss",
                "bt.run discover / schedule / execute ms",
            ],
        );
        for s in list {
            let loss = match (s.loss, expected_loss) {
                // The built-in trace runs on its own seeded weights.
                (Some(l), _) if s.family == "built-in" => format!("{l:.4}"),
                (Some(l), Some(e)) if super::same_as_recorded(l, e) => {
                    format!("{l:.4} ✓")
                }
                (Some(l), Some(_)) => format!("{l:.4} ✗"),
                (Some(l), None) => format!("{l:.4}"),
                _ => "—".into(),
            };
            t.push(vec![
                s.system.clone(),
                s.family.clone(),
                match &s.error {
                    Some(e) if s.rounds == 0 => format!("failed: {e}"),
                    _ => format!("{} ({}–{})", ms(s.median), ms(s.min), ms(s.max)),
                },
                s.cpu.map_or("—".into(), ms),
                s.faults.map_or("—".into(), |f| format!("{f:.0}")),
                if s.median.is_finite() {
                    format!("{:.0}", m.instances as f64 / s.median)
                } else {
                    "—".into()
                },
                s.batches.map_or("—".into(), |b| b.to_string()),
                if has_eager {
                    show_ratio(ratio(rows, mode, &s.system, "eager"))
                } else {
                    "—".into()
                },
                loss,
                s.split.map_or(String::new(), |[d, sc, e]| {
                    format!("{} / {} / {}", ms(d), ms(sc), ms(e))
                }),
            ]);
        }
        tables.push(t);
    }
    if let Some(t) = imported_table(analysis, rows, &sums) {
        tables.push(t);
    }
    for t in &tables {
        let _ = writeln!(md, "## {}\n\n{}\n\n{}", t.stem, t.caption, t.markdown());
        let p = out.join(format!("{}.csv", t.stem));
        engine::io::write_atomic(&p, t.csv().as_bytes()).map_err(|e| ReproError::io(&p, e))?;
    }
    md += &readings(rows, &sums, g.len());
    if !has_eager {
        md += "\nNo PyTorch rows: give `--torch FILE.py:FUNC` (a setup returning the model, its cells and its samples, docs/torch.md) to time the user's own loop and `bt.run` beside batchlab's executors.\n";
    }
    // Figure.
    let mut panels = Vec::new();
    for (mode, list) in &sums {
        let ok: Vec<&Summary> = list.iter().filter(|s| s.median.is_finite()).collect();
        if ok.is_empty() {
            continue;
        }
        panels.push(Panel::new(
            format!("{mode}: ms per mini-batch (median)"),
            GroupedBars {
                x_label: "system".into(),
                y_label: "ms per mini-batch".into(),
                y_scale: Scale::Log10,
                categories: ok.iter().map(|s| s.system.clone()).collect(),
                series: vec![BarSeries::new(
                    mode.clone(),
                    ok.iter().map(|s| s.median * 1e3),
                )],
                reference_lines: Vec::new(),
            },
        ));
    }
    if !panels.is_empty() {
        let n = panels.len();
        let fig = Figure::grid(
            format!("{}: batchlab's executors and PyTorch, one thread", m.name),
            panels,
            n,
            Stamp::new(command, experiments::provenance::workspace_revision()),
        );
        figures::render(&fig, &out.join("model-steps")).map_err(|e| ReproError::Figure {
            stem: "model-steps".into(),
            source: e,
        })?;
        md += "\n![steps](model-steps.png)\n";
    }
    let path = out.join("REPORT.md");
    engine::io::write_atomic(&path, md.as_bytes()).map_err(|e| ReproError::io(&path, e))?;
    Ok(path)
}

/// `--builtin`: each batchlab executor on the imported model beside the same
/// executor on the built-in trace, per mode.
fn imported_table(
    analysis: &Analysis,
    rows: &[Row],
    sums: &BTreeMap<String, Vec<Summary>>,
) -> Option<Table> {
    let b = analysis.builtin.as_ref()?;
    let fsm = analysis
        .policies
        .iter()
        .find(|(p, _)| p.starts_with("fsm"))
        .map_or(0, |p| p.1);
    let [n, e, i, ty] = b.imported;
    let mut t = Table::new(
        "model-imported",
        format!(
            "batchlab's executors on the imported model ÷ the same executors on the built-in trace `{}` (per round, median and least–most). The built-in: {} nodes, {} edges, {} instances, {} types; the folder: {n} nodes, {e} edges, {i} instances, {ty} types — {}. Each has its own FSM (built-in {} batches, imported {fsm}) and its own layouts; the built-in runs on its own seeded weights.",
            b.trace,
            b.nodes,
            b.edges,
            b.instances,
            b.types,
            if b.same_shape() {
                "the same structure"
            } else {
                "a different structure, so the ratio compares different graphs"
            },
            b.fsm_batches,
        ),
        &[
            "mode",
            "executor",
            "imported ms",
            "built-in ms",
            "imported ÷ built-in",
            "batches imported",
            "batches built-in",
        ],
    );
    for (mode, list) in sums {
        for name in BATCHLAB.iter().filter(|n| **n != "reference") {
            let twin = format!("{BUILTIN}{name}");
            let find = |sys: &str| list.iter().find(|s| s.system == sys);
            let (Some(mine), Some(theirs)) = (find(name), find(&twin)) else {
                continue;
            };
            t.push(vec![
                mode.clone(),
                name.to_string(),
                ms(mine.median),
                ms(theirs.median),
                show_ratio(ratio(rows, mode, name, &twin)),
                mine.batches.map_or("—".into(), |x| x.to_string()),
                theirs.batches.map_or("—".into(), |x| x.to_string()),
            ]);
        }
    }
    Some(t)
}

/// The readings: what the rows say about the engine and the policy.
/// PyTorch rows that time a forward alone: bt.run's discovery of new
/// samples, and its floor (the user's forward with the cells stubbed out).
pub const FORWARD_ONLY: [&str; 2] = ["floor", "discover"];

/// bt.run's systems, with each sample's graph kept between mini-batches and
/// without (every mini-batch new sample objects).
const BT_RUN: [&str; 5] = [
    "bt-depth",
    "bt-agenda",
    "bt-fsm",
    "bt-depth-nocache",
    "bt-fsm-nocache",
];

fn readings(rows: &[Row], sums: &BTreeMap<String, Vec<Summary>>, nodes: usize) -> String {
    let mut md = String::from("\n## Readings\n\n");
    for (mode, list) in sums {
        let best = |fam: &str| {
            list.iter()
                .filter(|s| {
                    s.family == fam
                        && s.median.is_finite()
                        && s.system != "eager"
                        && !FORWARD_ONLY.contains(&s.system.as_str())
                })
                .min_by(|a, b| a.median.total_cmp(&b.median))
        };
        let twins: Vec<String> = BATCHLAB
            .iter()
            .filter_map(|n| {
                let r = ratio(rows, mode, n, &format!("{BUILTIN}{n}"))?;
                Some(format!("`{n}` {}", show_ratio(Some(r))))
            })
            .collect();
        if !twins.is_empty() {
            let _ = writeln!(
                md,
                "- {mode}: batchlab on the imported model ÷ the same model built in: {}.",
                twins.join(", ")
            );
        }
        let (Some(bl), Some(pt)) = (best("batchlab"), best("pytorch")) else {
            continue;
        };
        let _ = writeln!(
            md,
            "- {mode}: batchlab's fastest executor (`{}`) ÷ the fastest PyTorch run (`{}`): {} (time ratio; below 1 batchlab is faster).",
            bl.system,
            pt.system,
            show_ratio(ratio(rows, mode, &bl.system, &pt.system))
        );
        for sch in BT_RUN {
            if let Some(r) = ratio(rows, mode, sch, "eager") {
                // r is time ÷ the eager loop's: (median, least, most).
                let (word, med, lo, hi) = if r.0 <= 1.0 {
                    ("faster", 1.0 / r.0, 1.0 / r.2, 1.0 / r.1)
                } else {
                    ("slower", r.0, r.1, r.2)
                };
                let _ = writeln!(
                    md,
                    "- {mode}: `{sch}` is {med:.1}× {word} than the user's loop ({lo:.1}–{hi:.1} over the rounds).",
                );
            }
        }
        if let Some(r) = ratio(rows, mode, "bt-fsm", "bt-depth") {
            let b = |s: &str| list.iter().find(|x| x.system == s).and_then(|x| x.batches);
            let _ = writeln!(
                md,
                "- {mode}: the policy inside PyTorch: `bt-fsm` ÷ `bt-depth` = {} in time, {} ÷ {} in batches.",
                show_ratio(Some(r)),
                b("bt-fsm").map_or("—".into(), |x| x.to_string()),
                b("bt-depth").map_or("—".into(), |x| x.to_string())
            );
        }
        let get = |s: &str| list.iter().find(|x| x.system == s);
        if let (Some(bt), Some(own)) = (get("bt-fsm"), get("policy:fsm"))
            && let (Some(m), Some(b)) = (bt.misses, bt.batches)
        {
            let _ = writeln!(
                md,
                "- {mode}: the recording's FSM inside `bt.run`: {b} batches, {m} policy misses{}; in batchlab's `policy:fsm` on the folder: {} batches, {} misses.",
                bt.deferred
                    .filter(|&d| d > 0)
                    .map_or(String::new(), |d| format!(
                        " ({d} decisions the policy defers to its fallback)"
                    )),
                own.batches.map_or("—".into(), |x| x.to_string()),
                own.misses.map_or("—".into(), |x| x.to_string()),
            );
        }
        let med = |sys: &str| {
            list.iter()
                .find(|x| x.system == sys)
                .map(|x| x.median)
                .filter(|m| m.is_finite())
        };
        if let (Some(d), Some(f)) = (ratio(rows, mode, "discover", "floor"), med("floor")) {
            let per = med("discover").map_or(String::new(), |disc| {
                format!(
                    "; {:.2} µs per node beyond the floor ({nodes} nodes)",
                    (disc - f) / nodes.max(1) as f64 * 1e6
                )
            });
            let _ = writeln!(
                md,
                "- {mode}: bt.run's discovery of new samples ÷ its floor (the user's own forward with the cells stubbed out, {} ms): {}{per}; discovery ÷ the eager loop: {}.",
                ms(f),
                show_ratio(Some(d)),
                show_ratio(ratio(rows, mode, "discover", "eager"))
            );
        }
        for base in list.iter().filter(|s| {
            s.family == "pytorch"
                && !s.system.starts_with("bt-")
                && s.system != "eager"
                && !FORWARD_ONLY.contains(&s.system.as_str())
        }) {
            for sch in ["bt-depth", "bt-fsm", "bt-fsm-nocache"] {
                if let Some(r) = ratio(rows, mode, sch, &base.system) {
                    let _ = writeln!(
                        md,
                        "- {mode}: `{sch}` ÷ the hand-written `{}`: {} (bt.run's generic machinery against the same model batched by hand).",
                        base.system,
                        show_ratio(Some(r))
                    );
                }
            }
        }
    }
    md
}
