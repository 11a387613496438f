//! One item's part of REPORT.md: title, image, tables (ours beside the
//! paper's), the paper's statements, and a one-line reading.

use serde::Serialize;

use crate::items::Item;
use crate::report::table::Table;

/// What became of an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Figure and tables from successful rows.
    Ok,
    /// Drawn, but some runs failed.
    Partial,
    /// Not measured on purpose (e.g. needs CUDA).
    Skipped,
    /// No usable rows (missing, or every run failed).
    NoData,
}

/// One item's section.
#[derive(Clone, Debug)]
pub struct Section {
    /// The item.
    pub item: &'static Item,
    /// Outcome.
    pub status: Status,
    /// Why it was skipped or has no data.
    pub reason: Option<String>,
    /// Figure file stem (`<stem>.png`, `<stem>.svg`), if drawn.
    pub figure: Option<String>,
    /// What was measured (grid, device, mode).
    pub setup: String,
    /// Our numbers with the paper's beside them.
    pub tables: Vec<Table>,
    /// The paper's statements, as Markdown bullet text.
    pub paper: Vec<String>,
    /// The title of the paper they quote.
    pub paper_title: Option<String>,
    /// The one-line reading of the difference.
    pub reading: String,
    /// Caveats.
    pub notes: Vec<String>,
    /// Files written, relative to the output folder.
    pub files: Vec<String>,
    /// Rows read.
    pub rows_total: usize,
    /// Of those, successful.
    pub rows_ok: usize,
}

impl Section {
    /// An empty section with status `Ok`.
    pub fn new(item: &'static Item) -> Section {
        Section {
            item,
            status: Status::Ok,
            reason: None,
            figure: None,
            setup: String::new(),
            tables: Vec::new(),
            paper: Vec::new(),
            paper_title: None,
            reading: String::new(),
            notes: Vec::new(),
            files: Vec::new(),
            rows_total: 0,
            rows_ok: 0,
        }
    }

    /// A section for an item that was not drawn.
    pub fn without_data(item: &'static Item, status: Status, reason: String) -> Section {
        let mut s = Section::new(item);
        s.status = status;
        s.reason = Some(reason);
        s
    }

    /// The section in Markdown (level-2 heading).
    pub fn markdown(&self) -> String {
        let mut out = format!("## {}\n\n", self.item.title);
        out += &format!("Item `{}`, spec `{}`. ", self.item.name, self.item.spec);
        match self.status {
            Status::Ok => out += &format!("{} rows.\n\n", self.rows_ok),
            Status::Partial => {
                out += &format!(
                    "{} of {} runs succeeded; the figure and tables use those.\n\n",
                    self.rows_ok, self.rows_total
                )
            }
            Status::Skipped => out += "**Skipped.**\n\n",
            Status::NoData => out += "**No figure.**\n\n",
        }
        if let Some(r) = &self.reason {
            out += &format!("{r}\n\n");
        }
        if let Some(stem) = &self.figure {
            out += &format!("![{}]({stem}.png)\n\n", self.item.name);
            out += &format!("Files: [`{stem}.png`]({stem}.png), [`{stem}.svg`]({stem}.svg)");
            for t in &self.tables {
                out += &format!(", [`{0}.csv`]({0}.csv)", t.stem);
            }
            out += "\n\n";
        }
        if !self.setup.is_empty() {
            out += &format!("**Setup.** {}\n\n", self.setup);
        }
        for t in &self.tables {
            if !t.caption.is_empty() {
                out += &format!("{}\n\n", t.caption);
            }
            out += &t.markdown();
            out.push('\n');
        }
        if !self.paper.is_empty() {
            match &self.paper_title {
                Some(t) => out += &format!("**The paper says** (*{t}*):\n\n"),
                None => out += "**The paper says:**\n\n",
            }
            for p in &self.paper {
                out += &format!("- {p}\n");
            }
            out.push('\n');
        }
        if !self.reading.is_empty() {
            out += &format!("**Reading.** {}\n\n", self.reading);
        }
        for n in &self.notes {
            out += &format!("> {n}\n>\n");
        }
        if !self.notes.is_empty() {
            out.truncate(out.len() - 2);
            out.push('\n');
        }
        out
    }
}
