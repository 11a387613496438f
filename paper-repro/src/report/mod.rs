//! Reporting: from a rows folder to figures (PNG + SVG), CSV tables and
//! `REPORT.md`, with the papers' numbers beside ours. Needs no measuring, so
//! the figures of committed results regenerate with one command.

pub mod ctx;
pub mod fmt;
pub mod noise;
pub mod section;
pub mod table;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use figures::Stamp;

use crate::error::{ReproError, Result};
use crate::items::Item;
use crate::measure::MeasureLog;
use crate::published::Published;
use crate::rows::RowSet;
use ctx::{Ctx, write};
use section::{Section, Status};

/// What to report.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Rows folder.
    pub rows: PathBuf,
    /// Output folder (figures, CSVs, REPORT.md).
    pub out: PathBuf,
    /// Items, in report order.
    pub items: Vec<&'static Item>,
    /// Items named with `--only`: missing rows of one of these are an error
    /// rather than a "not measured" section.
    pub required: Vec<&'static str>,
    /// The command line, printed on figures and in the report.
    pub command: String,
}

/// What was reported.
#[derive(Clone, Debug)]
pub struct Reported {
    /// One section per item.
    pub sections: Vec<Section>,
    /// `<out>/REPORT.md`.
    pub report: PathBuf,
    /// Revision(s) the rows were measured at.
    pub revision: String,
    /// Whether the rows are quick-mode rows.
    pub quick: bool,
}

/// Builds every figure, table and REPORT.md.
pub fn report(opts: &ReportOptions) -> Result<Reported> {
    let published = Published::embedded()?;
    let log = MeasureLog::read(&opts.rows)?;
    let skipped = |name: &str| {
        log.as_ref()
            .is_some_and(|l| l.skipped.iter().any(|s| s.item == name))
    };
    let mut sets = Vec::new();
    for item in &opts.items {
        let set = RowSet::load(&opts.rows, item.spec)?;
        let required = opts.required.contains(&item.name);
        if set.is_none() && required && !item.cuda_only && !skipped(item.name) {
            return Err(ReproError::Rows {
                path: opts.rows.join(format!("{}.json", item.spec)),
                message: "no rows for this item: measure it first (`paper-repro measure`)".into(),
            });
        }
        sets.push(set);
    }
    // (Items named with --only were checked above, one by one.)
    if opts.required.is_empty()
        && sets.iter().all(Option::is_none)
        && opts.items.iter().any(|i| !i.cuda_only && !skipped(i.name))
    {
        return Err(ReproError::Rows {
            path: opts.rows.clone(),
            message: "no rows of any item here: measure first (`paper-repro measure`)".into(),
        });
    }
    let revisions: BTreeSet<String> = sets.iter().flatten().flat_map(|s| s.revisions()).collect();
    let revision = if revisions.is_empty() {
        experiments::provenance::workspace_revision()
    } else {
        revisions.iter().cloned().collect::<Vec<_>>().join(", ")
    };
    let quick = sets.iter().flatten().any(|s| s.quick() == Some(true));
    std::fs::create_dir_all(&opts.out).map_err(|e| ReproError::io(&opts.out, e))?;
    let ctx = Ctx {
        out: opts.out.clone(),
        stamp: Stamp::new(opts.command.clone(), revision.clone()),
        published: &published,
    };
    let mut sections = Vec::new();
    for (item, set) in opts.items.iter().zip(&sets) {
        sections.push(section(item, set.as_ref(), &ctx, log.as_ref())?);
    }
    let text = markdown(opts, &sections, &sets, log.as_ref(), &revision, quick);
    let report = opts.out.join("REPORT.md");
    write(&report, text.as_bytes())?;
    Ok(Reported {
        sections,
        report,
        revision,
        quick,
    })
}

/// One item's section, or why it has none (with the paper's statements).
fn section(
    item: &'static Item,
    set: Option<&RowSet>,
    ctx: &Ctx,
    log: Option<&MeasureLog>,
) -> Result<Section> {
    let mut s = bare_section(item, set, ctx, log)?;
    if s.figure.is_none() {
        s.paper = crate::figs::paper(item, ctx)?;
    }
    s.paper_title = ctx.published.title(item.paper).map(str::to_string);
    Ok(s)
}

fn bare_section(
    item: &'static Item,
    set: Option<&RowSet>,
    ctx: &Ctx,
    log: Option<&MeasureLog>,
) -> Result<Section> {
    let Some(set) = set else {
        if let Some(s) = log.and_then(|l| l.skipped.iter().find(|s| s.item == item.name)) {
            return Ok(Section::without_data(
                item,
                Status::Skipped,
                s.reason.clone(),
            ));
        }
        if item.cuda_only {
            // Nothing about the machine drawing the report: it did not measure.
            let reason = format!(
                "Not measured: needs a CUDA device (`paper-repro --device cuda --only {}`); \
                 no `{}.json` in the rows folder.",
                item.name, item.spec
            );
            return Ok(Section::without_data(item, Status::Skipped, reason));
        }
        return Ok(Section::without_data(
            item,
            Status::NoData,
            format!("Not measured: no `{}.json` in the rows folder.", item.spec),
        ));
    };
    let errors = set.errors();
    let first = errors.first().map(|e| e.to_string()).unwrap_or_default();
    let cuda = |e: &str| {
        let e = e.strip_prefix("CUDA unavailable: ").unwrap_or(e);
        format!("CUDA not available: {e}")
    };
    if set.ok_count() == 0 {
        let reason = if first.contains("CUDA") || first.contains("cuda") {
            cuda(&first)
        } else if first.is_empty() {
            "The rows file holds no rows.".into()
        } else {
            format!("Every run failed; the first error: {first}")
        };
        let mut s = Section::without_data(item, Status::NoData, reason);
        s.rows_total = set.rows.len();
        return Ok(s);
    }
    let mut s = crate::figs::build(item, ctx, set)?;
    s.rows_total = set.rows.len();
    s.rows_ok = set.ok_count();
    if !errors.is_empty() {
        s.status = Status::Partial;
        let why = if first.contains("CUDA") {
            cuda(&first)
        } else {
            first
        };
        s.notes.push(format!(
            "{} runs failed; the first error: {why}",
            errors.len()
        ));
    }
    Ok(s)
}

