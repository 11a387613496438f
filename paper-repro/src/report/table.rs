//! A table of text cells, written both as a Markdown table (REPORT.md) and
//! as CSV (`<out>/<stem>.csv`), from the same cells.

/// A table: header and rows of already formatted cells. An empty cell is
/// "no value" (`—` in Markdown, empty in CSV).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// File stem of the CSV (`fig6-ratios` → `fig6-ratios.csv`).
    pub stem: String,
    /// One line above the table in REPORT.md.
    pub caption: String,
    /// Column names.
    pub headers: Vec<String>,
    /// Rows, each as long as `headers`.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these columns.
    pub fn new(stem: impl Into<String>, caption: impl Into<String>, headers: &[&str]) -> Table {
        Table {
            stem: stem.into(),
            caption: caption.into(),
            headers: headers.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (padded or cut to the header's length).
    pub fn push(&mut self, row: Vec<String>) {
        let mut row = row;
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// The table in GitHub Markdown.
    pub fn markdown(&self) -> String {
        let esc = |s: &str| {
            if s.is_empty() {
                "—".to_string()
            } else {
                s.replace('|', "\\|")
            }
        };
        let mut out = String::new();
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        out += &line(self.headers.iter().map(|h| esc(h)).collect());
        out += &line(self.headers.iter().map(|_| "---".to_string()).collect());
        for r in &self.rows {
            out += &line(r.iter().map(|c| esc(c)).collect());
        }
        out
    }

    /// The table as CSV, header first (batchlab's one CSV writer,
    /// [`experiments::output::csv_text`]).
    pub fn csv(&self) -> String {
        // Rows are padded to the header's length, which is all the writer checks.
        experiments::output::csv_text(&self.headers, &self.rows).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_and_csv_from_the_same_cells() {
        let mut t = Table::new("t", "cap", &["a", "b"]);
        t.push(vec!["1|2".into(), "".into()]);
        t.push(vec!["x, y".into()]);
        assert_eq!(
            t.markdown(),
            "| a | b |\n| --- | --- |\n| 1\\|2 | — |\n| x, y | — |\n"
        );
        assert_eq!(t.csv(), "a,b\n1|2,\n\"x, y\",\n");
    }
}
