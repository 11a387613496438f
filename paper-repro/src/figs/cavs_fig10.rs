//! Cavs Fig. 10 style: the speed-up of each execution-engine optimisation,
//! switched on alone (and both together) over a baseline with both off, when
//! training Fixed-LSTM and Tree-LSTM at batch 64 over hidden sizes. Lazy
//! batching (a replay config's `eager` false) defers weight-gradient products
//! to one per weight; fusion (`unfused` false) runs a cell's elementwise ops
//! as one pass per instance. Streaming has no CPU counterpart.

use figures::{Figure, LineChart, LineSeries, Panel, RefLine, Scale};

use crate::error::Result;
use crate::items::Paper::Cavs;
use crate::report::ctx::Ctx;
use crate::report::fmt::span;
use crate::report::noise::{self, Noisy};
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{RowSet, ascending, distinct};

use super::{Device, list, quick_note};

/// The paper's statements for this item.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say(Cavs, "fig10.setup")?,
        ctx.say(Cavs, "fig10.reading")?,
        ctx.say_value(Cavs, "fig10.lazy_batching")?,
        ctx.say_value(Cavs, "fig10.fusion")?,
        ctx.say(Cavs, "fig10.streaming")?,
    ])
}

/// The configurations compared with the baseline: (name, lazy, fused).
const VARIANTS: [(&str, bool, bool); 3] = [
    ("lazy batching", true, false),
    ("fusion", false, true),
    ("both", true, true),
];

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let dev = Device::of(rows).word();
    let workloads = distinct(rows.replay().map(|r| r.config.workload.clone()));
    let hiddens = ascending(rows.replay().map(|r| r.config.hidden));
    let batches = ascending(rows.replay().map(|r| r.config.batch));
    let row = |w: &str, h: usize, lazy: bool, fused: bool| {
        rows.replay().find(|r| {
            let c = r.config;
            c.workload == w && c.hidden == h && c.eager != lazy && c.unfused != fused
        })
    };
    let speedup = |w: &str, h: usize, lazy: bool, fused: bool| -> Option<Noisy> {
        noise::ratio_of(row(w, h, lazy, fused)?, row(w, h, false, false)?, |m| {
            m.instances_per_s
        })
    };
    let mut t = Table::new(
        "cavs-fig10",
        format!(
            "Training-step speed-up over the baseline (lazy batching and fusion off), {dev}, \
             with the noise of both rows."
        ),
        &["workload", "hidden", "lazy batching", "fusion", "both"],
    );
    let mut panels = Vec::new();
    // Per workload and variant, the (hidden, speed-up) points.
    let mut per: Vec<Vec<Vec<(usize, f64)>>> = Vec::new();
    for w in &workloads {
        let mut mine: Vec<Vec<(usize, f64)>> = vec![Vec::new(); VARIANTS.len()];
        let mut series: Vec<LineSeries> = VARIANTS
            .iter()
            .map(|(name, _, _)| LineSeries {
                name: (*name).to_string(),
                x: None,
                y: Vec::new(),
            })
            .collect();
        for h in &hiddens {
            let mut cells = vec![w.clone(), h.to_string()];
            for (k, (_, lazy, fused)) in VARIANTS.iter().enumerate() {
                let s = speedup(w, *h, *lazy, *fused);
                if let Some(s) = &s {
                    mine[k].push((*h, s.value));
                }
                series[k].y.push(s.as_ref().map(|s| s.value));
                cells.push(s.map_or(String::new(), |s| s.cell()));
            }
            t.push(cells);
        }
        per.push(mine);
        panels.push(Panel::new(
            format!("{w}, batch {}", list(&batches)),
            LineChart {
                x_label: "hidden size".into(),
                y_label: "speed-up over baseline".into(),
                x_scale: Scale::Log2,
                y_scale: Scale::Linear,
                x: hiddens.iter().map(|h| *h as f64).collect(),
                series,
                reference_lines: vec![RefLine::new(1.0, "baseline")],
            },
        ));
    }
    let cols = panels.len().clamp(1, 2);
    let fig = Figure::grid(
        format!("Cavs Fig. 10 style: engine optimisations over a baseline, training on the {dev}"),
        panels,
        cols,
        ctx.stamp.clone(),
    );
    ctx.figure(sec, "cavs-fig10", fig)?;
    ctx.table(sec, t)?;

    sec.setup = format!(
        "cavs executor training {} at batch {}, hidden {}, record seed {}, {} timed steps after \
         a warm-up, on the {dev}; the four combinations of lazy batching and fusion. A step is \
         the forward pass and the backward (forward batches reversed), no optimiser update.",
        list(&workloads),
        list(&batches),
        list(&hiddens),
        list(&ascending(rows.replay().map(|r| r.config.seed))),
        list(&ascending(rows.replay().map(|r| r.config.repeats))),
    );
    sec.paper = paper(ctx)?;
    let mut parts = Vec::new();
    for (w, mine) in workloads.iter().zip(&per) {
        let mut each = Vec::new();
        for ((name, _, _), pts) in VARIANTS.iter().zip(mine) {
            let v: Vec<f64> = pts.iter().map(|x| x.1).collect();
            let Some((lo, hi)) = crate::report::fmt::range(&v) else {
                continue;
            };
            // Whether the speed-up grows or shrinks from the smallest hidden
            // size to the largest (the paper: lazy batching grows, fusion
            // shrinks); within 2 % counts as flat.
            let trend = match (pts.first(), pts.last()) {
                (Some(a), Some(b)) if pts.len() > 1 && b.1 > a.1 * 1.02 => ", growing with h",
                (Some(a), Some(b)) if pts.len() > 1 && b.1 < a.1 / 1.02 => ", shrinking with h",
                _ if pts.len() > 1 => ", flat in h",
                _ => "",
            };
            each.push(format!("{name} {}×{trend}", span(lo, hi, 3)));
        }
        if !each.is_empty() {
            parts.push(format!("{w}: {}", each.join(", ")));
        }
    }
    sec.reading = format!(
        "Over the baseline — {} (paper, GPU: about 1.2× each, lazy batching growing and fusion \
         shrinking with h).",
        parts.join("; ")
    );
    if let Some(n) = noise::cpu_note(rows.replay().map(|r| r.metrics)) {
        sec.notes.push(n);
    }
    sec.notes.push(
        "On the CPU, lazy batching turns a weight-gradient product per backward batch into one \
         tall product per weight (fewer, larger GEMMs); fusion saves passes over the batch's \
         rows, not kernel launches, so its gain is smaller than on a GPU. Cavs' streaming (two \
         CUDA streams) has no CPU counterpart and is not measured."
            .to_string(),
    );
    if let Some(q) = quick_note(rows, &format!("hidden {}", list(&hiddens))) {
        sec.notes.push(q);
    }
    Ok(())
}
