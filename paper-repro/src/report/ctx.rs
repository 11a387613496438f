//! What every item builder needs: the output folder, the figure stamp, the
//! published numbers; and the writers that record each file in the section.

use std::path::{Path, PathBuf};

use figures::{Figure, Stamp};

use crate::error::{ReproError, Result};
use crate::items::Paper;
use crate::published::{PubValue, Published, cite};
use crate::report::section::Section;
use crate::report::table::Table;

/// The report's context.
pub struct Ctx<'a> {
    /// Output folder.
    pub out: PathBuf,
    /// Stamp printed on every figure.
    pub stamp: Stamp,
    /// The papers' numbers.
    pub published: &'a Published,
}

impl Ctx<'_> {
    /// Renders `fig` as `<out>/<stem>.png` and `.svg` and records them.
    pub fn figure(&self, sec: &mut Section, stem: &str, mut fig: Figure) -> Result<()> {
        fig.stamp = self.stamp.clone();
        figures::render(&fig, &self.out.join(stem)).map_err(|source| ReproError::Figure {
            stem: stem.to_string(),
            source,
        })?;
        sec.figure = Some(stem.to_string());
        sec.files.push(format!("{stem}.png"));
        sec.files.push(format!("{stem}.svg"));
        Ok(())
    }

    /// Writes `t` as `<out>/<t.stem>.csv` and adds it to the section.
    pub fn table(&self, sec: &mut Section, t: Table) -> Result<()> {
        let file = format!("{}.csv", t.stem);
        write(&self.out.join(&file), t.csv().as_bytes())?;
        sec.files.push(file);
        sec.tables.push(t);
        Ok(())
    }

    /// A published value.
    pub fn val(&self, paper: Paper, id: &str) -> Result<&PubValue> {
        self.published.get(paper, id)
    }

    /// A published number, if the paper gives it.
    pub fn num(&self, paper: Paper, id: &str) -> Option<f64> {
        self.published.num(paper, id)
    }

    /// A statement as a Markdown bullet: the quote and its source.
    pub fn say(&self, paper: Paper, id: &str) -> Result<String> {
        let s = self.published.statement(paper, id)?;
        Ok(format!("“{}” ({})", s.quote, cite(&s.source)))
    }

    /// A value's quote as a Markdown bullet.
    pub fn say_value(&self, paper: Paper, id: &str) -> Result<String> {
        let v = self.published.get(paper, id)?;
        let derived = v
            .derived
            .as_deref()
            .map(|d| format!("; read as {} = {d}", v.value))
            .unwrap_or_default();
        Ok(format!("“{}” ({}{derived})", v.quote, cite(&v.source)))
    }
}

/// Writes a file atomically (temporary file + rename).
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
    }
    engine::io::write_atomic(path, bytes).map_err(|e| ReproError::io(path, e))
}
