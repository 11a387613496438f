//! Rendering to PNG (bitmap backend + the `png` encoder) and SVG, and the
//! atomic write of both files.

use std::fs;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::error::{FigureError, draw_err};
use crate::frame::draw_figure;
use crate::model::Figure;
use crate::style::ensure_fonts;
use crate::text::Typeset;
use crate::validate::validate;

/// The files [`render`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFiles {
    /// `<stem>.png`
    pub png: PathBuf,
    /// `<stem>.svg`
    pub svg: PathBuf,
}

/// Validates `fig` and writes `<out_stem>.png` and `<out_stem>.svg`.
///
/// The parent folder is created if missing. Each file is written to a
/// temporary file in the same folder and then renamed over the target, so a
/// reader never sees a half-written figure. Nothing is written if the figure
/// is invalid.
pub fn render(fig: &Figure, out_stem: &Path) -> Result<RenderedFiles, FigureError> {
    let name = out_stem
        .file_name()
        .ok_or_else(|| FigureError::BadStem(out_stem.to_path_buf()))?;
    let with_ext = |ext: &str| {
        let mut n = name.to_os_string();
        n.push(ext);
        out_stem.with_file_name(n)
    };
    let files = RenderedFiles {
        png: with_ext(".png"),
        svg: with_ext(".svg"),
    };
    let png = render_png(fig)?;
    let svg = render_svg(fig)?;
    if let Some(dir) = out_stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|source| FigureError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    write_atomic(&files.png, &png)?;
    write_atomic(&files.svg, svg.as_bytes())?;
    Ok(files)
}

/// Validates `fig` and renders it as PNG bytes (RGB, 8 bits per channel).
pub fn render_png(fig: &Figure) -> Result<Vec<u8>, FigureError> {
    validate(fig)?;
    ensure_fonts()?;
    let (w, h) = (fig.width, fig.height);
    let mut pixels = vec![0u8; w as usize * h as usize * 3];
    {
        let bitmap = BitMapBackend::with_buffer(&mut pixels, (w, h));
        let root = Typeset::new(bitmap, true).into_drawing_area();
        draw_figure(&root, fig)?;
        root.present().map_err(draw_err)?;
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let png_err = |e: png::EncodingError| FigureError::Png(e.to_string());
    let mut writer = enc.write_header().map_err(png_err)?;
    writer.write_image_data(&pixels).map_err(png_err)?;
    writer.finish().map_err(png_err)?;
    Ok(out)
}

/// Validates `fig` and renders it as an SVG document.
pub fn render_svg(fig: &Figure) -> Result<String, FigureError> {
    validate(fig)?;
    ensure_fonts()?;
    let mut svg = String::new();
    {
        let backend = SVGBackend::with_string(&mut svg, (fig.width, fig.height));
        let root = Typeset::new(backend, false).into_drawing_area();
        draw_figure(&root, fig)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

/// Writes `bytes` to `path` atomically (`engine_core::io::write_atomic`:
/// the one atomic writer, whose temporary files an interrupt removes).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FigureError> {
    engine_core::io::write_atomic(path, bytes).map_err(|source| FigureError::Io {
        path: path.to_path_buf(),
        source,
    })
}
