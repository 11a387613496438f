//! Item `peers-train`: training steps (forward + backward of the summed loss,
//! no optimiser update) of the real DyNet (autobatch off and agenda) and
//! PyTorch eager beside batchlab's dynet, cavs and edbatch executors on the
//! same traces and weights (kind `peers` with `train`). Tables: training
//! throughput with batchlab's best over DyNet autobatch, the construction /
//! forward / backward split, and the gradient check: every peer's parameter
//! gradients against the reference executor's (from the export).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::Result;
use crate::report::ctx::Ctx;
use crate::report::fmt::{ms, sig, span};
use crate::report::noise::{self, Noisy};
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{RowSet, field_string, num};

use super::peers::{
    BATCHLAB_BEST, EFFECT_HEADS, SYSTEMS, effects, effects_reading, figure, ok, points,
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
    fn get<'a>(m: &BTreeMap<String, &'a Value>, s: &str) -> Option<&'a Value> {
        m.get(s).copied().filter(|r| ok(r))
    }
    let tput = |m: &BTreeMap<String, &Value>, s: &str| {
        get(m, s).and_then(|r| num(r, "metrics.instances_per_s"))
    };
    let mut why: BTreeMap<String, String> = BTreeMap::new();
    for r in &rows.rows {
        if let (Some(s), Some(e)) = (field_string(r, "config.system"), r["error"].as_str()) {
            why.entry(s).or_insert_with(|| e.to_string());
        }
    }

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
    let mut ratios: Vec<(u64, Noisy)> = Vec::new();
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
            noise::ratio_of(
                get(m, s)?,
                get(m, "dynet-agenda")?,
                "metrics.instances_per_s",
            )
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
            let Some(r) = get(m, s) else { continue };
            let total = num(r, "metrics.total_s");
            split.push(vec![
                w.clone(),
                b.to_string(),
                h.to_string(),
                th.to_string(),
                s.to_string(),
                num(r, "metrics.construction_s").map(ms).unwrap_or_default(),
                num(r, "metrics.forward_s").map(ms).unwrap_or_default(),
                num(r, "metrics.backward_s").map(ms).unwrap_or_default(),
                total.map(ms).unwrap_or_default(),
                num(r, "metrics.cpu_s")
                    .zip(total)
                    .map(|(c, t)| format!("{:.2}", c / t.max(1e-12)))
                    .unwrap_or_default(),
            ]);
            let grad = num(r, "metrics.grad_rel_err");
            if let Some(g) = grad {
                grad_n += 1;
                grad_ok += usize::from(g <= GRAD_TOLERANCE);
                checks.push(vec![
                    w.clone(),
                    b.to_string(),
                    h.to_string(),
                    th.to_string(),
                    s.to_string(),
                    num(r, "metrics.loss_rel_err")
                        .map(|e| format!("{e:.1e}"))
                        .unwrap_or_default(),
                    format!("{g:.1e}"),
                    if g <= GRAD_TOLERANCE { "pass" } else { "FAIL" }.into(),
                ]);
            }
        }
    }

    let workloads = rows.distinct("config.workload");
    let threads = rows.distinct_u64("config.threads");
    let fig = figure(
        ctx,
        rows,
        &pts,
        "training instances / s (log scale)",
        format!(
            "Training: batchlab beside the real DyNet and PyTorch on {} (higher is better)",
            list(&rows.distinct("provenance.machine.cpu"))
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
        list(&rows.distinct_u64("config.batch")),
        list(&rows.distinct_u64("config.hidden")),
        list(&threads),
        list(&rows.distinct_u64("config.seed")),
        list(&rows.distinct_u64("config.rounds")),
        list(&rows.distinct_u64("config.repeats")),
    );
    let summary = |keep: &dyn Fn(u64) -> bool| {
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
