//! Category labels under bar charts: one line if they fit, else wrapped at
//! `-`, `_`, `/`, `.` or spaces (up to 3 lines), else rotated to read upwards.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{FigureError, draw_err};
use crate::style;

const MAX_LINES: usize = 3;
/// Gap between the x axis and the labels, in pixels.
const GAP: i32 = 8;

/// How the category labels of one chart are laid out.
pub(crate) struct CategoryLabels {
    lines: Vec<Vec<String>>,
    rotated: bool,
    line_h: i32,
    height: i32,
}

impl CategoryLabels {
    /// Chooses the layout so that every label fits a slot of `slot` pixels.
    pub fn layout<DB: DrawingBackend>(
        root: &DrawingArea<DB, Shift>,
        categories: &[String],
        slot: i32,
        max_height: i32,
    ) -> Result<Self, FigureError> {
        let font = style::text(style::TICK_SIZE);
        let width = |s: &str| -> Result<i32, FigureError> {
            Ok(root.estimate_text_size(s, &font).map_err(draw_err)?.0 as i32)
        };
        let line_h = (style::TICK_SIZE * 1.15).round() as i32;
        let room = slot - 6;
        let mut lines = Vec::with_capacity(categories.len());
        let mut fits = true;
        for cat in categories {
            let wrapped = wrap(cat, room, &width)?;
            let ok = wrapped.len() <= MAX_LINES
                && wrapped
                    .iter()
                    .map(|l| width(l))
                    .collect::<Result<Vec<_>, _>>()?
                    .iter()
                    .all(|&w| w <= room);
            fits &= ok;
            lines.push(wrapped);
        }
        if fits {
            let n = lines.iter().map(Vec::len).max().unwrap_or(1) as i32;
            return Ok(CategoryLabels {
                lines,
                rotated: false,
                line_h,
                height: GAP + n * line_h,
            });
        }
        // Rotated: labels longer than the room below the plot are shortened
        // with an ellipsis rather than pushing the plot away.
        let room = max_height - GAP - 4;
        let mut longest = 0;
        let mut rotated = Vec::with_capacity(categories.len());
        for cat in categories {
            let mut label = cat.clone();
            while width(&label)? > room && !label.is_empty() {
                let mut chars: Vec<char> = label.chars().collect();
                chars.truncate(chars.len().saturating_sub(2));
                label = chars.into_iter().collect::<String>();
                label.push('…');
                if label.chars().count() <= 1 {
                    break;
                }
            }
            longest = longest.max(width(&label)?);
            rotated.push(vec![label]);
        }
        Ok(CategoryLabels {
            lines: rotated,
            rotated: true,
            line_h,
            height: GAP + longest + 4,
        })
    }

    /// Pixels the labels need below the axis.
    pub fn height(&self) -> i32 {
        self.height
    }

    /// Draws label `i` under the point `anchors[i]` (backend coordinates of
    /// the category centre on the x axis).
    pub fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        anchors: &[(i32, i32)],
    ) -> Result<(), FigureError> {
        for (lines, &(x, y)) in self.lines.iter().zip(anchors) {
            if self.rotated {
                let font = style::text(style::TICK_SIZE)
                    .transform(FontTransform::Rotate270)
                    .pos(Pos::new(HPos::Right, VPos::Center));
                root.draw_text(&lines[0], &font, (x, y + GAP))
                    .map_err(draw_err)?;
            } else {
                let font = style::text(style::TICK_SIZE).pos(Pos::new(HPos::Center, VPos::Top));
                for (j, line) in lines.iter().enumerate() {
                    root.draw_text(line, &font, (x, y + GAP + j as i32 * self.line_h))
                        .map_err(draw_err)?;
                }
            }
        }
        Ok(())
    }
}

/// Greedy wrap of `label` into lines of at most `room` pixels, breaking only
/// after separators. A piece wider than `room` stays whole (the caller then
/// rotates instead).
fn wrap(
    label: &str,
    room: i32,
    width: &impl Fn(&str) -> Result<i32, FigureError>,
) -> Result<Vec<String>, FigureError> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, ch) in label.char_indices() {
        if matches!(ch, '-' | '_' | '/' | '.' | ' ') {
            let end = i + ch.len_utf8();
            pieces.push(&label[start..end]);
            start = end;
        }
    }
    if start < label.len() {
        pieces.push(&label[start..]);
    }
    let mut lines: Vec<String> = Vec::new();
    for piece in pieces {
        match lines.last_mut() {
            Some(last) if width(format!("{last}{piece}").trim_end())? <= room => {
                last.push_str(piece)
            }
            _ => lines.push(piece.to_string()),
        }
    }
    Ok(lines
        .into_iter()
        .map(|l| l.trim_end().to_string())
        .collect())
}
