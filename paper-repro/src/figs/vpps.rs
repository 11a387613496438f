//! VPPS style: small-batch (1-32) throughput curves on the GPU. We have no
//! persistent-kernel executor: the curves show our executors on CUDA where
//! VPPS reports its largest gains over DyNet.

use figures::{Figure, LineSeries};

use crate::error::Result;
use crate::items::Paper::Vpps;
use crate::report::ctx::Ctx;
use crate::report::fmt::{opt, ratio, times};
use crate::report::noise;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{RowSet, num};

use super::{Device, list, throughput_panel};

/// The published VPPS / DyNet speed-up for a workload and batch size.
fn paper_id(w: &str, b: u64) -> Option<String> {
    match (w, b) {
        ("tree-lstm", 2 | 128) => Some(format!("fig8.tree-lstm.b{b}.vpps_over_dynet")),
        ("bilstm-tagger", 2) => Some("fig12.bilstm.b2.vpps_over_dynet".into()),
        _ => None,
    }
}

/// The paper's statements for this item.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say_value(Vpps, "fig8.tree-lstm.b2.vpps_over_dynet")?,
        ctx.say_value(Vpps, "fig12.bilstm.b2.vpps_over_dynet")?,
        ctx.say(Vpps, "fig8.setting")?,
        ctx.say(Vpps, "hardware")?,
    ])
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let dev = Device::of(rows).word();
    let workloads = rows.distinct("config.workload");
    let executors = rows.distinct("config.executor");
    let batches = rows.distinct_u64("config.batch");
    let hiddens = rows.distinct_u64("config.hidden");
    let row = |w: &str, b: u64, e: &str| {
        rows.find(&[
            ("config.workload", w),
            ("config.batch", &b.to_string()),
            ("config.executor", e),
        ])
    };
    let tput =
        |w: &str, b: u64, e: &str| row(w, b, e).and_then(|r| num(r, "metrics.instances_per_s"));
    let mut panels = Vec::new();
    let mut t = Table::new(
        "vpps",
        format!(
            "Instances per second on our {dev}; *best / dynet* = our faster of cavs and edbatch \
             over dynet, beside VPPS's speed-up over DyNet where the paper states one (training)."
        ),
        &[
            "workload",
            "batch",
            "dynet",
            "cavs",
            "edbatch",
            "best / dynet",
            "paper: VPPS / DyNet",
        ],
    );
    let mut compared = Vec::new();
    for w in &workloads {
        let series: Vec<LineSeries> = executors
            .iter()
            .map(|e| LineSeries {
                name: e.clone(),
                y: batches.iter().map(|b| tput(w, *b, e)).collect(),
            })
            .filter(|s| s.y.iter().any(Option::is_some))
            .collect();
        if series.is_empty() {
            continue;
        }
        for b in &batches {
            // Our faster batching executor over DyNet, with both rows' noise.
            let best = ["cavs", "edbatch"]
                .iter()
                .filter(|e| tput(w, *b, e).is_some())
                .max_by(|x, y| {
                    tput(w, *b, x)
                        .unwrap_or(0.0)
                        .total_cmp(&tput(w, *b, y).unwrap_or(0.0))
                });
            let vs = best.and_then(|e| {
                noise::ratio_of(
                    row(w, *b, e)?,
                    row(w, *b, "dynet")?,
                    "metrics.instances_per_s",
                )
            });
            let paper = paper_id(w, *b).and_then(|id| ctx.num(Vpps, &id));
            if let (Some(o), Some(p)) = (vs, paper) {
                compared.push(format!("{w} batch {b}: {} (VPPS {})", o.times(), times(p)));
            }
            t.push(vec![
                w.clone(),
                b.to_string(),
                opt(tput(w, *b, "dynet"), 4),
                opt(tput(w, *b, "cavs"), 4),
                opt(tput(w, *b, "edbatch"), 4),
                vs.map(|r| r.cell()).unwrap_or_default(),
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
        format!(
            "VPPS style: small-batch inference throughput on {}",
            list(&rows.distinct("provenance.device"))
        ),
        panels,
        cols,
        ctx.stamp.clone(),
    );
    ctx.figure(sec, "vpps", fig)?;
    ctx.table(sec, t)?;
    sec.setup = format!(
        "{} on {} at batch sizes {}, hidden {}, on {}; {} timed run(s) after a warm-up.",
        list(&executors),
        list(&workloads),
        list(&batches),
        list(&hiddens),
        list(&rows.distinct("provenance.device")),
        list(&rows.distinct_u64("config.repeats")),
    );
    sec.paper = paper(ctx)?;
    sec.reading = if compared.is_empty() {
        "No batch size where VPPS states a speed-up was measured.".into()
    } else {
        format!(
            "Our best batching executor over DyNet on our {dev}: {} — VPPS's persistent kernels \
             are not implemented here, so this is the gap a VPPS executor would have to close.",
            compared.join("; ")
        )
    };
    Ok(())
}
