//! ED-Batch Fig. 6: inference throughput per workload, executor and hidden
//! size at each executor's best batch size, one panel per hidden size; and
//! ED-Batch's ratios over Cavs and DyNet against the averages §5.2 states
//! for the rows' device (`fig6.cpu.*` or `fig6.gpu.*`).

use figures::{BarSeries, Figure, GroupedBars, Panel, Scale};

use crate::error::Result;
use crate::items::Paper::EdBatch;
use crate::report::ctx::Ctx;
use crate::report::fmt::{range, ratio, sig, span, times};
use crate::report::noise::{self, Noisy, mean_of};
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{ReplayRow, RowSet, ascending, distinct};

use super::{Device, class, list, paper_workload, quick_note};

const EXECUTORS: [&str; 4] = ["dynet", "cavs", "edbatch-nolayout", "edbatch"];

/// The row of the best throughput over batch sizes.
pub fn best_row<'a>(rows: &'a RowSet, w: &str, h: usize, e: &str) -> Option<ReplayRow<'a>> {
    rows.replay()
        .filter(|r| r.config.workload == w && r.config.hidden == h && r.config.executor == e)
        .max_by(|a, b| {
            a.metrics
                .instances_per_s
                .total_cmp(&b.metrics.instances_per_s)
        })
}

/// Best throughput over batch sizes and the batch size giving it.
pub fn best(rows: &RowSet, w: &str, h: usize, e: &str) -> Option<(f64, usize)> {
    let r = best_row(rows, w, h, e)?;
    Some((r.metrics.instances_per_s, r.config.batch))
}

fn cell(b: Option<(f64, usize)>) -> String {
    b.map(|(v, bs)| format!("{} (b{bs})", sig(v, 4)))
        .unwrap_or_default()
}

/// The paper's statements for this item.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    statements(ctx, Device::Cpu)
}

