//! One builder per item: each reads its rows, draws its figure, writes its
//! CSV tables and returns its REPORT.md section with the paper's numbers and
//! a reading computed from the data.

mod cavs_fig10;
mod cavs_fig8;
mod device;
mod fig6;
mod fig7;
mod fig7_gap;
mod fig9;
mod optimise_scaling;
pub mod peers;
mod peers_train;
mod policies;
mod policies_exact;
mod policies_hard;
mod policies_unseen;
mod policy_common;
mod table2;
mod table4;
mod table5;
mod table6;
mod vpps;

use crate::error::Result;
use crate::items::Item;
use crate::report::ctx::Ctx;
use crate::report::section::Section;
use crate::rows::RowSet;

pub use device::Device;

/// Builds the section of `item` from its rows (at least one successful).
pub fn build(item: &'static Item, ctx: &Ctx, rows: &RowSet) -> Result<Section> {
    let mut sec = Section::new(item);
    match item.name {
        "fig7" => fig7::build(ctx, rows, &mut sec)?,
        "fig7-gap" => fig7_gap::build(ctx, rows, &mut sec)?,
        "table2" => table2::build(ctx, rows, &mut sec)?,
        "table4" => table4::build(ctx, rows, &mut sec)?,
        "table5" => table5::build(ctx, rows, &mut sec)?,
        "fig6" => fig6::build(ctx, rows, &mut sec)?,
        "fig9" => fig9::build(ctx, rows, &mut sec)?,
        "table6" => table6::build(ctx, rows, &mut sec)?,
        "cavs-fig8" => cavs_fig8::build(ctx, rows, &mut sec)?,
        "cavs-fig10" => cavs_fig10::build(ctx, rows, &mut sec)?,
        "vpps" => vpps::build(ctx, rows, &mut sec)?,
        "vpps-train" => vpps::build_train(ctx, rows, &mut sec)?,
        "peers" => peers::build(ctx, rows, &mut sec)?,
        "peers-train" => peers_train::build(ctx, rows, &mut sec)?,
        "policies" => policies::build(ctx, rows, &mut sec)?,
        "policies-exact" => policies_exact::build(ctx, rows, &mut sec)?,
        "policies-hard" => policies_hard::build(ctx, rows, &mut sec)?,
        "policies-unseen" => policies_unseen::build(ctx, rows, &mut sec)?,
        "optimise-scaling" => optimise_scaling::build(ctx, rows, &mut sec)?,
        other => unreachable!("item {other} has no builder"),
    }
    sec.notes.extend(Device::of(rows).mixed_note());
    Ok(sec)
}

/// The paper's statements for `item`, also shown when it has no data.
pub fn paper(item: &Item, ctx: &Ctx) -> Result<Vec<String>> {
    match item.name {
        "fig7" => fig7::paper(ctx),
        "fig7-gap" => fig7_gap::paper(ctx),
        "table2" => table2::paper(ctx),
        "table4" => table4::paper(ctx),
        "table5" => table5::paper(ctx),
        "fig6" => fig6::paper(ctx),
        "fig9" => fig9::paper(ctx),
        "table6" => table6::paper(ctx),
        "cavs-fig8" => cavs_fig8::paper(ctx),
        "cavs-fig10" => cavs_fig10::paper(ctx),
        "vpps" | "vpps-train" => vpps::paper(ctx),
        "peers" => peers::paper(ctx),
        "peers-train" => peers_train::paper(ctx),
        "policies" => policies::paper(ctx),
        "policies-exact" => policies_exact::paper(ctx),
        "policies-hard" => policies_hard::paper(ctx),
        "policies-unseen" => policies_unseen::paper(ctx),
        "optimise-scaling" => optimise_scaling::paper(ctx),
        other => unreachable!("item {other} has no builder"),
    }
}

/// The ED-Batch paper's name of one of our workloads.
pub fn paper_workload(w: &str) -> Option<&'static str> {
    Some(match w {
        "bilstm-tagger" => "BiLSTM-tagger",
        "bilstm-tagger-char" => "BiLSTM-tagger-withchar",
        "lstm-nmt" => "LSTM-NMT",
        "tree-lstm" => "TreeLSTM",
        "tree-gru" => "TreeGRU",
        "mv-rnn" => "MV-RNN",
        "tree-lstm-2type" => "TreeLSTM-2Type",
        "lattice-lstm" => "LatticeLSTM",
        "lattice-gru" => "LatticeGRU",
        _ => return None,
    })
}

/// The ED-Batch paper's name (Tables 2 and 5) of one of our cells.
pub fn paper_cell(c: &str) -> Option<&'static str> {
    Some(match c {
        "gru" => "GRUCell",
        "lstm" => "LSTMCell",
        "mv.internal" => "MVCell",
        "tree_gru.internal" => "TreeGRU-Internal",
        "tree_gru.leaf" => "TreeGRU-Leaf",
        "tree_lstm.internal" => "TreeLSTM-Internal",
        "tree_lstm.leaf" => "TreeLSTM-Leaf",
        _ => return None,
    })
}

/// The workload class ED-Batch averages over (§5.2): chains, trees, lattices.
pub fn class(w: &str) -> Option<&'static str> {
    Some(match w {
        "bilstm-tagger" | "bilstm-tagger-char" | "lstm-nmt" => "chains",
        "tree-lstm" | "tree-gru" | "mv-rnn" | "tree-lstm-2type" => "trees",
        "lattice-lstm" | "lattice-gru" => "lattices",
        _ => return None,
    })
}

/// `a, b and c` over the distinct values, for setup lines.
pub fn list<T: ToString>(v: &[T]) -> String {
    let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    match s.len() {
        0 => String::new(),
        1 => s[0].clone(),
        n => format!("{} and {}", s[..n - 1].join(", "), s[n - 1]),
    }
}

/// "quick mode: …" caveat when the rows are quick.
pub fn quick_note(rows: &RowSet, what: &str) -> Option<String> {
    rows.quick().unwrap_or(false).then(|| {
        format!("Quick mode: {what}; absolute numbers are not comparable with the paper's.")
    })
}

/// A panel of throughput against batch size (log2 x, log10 y), one line per
/// series: the shape of the batch-size curves (Cavs Fig. 8, VPPS).
pub fn throughput_panel(
    title: String,
    batches: &[usize],
    series: Vec<figures::LineSeries>,
) -> figures::Panel {
    figures::Panel::new(
        title,
        figures::LineChart {
            x_label: "batch size".into(),
            y_label: "instances / s (log scale)".into(),
            x_scale: figures::Scale::Log2,
            y_scale: figures::Scale::Log10,
            x: batches.iter().map(|b| *b as f64).collect(),
            series,
            reference_lines: Vec::new(),
        },
    )
}
