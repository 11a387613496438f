//! Checks a figure before anything is drawn, so bad data gives a typed error
//! naming the series and category instead of a panic or a broken image.

use std::collections::HashSet;

use crate::error::FigureError;
use crate::model::{Chart, Figure, GroupedBars, LineChart, RefLine, Scale, StackedBars};

/// Smallest accepted image width, in pixels.
pub const MIN_WIDTH: u32 = 320;
/// Smallest accepted image height, in pixels.
pub const MIN_HEIGHT: u32 = 240;
/// Largest accepted image side, in pixels.
pub const MAX_SIDE: u32 = 16_384;

/// Checks the whole figure: sizes, texts, and every panel's data.
pub fn validate(fig: &Figure) -> Result<(), FigureError> {
    if fig.width < MIN_WIDTH || fig.height < MIN_HEIGHT {
        return Err(FigureError::TooSmall {
            width: fig.width,
            height: fig.height,
            min_width: MIN_WIDTH,
            min_height: MIN_HEIGHT,
        });
    }
    if fig.width > MAX_SIDE || fig.height > MAX_SIDE {
        return Err(FigureError::TooLarge {
            width: fig.width,
            height: fig.height,
            max: MAX_SIDE,
        });
    }
    require_text(&fig.title, "figure title")?;
    if fig.panels.is_empty() {
        return Err(FigureError::NoPanels);
    }
    if fig.columns == 0 {
        return Err(FigureError::ZeroColumns);
    }
    for (i, panel) in fig.panels.iter().enumerate() {
        let res = validate_chart(&panel.chart);
        if fig.panels.len() > 1 {
            res.map_err(|e| e.in_panel(i, panel.title.as_deref()))?;
        } else {
            res?;
        }
    }
    Ok(())
}

/// Checks one chart.
pub fn validate_chart(chart: &Chart) -> Result<(), FigureError> {
    match chart {
        Chart::GroupedBars(c) => grouped(c),
        Chart::Lines(c) => lines(c),
        Chart::StackedBars(c) => stacked(c),
    }
}

fn require_text(text: &str, what: &str) -> Result<(), FigureError> {
    if text.trim().is_empty() {
        return Err(FigureError::MissingText {
            what: what.to_string(),
        });
    }
    Ok(())
}

fn labels(x: &str, y: &str) -> Result<(), FigureError> {
    require_text(x, "x label")?;
    require_text(y, "y label")
}

/// Checks names are present and unique.
fn names<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), FigureError> {
    let mut seen = HashSet::new();
    for name in names {
        require_text(name, "a series name")?;
        if !seen.insert(name) {
            return Err(FigureError::DuplicateSeries {
                series: name.to_string(),
            });
        }
    }
    Ok(())
}

fn length(
    series: &str,
    what: &'static str,
    expected: usize,
    found: usize,
) -> Result<(), FigureError> {
    if expected != found {
        return Err(FigureError::LengthMismatch {
            series: series.to_string(),
            what,
            expected,
            found,
        });
    }
    Ok(())
}

/// Checks one value: finite, and positive on a log axis.
fn value(series: &str, at: &str, v: f64, scale: Scale, axis: char) -> Result<(), FigureError> {
    if !v.is_finite() {
        return Err(FigureError::NonFinite {
            series: series.to_string(),
            at: at.to_string(),
            value: v,
        });
    }
    if scale.is_log() && v <= 0.0 {
        return Err(FigureError::NonPositiveOnLog {
            series: series.to_string(),
            at: at.to_string(),
            value: v,
            axis,
        });
    }
    Ok(())
}

fn ref_lines(lines: &[RefLine], scale: Scale) -> Result<(), FigureError> {
    for line in lines {
        require_text(&line.label, "a reference line label")?;
        value(&line.label, "reference line", line.y, scale, 'y')?;
    }
    Ok(())
}

fn grouped(c: &GroupedBars) -> Result<(), FigureError> {
    labels(&c.x_label, &c.y_label)?;
    if c.series.is_empty() {
        return Err(FigureError::NoSeries);
    }
    if c.categories.is_empty() {
        return Err(FigureError::NoCategories { what: "category" });
    }
    names(c.series.iter().map(|s| s.name.as_str()))?;
    let n = c.categories.len();
    let mut any = false;
    for s in &c.series {
        length(&s.name, "values", n, s.values.len())?;
        if !s.paper.is_empty() {
            length(&s.name, "paper", n, s.paper.len())?;
        }
        for (cat, v) in c.categories.iter().zip(&s.values) {
            if let Some(v) = *v {
                value(&s.name, cat, v, c.y_scale, 'y')?;
                any = true;
            }
        }
        for (cat, v) in c.categories.iter().zip(&s.paper) {
            if let Some(v) = *v {
                value(&format!("{} (paper)", s.name), cat, v, c.y_scale, 'y')?;
            }
        }
    }
    if !any {
        return Err(FigureError::NoValues);
    }
    ref_lines(&c.reference_lines, c.y_scale)
}

fn lines(c: &LineChart) -> Result<(), FigureError> {
    labels(&c.x_label, &c.y_label)?;
    if c.series.is_empty() {
        return Err(FigureError::NoSeries);
    }
    if c.x.is_empty() && c.series.iter().any(|s| s.x.is_none()) {
        return Err(FigureError::NoCategories { what: "x value" });
    }
    names(c.series.iter().map(|s| s.name.as_str()))?;
    for (i, &x) in c.x.iter().enumerate() {
        value("x", &format!("x[{i}]"), x, c.x_scale, 'x')?;
    }
    let mut any = false;
    for s in &c.series {
        if let Some(own) = &s.x {
            for (i, &x) in own.iter().enumerate() {
                value(&s.name, &format!("x[{i}]"), x, c.x_scale, 'x')?;
            }
        }
        let xs = s.xs(&c.x);
        length(&s.name, "y", xs.len(), s.y.len())?;
        for (x, y) in xs.iter().zip(&s.y) {
            if let Some(y) = *y {
                value(&s.name, &format!("x = {x}"), y, c.y_scale, 'y')?;
                any = true;
            }
        }
    }
    if !any {
        return Err(FigureError::NoValues);
    }
    ref_lines(&c.reference_lines, c.y_scale)
}

fn stacked(c: &StackedBars) -> Result<(), FigureError> {
    labels(&c.x_label, &c.y_label)?;
    if c.components.is_empty() {
        return Err(FigureError::NoSeries);
    }
    if c.categories.is_empty() {
        return Err(FigureError::NoCategories { what: "category" });
    }
    names(c.components.iter().map(|s| s.name.as_str()))?;
    for s in &c.components {
        length(&s.name, "values", c.categories.len(), s.values.len())?;
        for (cat, &v) in c.categories.iter().zip(&s.values) {
            value(&s.name, cat, v, Scale::Linear, 'y')?;
            if v < 0.0 {
                return Err(FigureError::NegativeStacked {
                    series: s.name.clone(),
                    at: cat.clone(),
                    value: v,
                });
            }
        }
    }
    Ok(())
}
