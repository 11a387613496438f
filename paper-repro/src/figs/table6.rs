//! ED-Batch Table 6 (appendix D): TreeLSTM throughput of the batching
//! executors against the unbatched reference (PyTorch-eager-like), beside
//! the paper's Torch / DyNet / Cavs / ED-Batch numbers on the rows' device
//! (the CPU row, `table6.cpu.*`, or the GPU row, `table6.gpu.*`).

use figures::{BarSeries, Figure, GroupedBars, Scale};

use crate::error::Result;
use crate::items::Paper::EdBatch;
use crate::report::ctx::Ctx;
use crate::report::fmt::{opt, ratio, sig, times};
use crate::report::noise;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{ReplayRow, RowSet, ascending, distinct};

use super::{Device, list, quick_note};

/// Our executor → (paper's system, its column in the published ids).
fn paper_of(e: &str) -> Option<(&'static str, &'static str)> {
    Some(match e {
        "reference" => ("Torch", "torch"),
        "dynet" => ("DyNet", "dynet"),
        "cavs" => ("Cavs", "cavs"),
        "edbatch" => ("ED-Batch", "edbatch"),
        _ => return None,
    })
}

/// The paper's statements for this item.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say(EdBatch, "table6.setup")?,
        ctx.say_value(EdBatch, "table6.cpu.edbatch_over_torch")?,
    ])
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let dev = Device::of(rows);
    let (key, pw) = (dev.key(), dev.paper_word());
    let id = |col: &str| format!("table6.{key}.{col}");
    let executors = distinct(rows.replay().map(|r| r.config.executor.clone()));
    let find = |e: &str| -> Option<ReplayRow> { rows.replay().find(|r| r.config.executor == e) };
    let tput = |e: &str| find(e).map(|r| r.metrics.instances_per_s);
    // Ratios of two executors' rows, with the noise of both.
    let noisy = |a: &str, b: &str| noise::ratio_of(find(a)?, find(b)?, |m| m.instances_per_s);
    let paper = |e: &str| paper_of(e).and_then(|(_, col)| ctx.num(EdBatch, &id(col)));
    let torch = ctx.num(EdBatch, &id("torch"));
    let (paper_col, tf_col) = (
        format!("paper ({pw}): inputs/s"),
        format!("paper ({pw}, TF): inputs/s"),
    );
    let mut t = Table::new(
        "table6",
        format!(
            "Instances (inputs) per second on our {}, beside the paper's {pw} row; ratios over \
             the unbatched executor (ours: reference, paper: Torch).",
            dev.word()
        ),
        &[
            "executor",
            "paper system",
            "ours: instances/s",
            "ours / reference",
            "ours: CPU ms / run",
            "ours: wall ms / run",
            &paper_col,
            "paper / Torch",
            &tf_col,
        ],
    );
    for e in &executors {
        let o = tput(e);
        t.push(vec![
            e.clone(),
            paper_of(e).map(|p| p.0).unwrap_or("").into(),
            opt(o, 4),
            noisy(e, "reference").map(|r| r.cell()).unwrap_or_default(),
            find(e)
                .and_then(|r| Some(r.metrics.cpu_s? * 1e3))
                .map(|c| sig(c, 3))
                .unwrap_or_default(),
            find(e)
                .map(|r| sig(r.metrics.total_s * 1e3, 3))
                .unwrap_or_default(),
            opt(paper(e), 4),
            paper(e)
                .zip(torch)
                .map(|(a, b)| ratio(a / b))
                .unwrap_or_default(),
            if e == "reference" {
                opt(ctx.num(EdBatch, &id("tf")), 4)
            } else {
                String::new()
            },
        ]);
    }
    let chart = GroupedBars {
        x_label: "executor".into(),
        y_label: "instances / s (log scale)".into(),
        y_scale: Scale::Log10,
        categories: executors.clone(),
        series: vec![BarSeries {
            name: "ours".into(),
            values: executors.iter().map(|e| tput(e)).collect(),
            paper: executors.iter().map(|e| paper(e)).collect(),
        }],
        reference_lines: Vec::new(),
    };
    let (b, h) = (
        list(&ascending(rows.replay().map(|r| r.config.batch))),
        list(&ascending(rows.replay().map(|r| r.config.hidden))),
    );
    let fig = Figure::new(
        format!(
            "ED-Batch Table 6: TreeLSTM batch {b}, hidden {h} on {} (diamonds: paper, {pw}, batch 256, hidden 512)",
            list(&rows.devices())
        ),
        chart,
        ctx.stamp.clone(),
    )
    .with_size(1800, 850);
    ctx.figure(sec, "table6", fig)?;
    ctx.table(sec, t)?;

    sec.setup = format!(
        "tree-lstm, batch {b}, hidden {h}, record seed {}, {} timed run(s) after a warm-up; \
         `reference` runs one node at a time (the PyTorch-eager-like baseline the paper's \
         Torch column stands for).",
        list(&ascending(rows.replay().map(|r| r.config.seed))),
        list(&ascending(rows.replay().map(|r| r.config.repeats))),
    );
    sec.paper = self::paper(ctx)?;
    sec.paper.push(ctx.say_value(EdBatch, &id("edbatch"))?);
    // The paper's numbers are at batch 256, hidden 512: compared only there.
    let like = b == "256" && h == "512";
    let p = |a: &str, b: &str| like.then(|| Some(paper(a)? / paper(b)?)).flatten();
    let fmt = |a: &str, b: &str| match (noisy(a, b), p(a, b)) {
        (Some(x), Some(y)) => format!("edbatch / {b} {} (paper, {pw}: {})", x.times(), times(y)),
        (Some(x), None) => format!("edbatch / {b} {}", x.times()),
        _ => String::new(),
    };
    let parts: Vec<String> = [
        fmt("edbatch", "reference"),
        fmt("edbatch", "cavs"),
        fmt("edbatch", "dynet"),
    ]
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect();
    let abs = |v: Option<f64>| v.map_or_else(|| "?".into(), |v| sig(v, 4));
    sec.reading = if like {
        format!(
            "On our {}: {}; absolute: edbatch {} instances/s vs the paper's {} on the {pw}.",
            dev.word(),
            parts.join(", "),
            abs(tput("edbatch")),
            abs(paper("edbatch")),
        )
    } else {
        format!(
            "On our {} at batch {b}, hidden {h}: {}. Not compared with the paper, whose \
             numbers are at batch 256, hidden 512 (throughput ratios change with both; the \
             full run measures 256/512).",
            dev.word(),
            parts.join(", "),
        )
    };
    if let Some(q) = quick_note(rows, &format!("batch {b}, hidden {h} instead of 256, 512")) {
        sec.notes.push(q);
    }
    Ok(())
}
