//! VPPS (Fig. 8, 11, 12): the persistent-kernel executor `vpps` on the GPU.
//!
//! - `vpps`: inference at batch 1–128, `vpps` (its forward-only script)
//!   beside the CUDA replay of `dynet`, `cavs` and `edbatch`: instances per
//!   second end to end, and the GPU time alone (CUDA events around the
//!   run's kernels), whose ratio is what keeping the weights on chip buys.
//! - `vpps-train`: training steps (forward and backward in one kernel),
//!   checked against the CPU reference. The CUDA replay of the other
//!   executors runs forward only, so the paper's VPPS / DyNet training ratio
//!   has no measured counterpart yet; the reading says so.

use experiments::rows::ReplayMetrics;
use figures::{Figure, LineSeries};

use crate::error::Result;
use crate::items::Paper::Vpps;
use crate::report::ctx::Ctx;
use crate::report::fmt::{ms, opt, ratio, sig, times};
use crate::report::noise;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{ReplayRow, RowSet, ascending, distinct};

use super::{Device, list, throughput_panel};

/// The published VPPS / DyNet speed-up for a workload and batch size.
fn paper_id(w: &str, b: usize) -> Option<String> {
    match (w, b) {
        ("tree-lstm", 2 | 128) => Some(format!("fig8.tree-lstm.b{b}.vpps_over_dynet")),
        ("bilstm-tagger", 2) => Some("fig12.bilstm.b2.vpps_over_dynet".into()),
        _ => None,
    }
}

/// The paper's statements for both items.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say_value(Vpps, "fig8.tree-lstm.b2.vpps_over_dynet")?,
        ctx.say_value(Vpps, "fig12.bilstm.b2.vpps_over_dynet")?,
        ctx.say(Vpps, "fig8.setting")?,
        ctx.say(Vpps, "hardware")?,
    ])
}

/// One row by workload, batch and executor.
fn finder<'a>(rows: &'a RowSet) -> impl Fn(&str, usize, &str) -> Option<ReplayRow<'a>> {
    move |w: &str, b: usize, e: &str| {
        rows.replay().find(|r| {
            let c = r.config;
            c.workload == w && c.batch == b && c.executor == e
        })
    }
}

/// The grid both items measure, for their setup line.
fn grid(rows: &RowSet) -> String {
    format!(
        "on {} at batch sizes {}, hidden {}, on {}; {} timed run(s) after a warm-up",
        list(&distinct(rows.replay().map(|r| &r.config.workload))),
        list(&ascending(rows.replay().map(|r| r.config.batch))),
        list(&ascending(rows.replay().map(|r| r.config.hidden))),
        list(&rows.devices()),
        list(&ascending(rows.replay().map(|r| r.config.repeats))),
    )
}

/// Inference: vpps beside the CUDA replay of the other executors.
pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let dev = Device::of(rows).word();
    let workloads = distinct(rows.replay().map(|r| r.config.workload.clone()));
    let executors = distinct(rows.replay().map(|r| r.config.executor.clone()));
    let batches = ascending(rows.replay().map(|r| r.config.batch));
    let hiddens = ascending(rows.replay().map(|r| r.config.hidden));
    let row = finder(rows);
    let tput = |w: &str, b: usize, e: &str| row(w, b, e).map(|r| r.metrics.instances_per_s);
    let gpu = |w: &str, b: usize, e: &str| row(w, b, e).and_then(|r| r.metrics.device_s);
    let mut panels = Vec::new();
    let mut t = Table::new(
        "vpps",
        format!(
            "Inference on our {dev}: instances per second per executor; *vpps / dynet* end to \
             end (with both rows' noise) and *GPU dynet / vpps*, the ratio of the GPU time \
             between the first and last kernel (what keeping the weights on chip buys, before \
             the host's script compile and transfers); VPPS's own speed-up over DyNet where \
             the paper states one (training)."
        ),
        &[
            "workload",
            "batch",
            "vpps",
            "dynet",
            "cavs",
            "edbatch",
            "vpps / dynet",
            "GPU dynet / vpps",
            "vpps / best other",
            "paper: VPPS / DyNet",
        ],
    );
    let mut at2 = Vec::new();
    for w in &workloads {
        let series: Vec<LineSeries> = executors
            .iter()
            .map(|e| LineSeries {
                name: e.clone(),
                x: None,
                y: batches.iter().map(|b| tput(w, *b, e)).collect(),
            })
            .filter(|s| s.y.iter().any(Option::is_some))
            .collect();
        if series.is_empty() {
            continue;
        }
        for &b in &batches {
            let vs = row(w, b, "vpps")
                .zip(row(w, b, "dynet"))
                .and_then(|(v, d)| noise::ratio_of(v, d, |m| m.instances_per_s));
            let kernel = gpu(w, b, "dynet")
                .zip(gpu(w, b, "vpps"))
                .map(|(d, v)| d / v);
            let best = ["dynet", "cavs", "edbatch"]
                .iter()
                .filter_map(|e| tput(w, b, e))
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            let over_best = tput(w, b, "vpps").zip(best).map(|(v, o)| v / o);
            let paper = paper_id(w, b).and_then(|id| ctx.num(Vpps, &id));
            if b == 2
                && let (Some(o), Some(k)) = (vs.as_ref(), kernel)
            {
                at2.push(format!(
                    "{w} {} end to end, {}× in GPU time{}",
                    o.times(),
                    ratio(k),
                    paper
                        .map(|p| format!(" (VPPS, training: {})", times(p)))
                        .unwrap_or_default()
                ));
            }
            t.push(vec![
                w.clone(),
                b.to_string(),
                opt(tput(w, b, "vpps"), 4),
                opt(tput(w, b, "dynet"), 4),
                opt(tput(w, b, "cavs"), 4),
                opt(tput(w, b, "edbatch"), 4),
                vs.map(|r| r.cell()).unwrap_or_default(),
                kernel.map(ratio).unwrap_or_default(),
                over_best.map(ratio).unwrap_or_default(),
                paper.map(ratio).unwrap_or_default(),
            ]);
        }
        panels.push(throughput_panel(
            format!("{w}, hidden {}", list(&hiddens)),
            &batches,
            series,
        ));
    }
    let cols = panels.len().clamp(1, 2);
    let fig = Figure::grid(
        format!("VPPS: inference throughput on {}", list(&rows.devices())),
        panels,
        cols,
        ctx.stamp.clone(),
    );
    ctx.figure(sec, "vpps", fig)?;
    ctx.table(sec, t)?;
    sec.setup = format!(
        "{} {}; every run checked against the CPU reference.",
        list(&executors),
        grid(rows)
    );
    sec.paper = paper(ctx)?;
    sec.reading = if at2.is_empty() {
        "No batch-2 point with both vpps and dynet was measured.".into()
    } else {
        format!(
            "vpps over dynet at batch 2 on our {dev}: {}. The kernel's GPU time is where the \
             paper's gain shows; end to end, the host's per-mini-batch script compile and the \
             pool's transfers come on top, and the ratio falls with the batch size as the \
             per-row loops of the resident products lengthen (see the table).",
            at2.join("; ")
        )
    };
    Ok(())
}

