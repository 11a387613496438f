//! Cavs Fig. 8 (a)-(d) style: training throughput (one forward + backward
//! step per mini-batch) against batch size for Cavs' four models, one line
//! per executor, with the Cavs paper's stated speed-ups (Fig. 8 text, Table 1)
//! beside ours, and each executor's backward batches beside the reversed
//! graph's lower bound.

use figures::{Figure, LineSeries};

use crate::error::Result;
use crate::items::Paper::Cavs;
use crate::published::cite;
use crate::report::ctx::Ctx;
use crate::report::fmt::{opt, range, ratio, span, times};
use crate::report::noise;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{ReplayRow, RowSet, ascending, distinct};

use super::{Device, list, quick_note, throughput_panel};

/// The paper's statements for this item.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say(Cavs, "fig8.caption")?,
        ctx.say_value(Cavs, "fig8.fixed-lstm.b2.batching_over_serial")?,
        ctx.say(Cavs, "fig8.tree-fc")?,
        ctx.say(Cavs, "fig8.tree-lstm")?,
        ctx.say(Cavs, "table2.reading")?,
        ctx.say_value(Cavs, "table1.tree-lstm.b64.train_compute_s.cavs")?,
        ctx.say(Cavs, "hardware")?,
    ])
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let dev = Device::of(rows).word();
    let workloads = distinct(rows.replay().map(|r| r.config.workload.clone()));
    let executors = distinct(rows.replay().map(|r| r.config.executor.clone()));
    let batches = ascending(rows.replay().map(|r| r.config.batch));
    let hiddens = ascending(rows.replay().map(|r| r.config.hidden));
    let row = |w: &str, h: usize, b: usize, e: &str| find(rows, w, h, b, e);
    let tput =
        |w: &str, h: usize, b: usize, e: &str| row(w, h, b, e).map(|r| r.metrics.instances_per_s);
    // A throughput ratio of two executors with the noise of both rows.
    let noisy = |w: &str, h: usize, b: usize, a: &str, o: &str| {
        noise::ratio_of(row(w, h, b, a)?, row(w, h, b, o)?, |m| m.instances_per_s)
    };
    let mut worst_noise: f64 = 0.0;
    let mut panels = Vec::new();
    let mut t = Table::new(
        "cavs-fig8",
        format!("Instances per second (training step: forward + backward, {dev}) per batch size."),
        &[
            "workload",
            "hidden",
            "batch",
            "reference",
            "dynet",
            "cavs",
            "edbatch",
        ],
    );
    for h in &hiddens {
        for w in &workloads {
            let series: Vec<LineSeries> = executors
                .iter()
                .map(|e| LineSeries {
                    name: e.clone(),
                    x: None,
                    y: batches.iter().map(|b| tput(w, *h, *b, e)).collect(),
                })
                .filter(|s| s.y.iter().any(Option::is_some))
                .collect();
            if series.is_empty() {
                continue;
            }
            for b in &batches {
                let vals: Vec<String> = ["reference", "dynet", "cavs", "edbatch"]
                    .iter()
                    .map(|e| opt(tput(w, *h, *b, e), 4))
                    .collect();
                if vals.iter().all(String::is_empty) {
                    continue;
                }
                let mut row = vec![w.clone(), h.to_string(), b.to_string()];
                row.extend(vals);
                t.push(row);
            }
            panels.push(throughput_panel(
                format!("{w}, hidden {h}"),
                &batches,
                series,
            ));
        }
    }
    // Two panels a row: a readable grid (four panels in one row were 3200 px wide).
    let cols = panels.len().clamp(1, 2);
    let fig = Figure::grid(
        format!(
            "Cavs Fig. 8 style, training (forward + backward): throughput vs batch size on {}",
            list(&rows.devices())
        ),
        panels,
        cols,
        ctx.stamp.clone(),
    );
    ctx.figure(sec, "cavs-fig8", fig)?;
    ctx.table(sec, t)?;

    // Ours beside the paper's stated speed-ups.
    let mut c = Table::new(
        "cavs-fig8-paper",
        format!(
            "Speed-ups: ours (training throughput ratio, {dev}) beside the Cavs paper's \
             (training, GPU)."
        ),
        &[
            "comparison",
            "batch",
            "hidden",
            "ours",
            "paper",
            "paper source",
        ],
    );
    let (mut serial, mut vs_dynet) = (Vec::new(), Vec::new());
    for b in [2usize, 4, 8, 16, 32, 64, 128] {
        let id = format!("fig8.fixed-lstm.b{b}.batching_over_serial");
        let Some(v) = ctx.published.value(Cavs, &id) else {
            continue;
        };
        for h in &hiddens {
            if let Some(r) = noisy("fixed-lstm", *h, b, "cavs", "reference") {
                serial.push((b, r.value, v.value));
                worst_noise = worst_noise.max(r.noise.unwrap_or(0.0));
                c.push(vec![
                    "fixed-lstm: cavs / serial (ours: reference executor)".into(),
                    b.to_string(),
                    h.to_string(),
                    r.cell(),
                    ratio(v.value),
                    cite(&v.source).to_string(),
                ]);
            }
        }
    }
    for b in [1usize, 16, 32, 64, 128, 256] {
        let cavs_id = format!("table1.tree-lstm.b{b}.train_compute_s.cavs");
        let dynet_id = format!("table1.tree-lstm.b{b}.train_compute_s.dynet");
        let (Some(pc), Some(pd)) = (
            ctx.published.value(Cavs, &cavs_id),
            ctx.num(Cavs, &dynet_id),
        ) else {
            continue;
        };
        for h in &hiddens {
            if let Some(r) = noisy("tree-lstm", *h, b, "cavs", "dynet") {
                vs_dynet.push((b, r.value, pd / pc.value));
                worst_noise = worst_noise.max(r.noise.unwrap_or(0.0));
                c.push(vec![
                    "tree-lstm: cavs / dynet (paper: training computation time per epoch)".into(),
                    b.to_string(),
                    h.to_string(),
                    r.cell(),
                    ratio(pd / pc.value),
                    cite(&pc.source).to_string(),
                ]);
            }
        }
    }
    let tree_fc: Vec<f64> = hiddens
        .iter()
        .flat_map(|h| batches.iter().map(move |b| (*h, *b)))
        .filter_map(|(h, b)| noisy("tree-fc", h, b, "cavs", "dynet"))
        .map(|r| {
            worst_noise = worst_noise.max(r.noise.unwrap_or(0.0));
            r.value
        })
        .collect();
    ctx.table(sec, c)?;
    let over_bound = backward_table(ctx, rows, sec, &workloads, &hiddens, &batches)?;

    sec.setup = format!(
        "{} on {}, batch sizes {}, hidden {}, record seed {}, {} timed run(s) after a warm-up, \
         on the {dev}; `reference` (one node at a time) only at small batches. Cavs plots time \
         per training epoch (lower is better); we plot training-step throughput (higher is better): \
         the forward pass, then the backward in the forward batches' reverse order, weight \
         gradients batched lazily after it, no optimiser update.",
        list(&executors),
        list(&workloads),
        list(&batches),
        list(&hiddens),
        list(&ascending(rows.replay().map(|r| r.config.seed))),
        list(&ascending(rows.replay().map(|r| r.config.repeats))),
    );
    sec.paper = paper(ctx)?;
    let mut parts = Vec::new();
    if let Some(b) = serial.iter().map(|x| x.0).max() {
        let at: Vec<f64> = serial.iter().filter(|x| x.0 == b).map(|x| x.1).collect();
        let p = serial.iter().find(|x| x.0 == b).map_or(0.0, |x| x.2);
        let (lo, hi) = range(&at).unwrap_or((0.0, 0.0));
        parts.push(format!(
            "fixed-lstm, batching (cavs) over serial (reference) at batch {b}: {}× over hidden \
             sizes (paper {}, GPU training)",
            span(lo, hi, 3),
            times(p)
        ));
    }
    if !vs_dynet.is_empty() {
        let ours: Vec<f64> = vs_dynet.iter().map(|x| x.1).collect();
        let paper: Vec<f64> = vs_dynet.iter().map(|x| x.2).collect();
        let (lo, hi) = range(&ours).unwrap_or((0.0, 0.0));
        let (plo, phi) = range(&paper).unwrap_or((0.0, 0.0));
        parts.push(format!(
            "tree-lstm cavs / dynet: {}× (paper, training computation per epoch: {}×)",
            span(lo, hi, 3),
            span(plo, phi, 3)
        ));
    }
    if let Some((lo, hi)) = range(&tree_fc) {
        parts.push(format!(
            "tree-fc cavs / dynet {}× (paper: at least 10× in training)",
            span(lo, hi, 3)
        ));
    }
    if let Some((lo, hi)) = range(&over_bound) {
        parts.push(format!(
            "cavs and edbatch run the backward in {}× the reversed graph's lower bound of \
             batches (their forward batches, reversed)",
            span(lo, hi, 3)
        ));
    }
    sec.reading = parts.join("; ")
        + &format!(
            ". Each ratio's noise (the spread of its two rows' timed runs) is at most ±{:.0}%.",
            worst_noise * 100.0
        );
    if let Some(n) = noise::cpu_note(rows.replay().map(|r| r.metrics)) {
        sec.notes.push(n);
    }
    sec.notes.push(format!(
        "Cavs measured training on a Titan X GPU; we measure training steps on the {dev}, so \
         only the shape of the curves and the ratios are comparable, and Fig. 8's per-bar \
         values are not published as numbers. The paper's ratios are Table 1's (training \
         computation time per epoch, Tree-LSTM); its Table 2 (inference) is in \
         published/cavs.yaml."
    ));
    if let Some(q) = quick_note(
        rows,
        &format!("batch sizes {}, hidden {}", list(&batches), list(&hiddens)),
    ) {
        sec.notes.push(q);
    }
    Ok(())
}

