//! `engine fixtures`: regenerate the shipped fixtures (shapes and integer
//! annotations) from the raw ED-Batch data.

use std::path::PathBuf;

use engine::data::convert;
use serde::Serialize;

/// Arguments of `engine fixtures`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder of the raw ED-Batch data (trees/, lattice/, tags/, iwslt15/).
    #[arg(long)]
    source: PathBuf,
    /// Output folder for the fixture files (e.g. data/).
    #[arg(long)]
    out: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One converted data set in `engine fixtures --json`.
#[derive(Serialize)]
struct Row {
    dataset: &'static str,
    file: &'static str,
    samples: usize,
    bytes: usize,
    notes: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let reports = convert::convert_all(&a.source, &a.out)?;
    let rows: Vec<Row> = reports
        .into_iter()
        .map(|r| Row {
            dataset: r.dataset.name(),
            file: r.dataset.file_name(),
            samples: r.samples,
            bytes: r.bytes,
            notes: r.notes,
        })
        .collect();
    if a.json {
        return crate::cli::print_json(&rows);
    }
    for r in &rows {
        engine::outln!(
            "{:<12} {:<24} {:>6} samples {:>8} bytes {}",
            r.dataset,
            r.file,
            r.samples,
            r.bytes,
            r.notes.join("; ")
        );
    }
    Ok(())
}