/// Training: vpps's forward and backward in one kernel.
pub fn build_train(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let dev = Device::of(rows).word();
    let workloads = distinct(rows.replay().map(|r| r.config.workload.clone()));
    let batches = ascending(rows.replay().map(|r| r.config.batch));
    let hiddens = ascending(rows.replay().map(|r| r.config.hidden));
    let row = finder(rows);
    let val = |w: &str, b: usize, value: fn(&ReplayMetrics) -> Option<f64>| {
        row(w, b, "vpps").and_then(|r| value(r.metrics))
    };
    let throughput = |m: &ReplayMetrics| Some(m.instances_per_s);
    let mut t = Table::new(
        "vpps-train",
        format!(
            "Training steps of vpps on our {dev} (forward and backward in one persistent \
             kernel): instances per second, the step's time, the GPU time between the CUDA \
             events, the host's script compile, and the largest relative error of loss, outputs \
             and parameter gradients against the CPU reference."
        ),
        &[
            "workload",
            "batch",
            "instances/s",
            "step (ms)",
            "GPU (ms)",
            "script compile (ms)",
            "max rel. error",
        ],
    );
    let series: Vec<LineSeries> = workloads
        .iter()
        .map(|w| LineSeries {
            name: w.clone(),
            x: None,
            y: batches.iter().map(|&b| val(w, b, throughput)).collect(),
        })
        .filter(|s| s.y.iter().any(Option::is_some))
        .collect();
    let mut at2 = Vec::new();
    for w in &workloads {
        for &b in &batches {
            let Some(ips) = val(w, b, throughput) else {
                continue;
            };
            if b == 2 {
                at2.push(format!("{w} {}", sig(ips, 3)));
            }
            t.push(vec![
                w.clone(),
                b.to_string(),
                sig(ips, 4),
                val(w, b, |m| Some(m.total_s)).map(ms).unwrap_or_default(),
                val(w, b, |m| m.device_s).map(ms).unwrap_or_default(),
                val(w, b, |m| Some(m.scheduling_s))
                    .map(ms)
                    .unwrap_or_default(),
                val(w, b, |m| m.max_rel_error)
                    .map(|e| format!("{e:.1e}"))
                    .unwrap_or_default(),
            ]);
        }
    }
    let fig = Figure::grid(
        format!(
            "VPPS: training throughput of the persistent kernel on {}",
            list(&rows.devices())
        ),
        vec![throughput_panel(
            format!("vpps, hidden {}", list(&hiddens)),
            &batches,
            series,
        )],
        1,
        ctx.stamp.clone(),
    );
    ctx.figure(sec, "vpps-train", fig)?;
    ctx.table(sec, t)?;
    sec.setup = format!(
        "vpps training steps {}; loss, outputs and gradients checked against the CPU reference.",
        grid(rows)
    );
    sec.paper = paper(ctx)?;
    sec.reading = format!(
        "Training instances per second at batch 2 on our {dev}: {}. The paper's figures compare \
         VPPS with DyNet training on the same GPU; our CUDA replay of dynet, cavs and edbatch \
         runs forward only, so that ratio is not measured here (the inference item compares \
         the executors on the GPU).",
        if at2.is_empty() {
            "not measured".to_string()
        } else {
            at2.join(", ")
        }
    );
    Ok(())
}
