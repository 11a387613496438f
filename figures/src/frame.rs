//! The layout of a whole figure: title band, grid of panels, legend band,
//! stamp line; and the dispatch of each panel to its chart kind.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{FigureError, draw_err};
use crate::legend::{Legend, SeriesStyles};
use crate::model::{Chart, Figure};
use crate::style::{self, MARGIN};
use crate::{bars, lines};

/// Smallest height of one row of panels, in pixels.
const MIN_PANEL_H: i32 = 160;

/// Draws `fig` (already validated) onto `root`.
pub(crate) fn draw_figure<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
) -> Result<(), FigureError> {
    root.fill(&WHITE).map_err(draw_err)?;
    let (w, h) = root.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    let styles = SeriesStyles::of(fig);

    let title = fitted(root, &fig.title, style::TITLE_SIZE, w - 2 * MARGIN, true)?;
    let title_h = (style::TITLE_SIZE * 1.5).round() as i32;
    let title_style = title.pos(Pos::new(HPos::Center, VPos::Top));
    root.draw_text(&fig.title, &title_style, (w / 2, MARGIN))
        .map_err(draw_err)?;

    let stamp_text = fig.stamp.text();
    let stamp = fitted(root, &stamp_text, style::STAMP_SIZE, w - 2 * MARGIN, false)?;
    let stamp_style = stamp
        .color(&style::STAMP_TEXT)
        .pos(Pos::new(HPos::Left, VPos::Bottom));
    let stamp_h = (style::STAMP_SIZE * 1.5).round() as i32;
    root.draw_text(&stamp_text, &stamp_style, (MARGIN, h - MARGIN / 2))
        .map_err(draw_err)?;

    let legend = Legend::layout(root, fig, &styles, w - 2 * MARGIN)?;
    let legend_top = h - MARGIN / 2 - stamp_h - 6 - legend.height();
    legend.draw(root, MARGIN, legend_top)?;

    let cols = fig.columns.min(fig.panels.len()).max(1);
    let rows = fig.panels.len().div_ceil(cols);
    let top = MARGIN + title_h;
    let bottom = legend_top - 10;
    if bottom - top < MIN_PANEL_H * rows as i32 {
        let need = |have: i32, room: i32| (have - room + MIN_PANEL_H * rows as i32) as u32;
        return Err(FigureError::TooSmall {
            width: w as u32,
            height: h as u32,
            min_width: w as u32,
            min_height: need(h, bottom - top),
        });
    }
    let area = root.margin(top, h - bottom, MARGIN, MARGIN);
    let cells = area.split_evenly((rows, cols));
    let many = fig.panels.len() > 1;
    for (i, (panel, cell)) in fig.panels.iter().zip(&cells).enumerate() {
        let title = panel.title.as_deref();
        let res = match &panel.chart {
            Chart::GroupedBars(c) => bars::draw_grouped(root, cell, c, title, &styles),
            Chart::StackedBars(c) => bars::draw_stacked(root, cell, c, title, &styles),
            Chart::Lines(c) => lines::draw(cell, c, title, &styles),
        };
        if many {
            res.map_err(|e| e.in_panel(i, title))?;
        } else {
            res?;
        }
    }
    Ok(())
}

/// The style of `text` at `size`, shrunk (down to 60%) until it fits `width`.
fn fitted<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    text: &str,
    size: f64,
    width: i32,
    bold: bool,
) -> Result<TextStyle<'static>, FigureError> {
    let make = |s: f64| if bold { style::bold(s) } else { style::text(s) };
    let mut s = size;
    while s > size * 0.6 {
        let (tw, _) = root.estimate_text_size(text, &make(s)).map_err(draw_err)?;
        if tw as i32 <= width {
            break;
        }
        s -= 1.0;
    }
    Ok(make(s))
}