/// The paper's statements, citing the values of `dev`'s ids.
fn statements(ctx: &Ctx, dev: Device) -> Result<Vec<String>> {
    let k = dev.key();
    Ok(vec![
        ctx.say(EdBatch, "fig6.setup")?,
        ctx.say_value(
            EdBatch,
            &format!("fig6.{k}.bilstm-tagger.edbatch_over_cavs"),
        )?,
        ctx.say_value(EdBatch, &format!("fig6.{k}.tree-lstm.edbatch_over_cavs"))?,
        ctx.say(EdBatch, "fig6.mv-rnn")?,
        ctx.say_value(EdBatch, &format!("fig6.{k}.lattices.edbatch_over_cavs.min"))?,
        ctx.say_value(EdBatch, "abstract.speedup.chains")?,
        ctx.say(EdBatch, "fig6.dynet")?,
        ctx.say_value(EdBatch, "fig6.lstmcell.layout_speedup")?,
        ctx.say(EdBatch, "fig6.hardware")?,
    ])
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let dev = Device::of(rows);
    let (key, pw) = (dev.key(), dev.paper_word());
    let workloads = distinct(rows.replay().map(|r| r.config.workload.clone()));
    let hiddens = ascending(rows.replay().map(|r| r.config.hidden));
    let executors: Vec<&str> = EXECUTORS
        .iter()
        .copied()
        .filter(|e| rows.replay().any(|r| r.config.executor == *e))
        .collect();
    let tput = |w: &str, h: usize, e: &str| best(rows, w, h, e).map(|b| b.0);
    // Each best-throughput ratio with the noise of the two rows behind it.
    let ratio_of = |w: &str, h: usize, a: &str, b: &str| -> Option<Noisy> {
        noise::ratio_of(best_row(rows, w, h, a)?, best_row(rows, w, h, b)?, |m| {
            m.instances_per_s
        })
    };

    let panels: Vec<Panel> = hiddens
        .iter()
        .filter(|h| {
            workloads
                .iter()
                .any(|w| executors.iter().any(|e| tput(w, **h, e).is_some()))
        })
        .map(|h| {
            let series = executors
                .iter()
                .map(|e| BarSeries {
                    name: e.to_string(),
                    values: workloads.iter().map(|w| tput(w, *h, e)).collect(),
                    paper: Vec::new(),
                })
                .collect();
            Panel::new(
                format!("hidden = {h}"),
                GroupedBars {
                    x_label: "workload".into(),
                    y_label: "instances / s at the best batch size (log scale)".into(),
                    y_scale: Scale::Log10,
                    categories: workloads.clone(),
                    series,
                    reference_lines: Vec::new(),
                },
            )
        })
        .collect();
    let cols = panels.len().clamp(1, 2);
    let fig = Figure::grid(
        format!(
            "ED-Batch Fig. 6: inference throughput on {}, best batch size per executor (higher is better)",
            list(&rows.devices())
        ),
        panels,
        cols,
        ctx.stamp.clone(),
    );
    let fig = fig
        .clone()
        .with_size(fig.width.max(1600) + 200 * cols as u32, fig.height + 100);
    ctx.figure(sec, "fig6", fig)?;

    // ED-Batch against Cavs on the very trace where Cavs does best: the two
    // rows were measured in the same rounds, so their ratio is paired.
    let same_batch = |w: &str, h: usize| -> Option<Noisy> {
        let c = best_row(rows, w, h, "cavs")?;
        let e = rows.replay().find(|r| {
            r.config.workload == w
                && r.config.hidden == h
                && r.config.executor == "edbatch"
                && r.config.batch == c.config.batch
        })?;
        noise::ratio_of(e, c, |m| m.instances_per_s)
    };
    let mut t = Table::new(
        "fig6",
        "Instances per second at the best batch size (bN), ED-Batch's ratios at those bests, and \
         ED-Batch over Cavs at Cavs' best batch size. ± is the spread of the per-round ratios \
         where both rows come from the same rounds on one trace (same batch size, order \
         rotated), else the sum of the two rows' spreads (docs/paper-repro.md, Noise).",
        &[
            "workload",
            "hidden",
            "dynet",
            "cavs",
            "edbatch-nolayout",
            "edbatch",
            "edbatch / cavs",
            "edbatch / dynet",
            "edbatch / nolayout",
            "edbatch / cavs at cavs' bN",
        ],
    );
    for w in &workloads {
        for h in &hiddens {
            if executors.iter().all(|e| tput(w, *h, e).is_none()) {
                continue;
            }
            let mut row = vec![w.clone(), h.to_string()];
            row.extend(EXECUTORS.iter().map(|e| cell(best(rows, w, *h, e))));
            for other in ["cavs", "dynet", "edbatch-nolayout"] {
                row.push(
                    ratio_of(w, *h, "edbatch", other)
                        .map(|r| r.cell())
                        .unwrap_or_default(),
                );
            }
            row.push(same_batch(w, *h).map(|r| r.cell()).unwrap_or_default());
            t.push(row);
        }
    }

    // Ratios per workload (mean over hidden sizes) against the paper's averages on our device.
    let ratios = |w: &str, other: &str| -> Vec<Noisy> {
        hiddens
            .iter()
            .filter_map(|h| ratio_of(w, *h, "edbatch", other))
            .collect()
    };
    let values = |v: &[Noisy]| v.iter().map(|r| r.value).collect::<Vec<f64>>();
    let mean_cell = |v: &[Noisy]| mean_of(v).map(|(m, _)| m.cell()).unwrap_or_default();
    let mut disagree: Vec<String> = Vec::new();
    let lattices = || {
        let lo = ctx.num(
            EdBatch,
            &format!("fig6.{key}.lattices.edbatch_over_cavs.min"),
        );
        let hi = ctx.num(
            EdBatch,
            &format!("fig6.{key}.lattices.edbatch_over_cavs.max"),
        );
        lo.zip(hi).map(|(a, b)| format!("{a:.2}–{b:.2}"))
    };
    let paper_of =
        |w: &str| -> Option<f64> { ctx.num(EdBatch, &format!("fig6.{key}.{w}.edbatch_over_cavs")) };
    let paper_ratio = |w: &str| -> String {
        match w {
            "lattice-lstm" | "lattice-gru" => lattices().unwrap_or_default(),
            "mv-rnn" => "≈ 1 (“close to Cavs”)".into(),
            _ => paper_of(w).map(ratio).unwrap_or_default(),
        }
    };
    let paper_col = format!("paper, {pw}: edbatch / cavs");
    let mut rt = Table::new(
        "fig6-ratios",
        format!(
            "ED-Batch over Cavs and DyNet per workload: mean (and range) over hidden sizes of the \
             best-throughput ratio on our {}; the paper's {pw} averages from §5.2. Class rows \
             average the workload means; the paper's class averages (abstract) mix CPU and GPU.",
            dev.word()
        ),
        &[
            "workload",
            "paper name",
            "class",
            "edbatch / cavs (mean)",
            "edbatch / cavs (range)",
            &paper_col,
            "edbatch / dynet (mean)",
            "edbatch / nolayout (mean)",
            "noise note",
        ],
    );
    let mut by_class: Vec<(&str, Vec<Noisy>)> =
        vec![("chains", vec![]), ("trees", vec![]), ("lattices", vec![])];
    for w in &workloads {
        let c = ratios(w, "cavs");
        let m = mean_of(&c);
        if let (Some((m, _)), Some(k)) = (m.as_ref(), class(w))
            && let Some(entry) = by_class.iter_mut().find(|(n, _)| *n == k)
        {
            entry.1.push(*m);
        }
        let warn = m.and_then(|(_, w)| w);
        if warn.is_some() {
            disagree.push(format!("{w} over hidden sizes"));
        }
        rt.push(vec![
            w.clone(),
            paper_workload(w).unwrap_or("").into(),
            class(w).unwrap_or("").into(),
            mean_cell(&c),
            range(&values(&c))
                .map(|(a, b)| span(a, b, 3))
                .unwrap_or_default(),
            paper_ratio(w),
            mean_cell(&ratios(w, "dynet")),
            mean_cell(&ratios(w, "edbatch-nolayout")),
            warn.unwrap_or_default(),
        ]);
    }
    for (k, v) in &by_class {
        let paper = ctx.num(EdBatch, &format!("abstract.speedup.{k}"));
        let warn = mean_of(v).and_then(|(_, w)| w);
        if warn.is_some() {
            disagree.push(format!("the {k} class"));
        }
        rt.push(vec![
            format!("all {k}"),
            String::new(),
            k.to_string(),
            mean_cell(v),
            range(&values(v))
                .map(|(a, b)| span(a, b, 3))
                .unwrap_or_default(),
            paper
                .map(|p| format!("{} (CPU+GPU)", ratio(p)))
                .unwrap_or_default(),
            String::new(),
            String::new(),
            warn.unwrap_or_default(),
        ]);
    }
    ctx.table(sec, t)?;
    ctx.table(sec, rt)?;

    sec.setup = format!(
        "Executors on `{}`: batch sizes {}, hidden sizes {}, record seed {}, {} timed \
         run(s) after a warm-up (median); edbatch = learned FSM + PQ-tree layouts, \
         edbatch-nolayout = the same FSM with DyNet-order layouts, dynet = agenda-updated over \
         primitive ops. Each bar is the best over batch sizes, as in the paper.",
        list(&rows.devices()),
        list(&ascending(rows.replay().map(|r| r.config.batch))),
        list(&hiddens),
        list(&ascending(rows.replay().map(|r| r.config.seed))),
        list(&ascending(rows.replay().map(|r| r.config.repeats))),
    );
    sec.paper = statements(ctx, dev)?;
    let class_mean = |k: &str| {
        by_class
            .iter()
            .find(|(n, _)| *n == k)
            .and_then(|(_, v)| mean_of(v))
            .map(|(m, _)| m)
    };
    let fmt_class = |k: &str, paper: String| {
        class_mean(k).map(|m| format!("{k} {} (paper, {pw}: {paper})", m.times()))
    };
    let pair = |a: &str, b: &str| {
        [a, b]
            .iter()
            .map(|w| paper_of(w).map(times).unwrap_or_else(|| "?".into()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let parts: Vec<String> = [
        fmt_class("chains", pair("bilstm-tagger", "lstm-nmt")),
        fmt_class("trees", pair("tree-lstm", "tree-gru") + "; MV-RNN ≈ 1"),
        fmt_class(
            "lattices",
            lattices().map_or_else(|| "?".into(), |s| s + "×"),
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let (mut wins, mut points) = (0, 0);
    for w in &workloads {
        for h in &hiddens {
            if let Some(r) = ratio_of(w, *h, "edbatch", "dynet") {
                points += 1;
                wins += usize::from(r.value > 1.0);
            }
        }
    }
    let layout: Vec<f64> = workloads
        .iter()
        .filter_map(|w| mean_of(&ratios(w, "edbatch-nolayout")).map(|(m, _)| m.value))
        .collect();
    sec.reading = format!(
        "ED-Batch over Cavs on our {}, mean over hidden sizes: {}. ED-Batch beats DyNet at \
         {wins}/{points} workload × hidden points (the paper: in all cases). Layout ablation \
         (edbatch / edbatch-nolayout): {} across workloads (the paper's LSTMCell: {}).",
        dev.word(),
        parts.join("; "),
        range(&layout)
            .map(|(a, b)| format!("{}×", span(a, b, 3)))
            .unwrap_or_else(|| "n/a".into()),
        ctx.num(EdBatch, "fig6.lstmcell.layout_speedup")
            .map_or_else(|| "?".into(), times),
    );
    sec.reading += &if disagree.is_empty() {
        " Every average above is of ratios that agree within their noise.".to_string()
    } else {
        format!(
            " Averages of ratios that disagree by more than their noise (see the noise note \
             column; read the per-hidden rows instead): {}.",
            disagree.join(", ")
        )
    };
    if let Some(n) = noise::cpu_note(rows.replay().map(|r| r.metrics)) {
        sec.notes.push(n);
    }
    let missing: Vec<String> = workloads
        .iter()
        .filter_map(|w| {
            let hs: Vec<&usize> = hiddens
                .iter()
                .filter(|h| executors.iter().all(|e| tput(w, **h, e).is_none()))
                .collect();
            (!hs.is_empty()).then(|| format!("{w} at hidden {}", list(&hs)))
        })
        .collect();
    if !missing.is_empty() {
        sec.notes.push(format!(
            "No bars where the spec has no run (a grey cross in the figure): {} (left out of \
             the grid; see the spec's description).",
            missing.join("; ")
        ));
    }
    sec.notes.push(format!(
        "The paper's per-bar throughputs are not published as numbers; only the ratios its \
         text states are compared. The paper ran a 28-core Xeon E2590 and a V100 GPU; these \
         rows come from the {} of the machine named in the header, so absolute throughputs \
         differ.",
        dev.word()
    ));
    if let Some(q) = quick_note(
        rows,
        &format!(
            "batch sizes {}, hidden {}",
            list(&ascending(rows.replay().map(|r| r.config.batch))),
            list(&hiddens)
        ),
    ) {
        sec.notes.push(q);
    }
    Ok(())
}
