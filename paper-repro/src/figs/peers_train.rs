//! Item `peers-train`: training steps (forward + backward of the summed loss,
//! no optimiser update) of the real DyNet (autobatch off and agenda) and
//! PyTorch eager beside batchlab's dynet, cavs and edbatch executors on the
//! same traces and weights (kind `peers` with `train`). Tables: training
//! throughput with batchlab's best over DyNet autobatch, the construction /
//! forward / backward split, and the gradient check: every peer's parameter
//! gradients against the reference executor's (from the export).

use crate::error::Result;
use crate::report::ctx::Ctx;
use crate::report::fmt::{ms, sig, span};
use crate::report::noise::{self, Noisy};
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{RowSet, ascending, distinct};

use super::peers::{
    BATCHLAB_BEST, EFFECT_HEADS, SYSTEMS, Systems, effects, effects_reading, figure, first_errors,
    measured, points,
};
use super::{list, quick_note};

/// Relative gradient difference the same-weights check allows.
pub const GRAD_TOLERANCE: f64 = 1e-4;

/// The paper's statements: none, this item compares with the real systems.
pub fn paper(_ctx: &Ctx) -> Result<Vec<String>> {
    Ok(Vec::new())
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let pts = points(rows);
    let tput = |m: &Systems, s: &str| measured(m, s).map(|r| r.metrics.instances_per_s);
    let why = first_errors(rows);

    let mut heads: Vec<String> = vec![
        "workload".into(),
        "batch".into(),
        "hidden".into(),
        "threads".into(),
    ];
    heads.extend(SYSTEMS.iter().map(|(_, c)| format!("{c}: inst/s")));
    heads.push("best batchlab".into());
    heads.push("best batchlab ÷ DyNet autobatch".into());
    heads.extend(EFFECT_HEADS.iter().map(|h| h.to_string()));
    let head_refs: Vec<&str> = heads.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "peers-train",
        "Training instances per second (forward + backward per mini-batch, no optimiser \
         update; medians of all timed steps over all rounds, each system in its own processes, \
         interleaved). Ratio above 1: batchlab is faster; ± the spread of both systems' steps.",
        &head_refs,
    );
    let mut split = Table::new(
        "peers-train-split",
        "Median milliseconds per training step: construction / forward / backward (DyNet: \
         renew_cg and building / value() / backward(); batchlab: construction / scheduling + \
         execution of the forward / the backward; PyTorch eager builds as it runs), CPU / wall.",
        &[
            "workload",
            "batch",
            "hidden",
            "threads",
            "system",
            "construction ms",
            "forward ms",
            "backward ms",
            "total ms",
            "CPU / wall",
        ],
    );
    let mut checks = Table::new(
        "peers-train-checks",
        "Same weights, same gradients: each peer's loss and parameter gradients (first step) \
         against batchlab's reference executor (per tensor max |a − b| / max |b|, the largest).",
        &[
            "workload",
            "batch",
            "hidden",
            "threads",
            "system",
            "loss rel. err",
            "gradient rel. err",
            "check",
        ],
    );
    // (hidden, best batchlab ÷ DyNet autobatch) per point.
    let mut ratios: Vec<(usize, Noisy)> = Vec::new();
    let (mut grad_ok, mut grad_n) = (0usize, 0usize);
    let mut all_effects = Vec::new();
    for ((w, b, h, th), m) in &pts {
        let mut row = vec![w.clone(), b.to_string(), h.to_string(), th.to_string()];
        for (s, _) in SYSTEMS {
            row.push(tput(m, s).map_or_else(
                || match m.get(s) {
                    None => "not in grid".into(),
                    Some(_) => "n/a¹".into(),
                },
                |v| sig(v, 4),
            ));
        }
        // batchlab's best: the fastest of its batching executors here.
        let best = BATCHLAB_BEST
            .iter()
            .filter_map(|s| Some((*s, tput(m, s)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let ratio = best.and_then(|(s, _)| {
            noise::ratio_of(measured(m, s)?, measured(m, "dynet-agenda")?, |m| {
                m.instances_per_s
            })
        });
        row.push(best.map(|(s, _)| s.to_string()).unwrap_or_default());
        row.push(ratio.as_ref().map(Noisy::cell).unwrap_or_default());
        if let Some(r) = ratio {
            ratios.push((*h, r));
        }
        let e = effects(m);
        row.extend(e.cells());
        all_effects.push((format!("{w} b{b} h{h} t{th}"), e));
        t.push(row);
        for (s, _) in SYSTEMS {
            let Some(r) = measured(m, s) else { continue };
            let x = r.metrics;
            split.push(vec![
                w.clone(),
                b.to_string(),
                h.to_string(),
                th.to_string(),
                s.to_string(),
                x.construction_s.map(ms).unwrap_or_default(),
                x.forward_s.map(ms).unwrap_or_default(),
                x.backward_s.map(ms).unwrap_or_default(),
                ms(x.total_s),
                format!("{:.2}", x.cpu_s / x.total_s.max(1e-12)),
            ]);
            let grad = x.grad_rel_err;
            if let Some(g) = grad {
                grad_n += 1;
                grad_ok += usize::from(g <= GRAD_TOLERANCE);
                checks.push(vec![
                    w.clone(),
                    b.to_string(),
                    h.to_string(),
                    th.to_string(),
                    s.to_string(),
                    x.loss_rel_err
                        .map(|e| format!("{e:.1e}"))
                        .unwrap_or_default(),
                    format!("{g:.1e}"),
                    if g <= GRAD_TOLERANCE { "pass" } else { "FAIL" }.into(),
                ]);
            }
        }
    }

    let workloads = distinct(rows.peers().map(|r| r.config.workload.clone()));
    let threads = ascending(rows.peers().map(|r| r.config.threads));
    let fig = figure(
        ctx,
        rows,
        &pts,
        "training instances / s (log scale)",
        format!(
            "Training: batchlab beside the real DyNet and PyTorch on {} (higher is better)",
            list(&distinct(rows.ok().map(|r| &r.provenance.machine.cpu)))
        ),
    );
    ctx.figure(sec, "peers-train", fig)?;
    ctx.table(sec, t)?;
    ctx.table(sec, split)?;
    ctx.table(sec, checks)?;

    sec.setup = format!(
        "Training steps of workloads {}; batch {}; hidden {}; threads {}; record and weight \
         seed {}; per system {} round(s) of one process each (order rotated every round), \
         each one untimed step (DyNet and PyTorch: the step whose gradients are checked) and \
         {} timed step(s). batchlab runs the backward in the forward batches' reverse order \
         with weight gradients batched lazily, DyNet its own backward (reverse of its forward \
         batches), PyTorch autograd.",
        list(&workloads),
        list(&ascending(rows.peers().map(|r| r.config.batch))),
        list(&ascending(rows.peers().map(|r| r.config.hidden))),
        list(&threads),
        list(&ascending(rows.peers().map(|r| r.config.seed))),
        list(&ascending(rows.peers().map(|r| r.config.rounds))),
        list(&ascending(rows.peers().map(|r| r.config.repeats))),
    );
    let summary = |keep: &dyn Fn(usize) -> bool| {
        let v: Vec<f64> = ratios
            .iter()
            .filter(|(h, _)| keep(*h))
            .map(|(_, r)| r.value)
            .collect();
        crate::report::fmt::range(&v)
            .map(|(lo, hi)| format!("{}× over {} trace(s)", span(lo, hi, 3), v.len()))
            .unwrap_or_else(|| "no pair measured".into())
    };
    sec.reading = format!(
        "batchlab's best executor ÷ DyNet autobatch, training: {} at hidden ≥ 256, {} below. \
         Gradients: {grad_ok} of {grad_n} peer run(s) within {GRAD_TOLERANCE:.0e} of the \
         reference's.",
        summary(&|h| h >= 256),
        summary(&|h| h < 256),
    );
    sec.reading += " ";
    sec.reading += &effects_reading(&all_effects, 1.2);
    for (s, e) in &why {
        sec.notes.push(format!("¹ {s}: {e}"));
    }
    if let Some(q) = quick_note(rows, "a small grid (docs/peers.md gives the full one)") {
        sec.notes.push(q);
    }
    Ok(())
}