/// The row of workload `w`, hidden `h`, batch `b` and executor `e`.
fn find<'a>(rows: &'a RowSet, w: &str, h: usize, b: usize, e: &str) -> Option<ReplayRow<'a>> {
    rows.replay().find(|r| {
        let c = r.config;
        c.workload == w && c.hidden == h && c.batch == b && c.executor == e
    })
}

/// Backward batches per executor beside the reversed graph's lower bound
/// (one hidden size: batch counts do not depend on it). Returns the
/// cell-level executors' ratios to the bound.
fn backward_table(
    ctx: &Ctx,
    rows: &RowSet,
    sec: &mut Section,
    workloads: &[String],
    hiddens: &[usize],
    batches: &[usize],
) -> Result<Vec<f64>> {
    let Some(h) = hiddens.first() else {
        return Ok(Vec::new());
    };
    let execs = ["reference", "dynet", "cavs", "edbatch"];
    let mut t = Table::new(
        "cavs-fig8-backward",
        format!(
            "Backward batches per training step (hidden {h}) beside the lower bound of the \
             reversed instance graph (ED-Batch A.3). dynet batches ops (its count is op level, \
             the bound cell level); the others batch cells."
        ),
        &[
            "workload",
            "batch",
            "lower bound",
            "reference",
            "dynet (op level)",
            "cavs",
            "edbatch",
        ],
    );
    let mut ratios = Vec::new();
    for w in workloads {
        for b in batches {
            // Inference rows have no backward measurements.
            let train = |e: &str| find(rows, w, *h, *b, e)?.metrics.train.as_ref();
            let bound = execs
                .iter()
                .find_map(|e| Some(train(e)?.backward_lower_bound as f64));
            let Some(bound) = bound else { continue };
            let mut row = vec![w.clone(), b.to_string(), format!("{bound:.0}")];
            for e in execs {
                let n = train(e).map(|t| t.backward_batches as f64);
                if let (Some(n), "cavs" | "edbatch") = (n, e) {
                    ratios.push(n / bound.max(1.0));
                }
                row.push(n.map_or(String::new(), |n| format!("{n:.0}")));
            }
            t.push(row);
        }
    }
    // Inference rows (an older rows folder) have no backward: no table.
    if !t.rows.is_empty() {
        ctx.table(sec, t)?;
    }
    Ok(ratios)
}
