//! One panel's axes: builds the plotters chart (caption, axis labels, grid,
//! y ticks) that the bar and line modules then draw into.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

use crate::axis::Axis;
use crate::error::{FigureError, draw_err};
use crate::style;

/// A linear f64 axis with explicit tick positions (log scales are already
/// transformed by [`crate::axis`]). Labels come from the mesh formatters.
pub(crate) struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let len = (limit.1 - limit.0) as f64;
        if self.hi <= self.lo || !v.is_finite() {
            return limit.0 + (len / 2.0) as i32;
        }
        limit.0 + (len * (v - self.lo) / (self.hi - self.lo)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// Coordinates of every panel.
pub(crate) type Coord = Cartesian2d<Ticked, Ticked>;

/// A chart context of one panel.
pub(crate) type Chart<'a, DB> = ChartContext<'a, DB, Coord>;

/// Margins around the plotting area inside a panel, in pixels.
pub(crate) const MARGIN_TOP: i32 = 12;
pub(crate) const MARGIN_RIGHT: i32 = 28;
pub(crate) const MARGIN_LEFT: i32 = 6;
const TICK_MARK: i32 = 6;

/// What the frame of one panel shows.
pub(crate) struct Frame<'a> {
    pub title: Option<&'a str>,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x_range: (f64, f64),
    /// Tick positions on x (empty for bar charts, which label categories).
    pub x_ticks: Vec<f64>,
    pub x_fmt: &'a dyn Fn(&f64) -> String,
    pub y: &'a Axis,
    /// Pixels under the axis reserved for tick or category labels.
    pub x_tick_area: i32,
    /// Draw vertical grid lines at the x ticks.
    pub x_grid: bool,
}

/// Pixels needed left of the plot for the y tick labels and the y label.
pub(crate) fn y_area_width<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    y: &Axis,
) -> Result<i32, FigureError> {
    let font = style::text(style::TICK_SIZE);
    let mut widest = 0;
    for &t in &y.ticks {
        widest = widest.max(
            area.estimate_text_size(&y.label(t), &font)
                .map_err(draw_err)?
                .0,
        );
    }
    Ok(widest as i32 + TICK_MARK + 10 + desc_height())
}

/// Height of an axis description (the x or y label) plus its padding.
pub(crate) fn desc_height() -> i32 {
    (style::AXIS_DESC_SIZE * 1.5).round() as i32
}

/// Width of the plotting area of a panel of width `panel_w`.
pub(crate) fn plot_width(panel_w: i32, y_area: i32) -> i32 {
    panel_w - y_area - MARGIN_LEFT - MARGIN_RIGHT
}

/// Builds the chart of one panel and draws its mesh (grid, ticks, labels).
pub(crate) fn build<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    f: &Frame<'_>,
) -> Result<Chart<'a, DB>, FigureError> {
    let y_area = y_area_width(area, f.y)?;
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(MARGIN_TOP)
        .margin_right(MARGIN_RIGHT)
        .margin_left(MARGIN_LEFT)
        .margin_bottom(4)
        .x_label_area_size(f.x_tick_area + desc_height())
        .y_label_area_size(y_area);
    if let Some(title) = f.title {
        builder.caption(title, style::bold(style::PANEL_TITLE_SIZE));
    }
    let x = Ticked {
        lo: f.x_range.0,
        hi: f.x_range.1,
        ticks: f.x_ticks.clone(),
    };
    let y = Ticked {
        lo: f.y.lo,
        hi: f.y.hi,
        ticks: f.y.ticks.clone(),
    };
    let mut chart = builder.build_cartesian_2d(x, y).map_err(draw_err)?;
    let y_fmt = |t: &f64| f.y.label(*t);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(f.x_label)
        .y_desc(f.y_label)
        .axis_desc_style(style::text(style::AXIS_DESC_SIZE))
        .x_label_style(style::text(style::TICK_SIZE))
        .y_label_style(style::text(style::TICK_SIZE))
        .x_label_formatter(f.x_fmt)
        .y_label_formatter(&y_fmt)
        .set_all_tick_mark_size(TICK_MARK)
        .bold_line_style(style::GRID.stroke_width(1))
        .axis_style(style::TEXT.stroke_width(1));
    if !f.x_grid {
        mesh.disable_x_mesh();
    }
    mesh.draw().map_err(draw_err)?;
    Ok(chart)
}

/// Draws dashed horizontal reference lines across the plot.
pub(crate) fn draw_ref_lines<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    lines: &[crate::model::RefLine],
    y: &Axis,
    x_range: (f64, f64),
) -> Result<(), FigureError> {
    for line in lines {
        let t = y.t(line.y);
        chart
            .draw_series(std::iter::once(plotters::element::DashedPathElement::new(
                vec![(x_range.0, t), (x_range.1, t)],
                8,
                5,
                style::REFERENCE.stroke_width(2),
            )))
            .map_err(draw_err)?;
    }
    Ok(())
}
