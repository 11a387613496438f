//! The shared legend: one band below the panels, entries flowing in centred
//! rows, so it never covers data and is never clipped.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{FigureError, draw_err};
use crate::model::{Chart, Figure};
use crate::style::{self, MarkerShape};

/// Colour and marker of every series name of a figure, by first appearance,
/// so one name looks the same in every panel.
pub(crate) struct SeriesStyles {
    names: Vec<String>,
}

impl SeriesStyles {
    pub fn of(fig: &Figure) -> Self {
        let mut names: Vec<String> = Vec::new();
        for panel in &fig.panels {
            for name in chart_names(&panel.chart) {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
        SeriesStyles { names }
    }

    fn index(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).unwrap_or(0)
    }

    pub fn color(&self, name: &str) -> RGBColor {
        style::series_color(self.index(name))
    }

    pub fn marker(&self, name: &str) -> MarkerShape {
        style::series_marker(self.index(name))
    }
}

fn chart_names(chart: &Chart) -> Vec<&str> {
    match chart {
        Chart::GroupedBars(c) => c.series.iter().map(|s| s.name.as_str()).collect(),
        Chart::Lines(c) => c.series.iter().map(|s| s.name.as_str()).collect(),
        Chart::StackedBars(c) => c.components.iter().map(|s| s.name.as_str()).collect(),
    }
}

/// What a legend entry shows left of its label.
enum Swatch {
    Bar(RGBColor),
    Line(RGBColor, MarkerShape),
    Paper,
    RefLine,
}

struct Entry {
    label: String,
    swatch: Swatch,
}

const SWATCH_W: i32 = 30;
const SWATCH_GAP: i32 = 8;
const ENTRY_GAP: i32 = 30;

/// A laid-out legend: entries with their pixel positions.
pub(crate) struct Legend {
    entries: Vec<(Entry, i32, usize)>,
    row_h: i32,
    rows: usize,
}

impl Legend {
    /// Collects the entries of `fig` and flows them into rows of `width` pixels.
    pub fn layout<DB: DrawingBackend>(
        root: &DrawingArea<DB, Shift>,
        fig: &Figure,
        styles: &SeriesStyles,
        width: i32,
    ) -> Result<Legend, FigureError> {
        let font = style::text(style::LEGEND_SIZE);
        let row_h = (style::LEGEND_SIZE * 1.45).round() as i32;
        let mut rows: Vec<Vec<(Entry, i32)>> = vec![Vec::new()];
        let mut x = 0;
        for entry in collect(fig, styles) {
            let (tw, _) = root
                .estimate_text_size(&entry.label, &font)
                .map_err(draw_err)?;
            let w = SWATCH_W + SWATCH_GAP + tw as i32;
            if x > 0 && x + w > width {
                rows.push(Vec::new());
                x = 0;
            }
            rows.last_mut().expect("one row").push((entry, x));
            x += w + ENTRY_GAP;
        }
        // Centre each row.
        let mut entries = Vec::new();
        let n_rows = rows.len();
        for (r, row) in rows.into_iter().enumerate() {
            let used = row.last().map_or(0, |(e, x)| {
                let tw = root.estimate_text_size(&e.label, &font).map_or(0, |s| s.0);
                x + SWATCH_W + SWATCH_GAP + tw as i32
            });
            let shift = (width - used).max(0) / 2;
            entries.extend(row.into_iter().map(|(e, x)| (e, x + shift, r)));
        }
        Ok(Legend {
            entries,
            row_h,
            rows: n_rows,
        })
    }

    /// Height of the legend band in pixels.
    pub fn height(&self) -> i32 {
        self.row_h * self.rows as i32
    }

    /// Draws the legend with its top-left corner at `(left, top)` of `root`.
    pub fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        left: i32,
        top: i32,
    ) -> Result<(), FigureError> {
        let font = style::text(style::LEGEND_SIZE).pos(Pos::new(HPos::Left, VPos::Center));
        for (entry, x, row) in &self.entries {
            let (x0, cy) = (left + x, top + self.row_h * *row as i32 + self.row_h / 2);
            let mid = (x0 + SWATCH_W / 2, cy);
            match entry.swatch {
                Swatch::Bar(c) => root
                    .draw(&Rectangle::new(
                        [(x0 + 3, cy - 8), (x0 + SWATCH_W - 3, cy + 8)],
                        c.filled(),
                    ))
                    .map_err(draw_err)?,
                Swatch::Line(c, shape) => {
                    root.draw(&PathElement::new(
                        vec![(x0, cy), (x0 + SWATCH_W, cy)],
                        c.stroke_width(style::LINE_WIDTH),
                    ))
                    .map_err(draw_err)?;
                    style::draw_marker(root, mid, shape, c)?
                }
                Swatch::Paper => style::draw_paper_marker(root, mid)?,
                Swatch::RefLine => root
                    .draw(&DashedPathElement::new(
                        vec![(x0, cy), (x0 + SWATCH_W, cy)],
                        6,
                        4,
                        style::REFERENCE.stroke_width(2),
                    ))
                    .map_err(draw_err)?,
            }
            root.draw_text(&entry.label, &font, (x0 + SWATCH_W + SWATCH_GAP, cy))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}

/// Series entries by first appearance, then "paper", then reference lines.
fn collect(fig: &Figure, styles: &SeriesStyles) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut paper = false;
    let mut refs: Vec<String> = Vec::new();
    for panel in &fig.panels {
        let line = matches!(panel.chart, Chart::Lines(_));
        for name in chart_names(&panel.chart) {
            if out.iter().any(|e| e.label == name) {
                continue;
            }
            let c = styles.color(name);
            let swatch = if line {
                Swatch::Line(c, styles.marker(name))
            } else {
                Swatch::Bar(c)
            };
            out.push(Entry {
                label: name.to_string(),
                swatch,
            });
        }
        let ref_lines = match &panel.chart {
            Chart::GroupedBars(c) => {
                paper |= c.series.iter().any(|s| s.paper.iter().any(Option::is_some));
                &c.reference_lines[..]
            }
            Chart::Lines(c) => &c.reference_lines[..],
            Chart::StackedBars(_) => &[],
        };
        for r in ref_lines {
            if !refs.contains(&r.label) {
                refs.push(r.label.clone());
            }
        }
    }
    if paper {
        out.push(Entry {
            label: "paper".to_string(),
            swatch: Swatch::Paper,
        });
    }
    out.extend(refs.into_iter().map(|label| Entry {
        label,
        swatch: Swatch::RefLine,
    }));
    out
}
