//! The one style every figure shares: font, palette, markers, sizes.
//!
//! The font is DejaVu Sans, embedded through the `dejavu` crate and
//! registered with plotters' `ab_glyph` text renderer, so rendering never
//! depends on the fonts installed on the machine.

use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::FontStyle;

use plotters::coord::CoordTranslate;

use crate::error::{FigureError, draw_err};

/// Font family name used for all text (PNG: embedded DejaVu Sans; SVG: the
/// viewer's sans-serif font).
pub const FONT_FAMILY: &str = "sans-serif";

/// Series colours, in order: the Okabe–Ito colour-blind-safe palette
/// (without black and yellow, which are kept for reference marks and poor
/// contrast on white), then Paul Tol's "muted" colours. Colours repeat after
/// the last one; line series also differ by marker shape.
pub const PALETTE: [(u8, u8, u8); 10] = [
    (0x00, 0x72, 0xB2), // blue
    (0xE6, 0x9F, 0x00), // orange
    (0x00, 0x9E, 0x73), // bluish green
    (0xD5, 0x5E, 0x00), // vermillion
    (0xCC, 0x79, 0xA7), // reddish purple
    (0x56, 0xB4, 0xE9), // sky blue
    (0x33, 0x22, 0x88), // indigo
    (0x99, 0x99, 0x33), // olive
    (0x88, 0x22, 0x55), // wine
    (0x44, 0xAA, 0x99), // teal
];

/// Colour of the `i`-th series of a figure.
pub fn series_color(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// Marker shapes of line series, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerShape {
    /// Filled circle.
    Circle,
    /// Filled square.
    Square,
    /// Filled triangle pointing up.
    TriangleUp,
    /// Filled diamond.
    Diamond,
    /// Filled triangle pointing down.
    TriangleDown,
    /// An x.
    Cross,
}

/// Marker shape of the `i`-th series of a figure.
pub fn series_marker(i: usize) -> MarkerShape {
    use MarkerShape::*;
    [Circle, Square, TriangleUp, Diamond, TriangleDown, Cross][i % 6]
}

// Sizes in pixels (font sizes are plotters sizes: about 1.2 x the em size).
pub(crate) const TITLE_SIZE: f64 = 30.0;
pub(crate) const PANEL_TITLE_SIZE: f64 = 22.0;
pub(crate) const AXIS_DESC_SIZE: f64 = 21.0;
pub(crate) const TICK_SIZE: f64 = 17.0;
pub(crate) const LEGEND_SIZE: f64 = 18.0;
pub(crate) const STAMP_SIZE: f64 = 13.0;
/// Outer margin of the image.
pub(crate) const MARGIN: i32 = 14;
/// Radius of line markers.
pub(crate) const MARKER_RADIUS: i32 = 5;
/// Stroke width of series lines.
pub(crate) const LINE_WIDTH: u32 = 2;

/// Text colour for titles and labels.
pub(crate) const TEXT: RGBColor = RGBColor(0x20, 0x20, 0x20);
/// Colour of the stamp line.
pub(crate) const STAMP_TEXT: RGBColor = RGBColor(0x70, 0x70, 0x70);
/// Colour of the grid lines.
pub(crate) const GRID: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);
/// Colour of the marks of points without a value.
pub(crate) const MUTED: RGBColor = RGBColor(0x90, 0x90, 0x90);
/// Colour of reference marks ("paper" markers, reference lines).
pub(crate) const REFERENCE: RGBColor = RGBColor(0x00, 0x00, 0x00);

/// Regular text of `size` in the style's colour.
pub(crate) fn text(size: f64) -> TextStyle<'static> {
    (FONT_FAMILY, size).into_font().color(&TEXT)
}

/// Bold text of `size`.
pub(crate) fn bold(size: f64) -> TextStyle<'static> {
    (FONT_FAMILY, size, FontStyle::Bold)
        .into_font()
        .color(&TEXT)
}

/// Registers the embedded fonts with plotters, once per process.
pub(crate) fn ensure_fonts() -> Result<(), FigureError> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let msg = "DejaVu Sans could not be parsed";
        let bad = |_| msg.to_string();
        if !crate::text::fonts_ok() {
            return Err(msg.to_string());
        }
        plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, dejavu::sans::regular())
            .map_err(bad)?;
        plotters::style::register_font(FONT_FAMILY, FontStyle::Bold, dejavu::sans::bold())
            .map_err(bad)
    })
    .clone()
    .map_err(FigureError::Font)
}

/// Draws a marker of `shape` centred on `at` onto `area`.
pub(crate) fn draw_marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    shape: MarkerShape,
    color: RGBColor,
) -> Result<(), FigureError>
where
    CT::From: Clone + 'static,
{
    let r = MARKER_RADIUS;
    let fill = color.filled();
    let base = EmptyElement::at(at);
    match shape {
        MarkerShape::Circle => area.draw(&(base + Circle::new((0, 0), r, fill))),
        MarkerShape::Square => {
            let s = r - 1;
            area.draw(&(base + Rectangle::new([(-s, -s), (s, s)], fill)))
        }
        MarkerShape::TriangleUp => {
            let pts = vec![(0, -r - 1), (r + 1, r), (-r - 1, r)];
            area.draw(&(base + Polygon::new(pts, fill)))
        }
        MarkerShape::TriangleDown => {
            let pts = vec![(0, r + 1), (r + 1, -r), (-r - 1, -r)];
            area.draw(&(base + Polygon::new(pts, fill)))
        }
        MarkerShape::Diamond => area.draw(&(base + Polygon::new(diamond(r + 1), fill))),
        MarkerShape::Cross => {
            let s = color.stroke_width(3);
            area.draw(
                &(base
                    + PathElement::new(vec![(-r, -r), (r, r)], s)
                    + PathElement::new(vec![(-r, r), (r, -r)], s)),
            )
        }
    }
    .map_err(draw_err)
}

/// Draws the black "paper" reference marker (a diamond with a white
/// outline) centred on `at`.
pub(crate) fn draw_paper_marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
) -> Result<(), FigureError>
where
    CT::From: Clone + 'static,
{
    let mark = EmptyElement::at(at)
        + Polygon::new(diamond(8), WHITE.filled())
        + Polygon::new(diamond(6), REFERENCE.filled());
    area.draw(&mark).map_err(draw_err)
}

/// Corners of a diamond of "radius" `r` around (0, 0).
fn diamond(r: i32) -> Vec<(i32, i32)> {
    vec![(0, -r), (r, 0), (0, r), (-r, 0)]
}
