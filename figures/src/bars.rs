//! Grouped and stacked bar charts.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::axis::Axis;
use crate::categories::CategoryLabels;
use crate::error::{FigureError, draw_err};
use crate::legend::SeriesStyles;
use crate::model::{GroupedBars, Scale, StackedBars};
use crate::plot::{self, Frame};
use crate::style;

/// Fraction of a category slot covered by its group of bars.
const GROUP_WIDTH: f64 = 0.8;

/// Draws grouped bars into `area`; category labels go onto `root`.
pub(crate) fn draw_grouped<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    c: &GroupedBars,
    title: Option<&str>,
    styles: &SeriesStyles,
) -> Result<(), FigureError> {
    let values = c
        .series
        .iter()
        .flat_map(|s| s.values.iter().chain(&s.paper).flatten())
        .chain(c.reference_lines.iter().map(|r| &r.y));
    let y = Axis::around(c.y_scale, values.copied(), true);
    let n = c.categories.len();
    let labels = category_labels(root, area, &c.categories, &y)?;
    let x_range = (0.0, n as f64);
    let no_x = |_: &f64| String::new();
    let frame = Frame {
        title,
        x_label: &c.x_label,
        y_label: &c.y_label,
        x_range,
        x_ticks: Vec::new(),
        x_fmt: &no_x,
        y: &y,
        x_tick_area: labels.height(),
        x_grid: false,
    };
    let mut chart = plot::build(area, &frame)?;
    let k = c.series.len() as f64;
    let bar_w = GROUP_WIDTH / k;
    let left = |cat: usize, j: usize| cat as f64 + (1.0 - GROUP_WIDTH) / 2.0 + j as f64 * bar_w;
    for (j, s) in c.series.iter().enumerate() {
        let color = styles.color(&s.name);
        let rects = s.values.iter().enumerate().filter_map(|(i, v)| {
            let v = (*v)?;
            let (x0, x1) = (left(i, j) + 0.06 * bar_w, left(i, j) + 0.94 * bar_w);
            Some(Rectangle::new(
                [(x0, base(&y)), (x1, y.t(v))],
                color.filled(),
            ))
        });
        chart.draw_series(rects).map_err(draw_err)?;
        // A point without a value (not measured, e.g. left out of the grid)
        // is marked by a small grey cross at the bar's foot, so an empty
        // slot is never mistaken for a value too small to see.
        let foot = base(&y) + 0.02 * (y.hi - y.lo);
        let crosses = s
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_none())
            .map(|(i, _)| {
                Cross::new(
                    (left(i, j) + bar_w / 2.0, foot),
                    5,
                    style::MUTED.stroke_width(2),
                )
            });
        chart.draw_series(crosses).map_err(draw_err)?;
    }
    plot::draw_ref_lines(&mut chart, &c.reference_lines, &y, x_range)?;
    for (j, s) in c.series.iter().enumerate() {
        for (i, v) in s.paper.iter().enumerate() {
            if let Some(v) = *v {
                let at = (left(i, j) + bar_w / 2.0, y.t(v));
                style::draw_paper_marker(chart.plotting_area(), at)?;
            }
        }
    }
    let anchors: Vec<_> = (0..n)
        .map(|i| chart.backend_coord(&(i as f64 + 0.5, y.lo)))
        .collect();
    labels.draw(root, &anchors)
}

/// Draws stacked bars into `area`; category labels go onto `root`.
pub(crate) fn draw_stacked<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    c: &StackedBars,
    title: Option<&str>,
    styles: &SeriesStyles,
) -> Result<(), FigureError> {
    let n = c.categories.len();
    let totals: Vec<f64> = (0..n)
        .map(|i| c.components.iter().map(|s| s.values[i]).sum())
        .collect();
    let y = Axis::around(Scale::Linear, totals.iter().copied(), true);
    let labels = category_labels(root, area, &c.categories, &y)?;
    let x_range = (0.0, n as f64);
    let no_x = |_: &f64| String::new();
    let frame = Frame {
        title,
        x_label: &c.x_label,
        y_label: &c.y_label,
        x_range,
        x_ticks: Vec::new(),
        x_fmt: &no_x,
        y: &y,
        x_tick_area: labels.height(),
        x_grid: false,
    };
    let mut chart = plot::build(area, &frame)?;
    let half = 0.3;
    let mut bottoms = vec![0.0; n];
    for s in &c.components {
        let color = styles.color(&s.name);
        let mut rects = Vec::with_capacity(n);
        for (i, &v) in s.values.iter().enumerate() {
            let (lo, hi) = (bottoms[i], bottoms[i] + v);
            bottoms[i] = hi;
            if v > 0.0 {
                let x = i as f64 + 0.5;
                rects.push(Rectangle::new(
                    [(x - half, lo), (x + half, hi)],
                    color.filled(),
                ));
            }
        }
        chart.draw_series(rects).map_err(draw_err)?;
    }
    // Thin white separators keep adjacent components apart.
    let mut bottoms = vec![0.0; n];
    for s in &c.components {
        let lines = s.values.iter().enumerate().map(|(i, &v)| {
            bottoms[i] += v;
            let x = i as f64 + 0.5;
            PathElement::new(
                vec![(x - half, bottoms[i]), (x + half, bottoms[i])],
                WHITE.stroke_width(1),
            )
        });
        chart
            .draw_series(lines.collect::<Vec<_>>())
            .map_err(draw_err)?;
    }
    let anchors: Vec<_> = (0..n)
        .map(|i| chart.backend_coord(&(i as f64 + 0.5, y.lo)))
        .collect();
    labels.draw(root, &anchors)
}

/// Where bars start: 0 on a linear axis, the bottom of a log axis.
fn base(y: &Axis) -> f64 {
    if y.scale.is_log() { y.lo } else { 0.0 }
}

/// Lays out category labels for the plot width `area` will have.
fn category_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    categories: &[String],
    y: &Axis,
) -> Result<CategoryLabels, FigureError> {
    let panel_w = area.dim_in_pixel().0 as i32;
    let plot_w = plot::plot_width(panel_w, plot::y_area_width(area, y)?);
    let slot = plot_w / categories.len().max(1) as i32;
    // Labels may take at most 45% of the panel height.
    let max_height = area.dim_in_pixel().1 as i32 * 45 / 100;
    CategoryLabels::layout(root, categories, slot, max_height)
}