fn machine(sets: &[Option<RowSet>]) -> String {
    let Some(r) = sets.iter().flatten().flat_map(|s| s.rows.first()).next() else {
        return "unknown machine".into();
    };
    let m = &r.provenance.machine;
    let when = sets
        .iter()
        .flatten()
        .flat_map(|s| s.rows.iter().map(|r| r.provenance.timestamp))
        .max()
        .map(|t| format!(", rows written up to {} (UTC)", fmt::date(t)))
        .unwrap_or_default();
    // The header names the CPU; GPU rows say which CUDA device they ran on.
    let gpus: BTreeSet<&str> = sets
        .iter()
        .flatten()
        .flat_map(|s| s.ok().filter_map(|r| r.config.device()))
        .filter(|d| crate::specs::is_cuda(d))
        .collect();
    let gpu = if gpus.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = gpus.iter().map(|d| format!("`{d}`")).collect();
        format!("; GPU rows on {}", names.join(", "))
    };
    format!("`{}` ({}, {} cores{gpu}){when}", m.hostname, m.cpu, m.cores)
}

fn markdown(
    opts: &ReportOptions,
    sections: &[Section],
    sets: &[Option<RowSet>],
    log: Option<&MeasureLog>,
    revision: &str,
    quick: bool,
) -> String {
    let rows_dir = rel(&opts.rows, &opts.out);
    let mut out = String::from("# batchlab: the papers' figures and tables, reproduced\n\n");
    out += &format!(
        "Generated by `{}` from the rows in `{rows_dir}/`, measured at revision `{revision}` on {}.\n\n",
        opts.command,
        machine(sets)
    );
    if quick {
        out += "**Quick mode**: small sizes and few repeats, a smoke test of the whole pipeline; \
                absolute numbers are not comparable with the papers'. The full run is \
                `paper-repro` without `--quick`.\n\n";
    }
    if let Some(l) = log {
        out += &timing_line(l);
    }
    out += "Published numbers come from `paper-repro/published/{ed-batch,cavs,vpps}.yaml`: every \
            value carries its source (the paper, its table or figure and section) and the \
            verbatim quote it was read from, so the paper's own text search finds it. Where a \
            paper gives a figure without numbers, only what its text states is compared, and \
            the section says so. In figures, black diamonds are the papers' values. Every \
            timing ratio carries its noise (± the relative spread of the timed runs behind \
            it); an average of ratios that disagree by more than that says so.\n\n";
    out += "| item | status | rows (ok / all) | figure |\n|---|---|---|---|\n";
    for s in sections {
        let status = match s.status {
            Status::Ok => "ok",
            Status::Partial => "partial",
            Status::Skipped => "skipped",
            Status::NoData => "no data",
        };
        let fig = s
            .figure
            .as_ref()
            .map(|f| format!("[{f}.png]({f}.png)"))
            .unwrap_or_else(|| "—".into());
        out += &format!(
            "| [{}](#{}) | {status} | {} / {} | {fig} |\n",
            s.item.name,
            anchor(s.item.title),
            s.rows_ok,
            s.rows_total
        );
    }
    out.push('\n');
    for s in sections {
        out += &s.markdown();
        out.push('\n');
    }
    out
}

/// The header's account of the measuring: every invocation whose rows the
/// folder holds (a resumed run's earlier sweeps included), and what the
/// latest one did.
fn timing_line(l: &MeasureLog) -> String {
    let total: f64 = l.specs.iter().map(|s| s.all_seconds()).sum();
    let invocations = l
        .specs
        .iter()
        .map(|s| s.invocations.max(1))
        .max()
        .unwrap_or(1);
    let parts: Vec<String> = l
        .specs
        .iter()
        .map(|s| {
            let n = s.invocations.max(1);
            let over = if n > 1 {
                format!(" over {n} invocations")
            } else {
                String::new()
            };
            format!("{} {:.1} s{over}", s.item, s.all_seconds())
        })
        .collect();
    let reused: usize = l.specs.iter().map(|s| s.skipped).sum();
    let ran: usize = l.specs.iter().map(|s| s.ran).sum();
    let latest = if reused > 0 {
        format!(
            " The latest invocation (`{}`, {:.0} s) measured {ran} runs and reused {reused} rows \
             of earlier ones (`--fresh` re-measures).",
            l.command, l.seconds
        )
    } else {
        format!(" Measured by `{}`.", l.command)
    };
    format!(
        "Measuring these rows took {total:.0} s in {} ({}); replay device `{}`.{latest}\n\n",
        if invocations > 1 {
            format!("up to {invocations} invocations")
        } else {
            "one invocation".to_string()
        },
        parts.join(", "),
        l.device,
    )
}

/// GitHub's heading anchor.
fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `path` relative to `base` when inside it, else as given.
fn rel(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}
