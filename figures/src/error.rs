//! Typed errors: every validation failure names what is wrong and where.

use std::path::PathBuf;

/// Everything that can go wrong while checking or rendering a figure.
///
/// Validation errors name the offending series (or component, or reference
/// line) and the category or x position, so a caller can fix its data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FigureError {
    /// The figure has no panel (no chart) at all.
    #[error("the figure has no panel")]
    NoPanels,
    /// `columns` is zero.
    #[error("the figure asks for 0 panel columns")]
    ZeroColumns,
    /// The requested image is too small to hold the layout.
    #[error("figure size {width}x{height} is too small (at least {min_width}x{min_height})")]
    TooSmall {
        /// Requested width in pixels.
        width: u32,
        /// Requested height in pixels.
        height: u32,
        /// Smallest width accepted.
        min_width: u32,
        /// Smallest height accepted.
        min_height: u32,
    },
    /// The requested image is larger than [`crate::MAX_SIDE`] on a side.
    #[error("figure size {width}x{height} is too large (at most {max} pixels a side)")]
    TooLarge {
        /// Requested width in pixels.
        width: u32,
        /// Requested height in pixels.
        height: u32,
        /// Largest side accepted.
        max: u32,
    },
    /// A required text (title, x label, y label, series name...) is blank.
    #[error("{what} is empty: figures always carry a title, axis labels and named series")]
    MissingText {
        /// Which text, e.g. `"x label"`.
        what: String,
    },
    /// The chart has no series (no components for stacked bars).
    #[error("the chart has no series")]
    NoSeries,
    /// The chart has no category (bars) or no x value (lines).
    #[error("the chart has no {what}")]
    NoCategories {
        /// `"category"` or `"x value"`.
        what: &'static str,
    },
    /// Two series (or components) of one chart share a name.
    #[error("series `{series}` appears more than once in one chart")]
    DuplicateSeries {
        /// The repeated name.
        series: String,
    },
    /// A series has a different number of values than there are categories / x values.
    #[error("series `{series}`: {what} has {found} values but the chart has {expected}")]
    LengthMismatch {
        /// The series (or component) at fault.
        series: String,
        /// Which vector: `"values"`, `"paper"`, `"y"`.
        what: &'static str,
        /// Number of categories or x values.
        expected: usize,
        /// Number of values found.
        found: usize,
    },
    /// A value is NaN or infinite.
    #[error("series `{series}` at `{at}`: value {value} is not finite")]
    NonFinite {
        /// The series at fault (`"x"` for the x values of a line chart).
        series: String,
        /// The category or x position.
        at: String,
        /// The value.
        value: f64,
    },
    /// A value is zero or negative on a logarithmic axis.
    #[error(
        "series `{series}` at `{at}`: value {value} cannot be drawn on the logarithmic {axis} axis (must be > 0)"
    )]
    NonPositiveOnLog {
        /// The series at fault (`"x"` for the x values of a line chart).
        series: String,
        /// The category or x position.
        at: String,
        /// The value.
        value: f64,
        /// `'x'` or `'y'`.
        axis: char,
    },
    /// A stacked component is negative.
    #[error("component `{series}` at `{at}`: negative value {value} cannot be stacked")]
    NegativeStacked {
        /// The component at fault.
        series: String,
        /// The category.
        at: String,
        /// The value.
        value: f64,
    },
    /// Every value of the chart is missing.
    #[error("the chart has no value to draw (all values are missing)")]
    NoValues,
    /// An error inside one panel of a multi-panel figure.
    #[error("panel {index} (`{title}`): {source}")]
    InPanel {
        /// Index of the panel, from 0.
        index: usize,
        /// Title of the panel, empty if it has none.
        title: String,
        /// What is wrong in that panel.
        source: Box<FigureError>,
    },
    /// The embedded font could not be registered.
    #[error("the embedded font could not be loaded: {0}")]
    Font(String),
    /// plotters failed while drawing.
    #[error("drawing failed: {0}")]
    Draw(String),
    /// The PNG encoder failed.
    #[error("PNG encoding failed: {0}")]
    Png(String),
    /// The output stem has no file name (e.g. `/` or `..`).
    #[error("output stem `{0}` has no file name")]
    BadStem(PathBuf),
    /// Reading or writing a file failed.
    #[error("I/O error on `{path}`: {source}")]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl FigureError {
    /// Wraps `self` with the panel it came from (used for multi-panel figures).
    pub(crate) fn in_panel(self, index: usize, title: Option<&str>) -> Self {
        FigureError::InPanel {
            index,
            title: title.unwrap_or_default().to_string(),
            source: Box::new(self),
        }
    }
}

/// Converts any plotters drawing error into [`FigureError::Draw`].
pub(crate) fn draw_err<E: std::fmt::Display>(e: E) -> FigureError {
    FigureError::Draw(e.to_string())
}
