//! Line charts: numeric x (linear or log), lines with markers, gaps where a
//! point is missing.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::axis::Axis;
use crate::error::{FigureError, draw_err};
use crate::legend::SeriesStyles;
use crate::model::LineChart;
use crate::plot::{self, Frame};
use crate::style;

/// Pixels under the axis for the x tick labels.
const X_TICK_AREA: i32 = 30;

/// Draws a line chart into `area`.
pub(crate) fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &LineChart,
    title: Option<&str>,
    styles: &SeriesStyles,
) -> Result<(), FigureError> {
    let own = c.series.iter().filter_map(|s| s.x.as_deref()).flatten();
    let x = Axis::around(c.x_scale, c.x.iter().chain(own).copied(), false);
    let ys = c
        .series
        .iter()
        .flat_map(|s| s.y.iter().flatten().copied())
        .chain(c.reference_lines.iter().map(|r| r.y));
    let y = Axis::around(c.y_scale, ys, true);
    let x_fmt = |t: &f64| x.label(*t);
    let frame = Frame {
        title,
        x_label: &c.x_label,
        y_label: &c.y_label,
        x_range: (x.lo, x.hi),
        x_ticks: x.ticks.clone(),
        x_fmt: &x_fmt,
        y: &y,
        x_tick_area: X_TICK_AREA,
        x_grid: true,
    };
    let mut chart = plot::build(area, &frame)?;
    plot::draw_ref_lines(&mut chart, &c.reference_lines, &y, (x.lo, x.hi))?;
    for s in &c.series {
        let color = styles.color(&s.name);
        let points: Vec<Option<(f64, f64)>> = s
            .xs(&c.x)
            .iter()
            .zip(&s.y)
            .map(|(&xv, yv)| yv.map(|yv| (x.t(xv), y.t(yv))))
            .collect();
        // One path per run of present points.
        let runs = points
            .split(Option::is_none)
            .map(|run| run.iter().flatten().copied().collect::<Vec<_>>())
            .filter(|run| run.len() >= 2)
            .map(|run| PathElement::new(run, color.stroke_width(style::LINE_WIDTH)));
        chart.draw_series(runs).map_err(draw_err)?;
        let shape = styles.marker(&s.name);
        for &p in points.iter().flatten() {
            style::draw_marker(chart.plotting_area(), p, shape, color)?;
        }
    }
    Ok(())
}
