//! Text layout and rasterisation with the embedded font.
//!
//! plotters 0.3.7's `ab_glyph` renderer drops each glyph's left side bearing
//! and rounds the caret per glyph, so letters like `i` and `l` sit unevenly.
//! [`Typeset`] wraps a backend and takes over text: it measures every string
//! with real advances and kerning (for the PNG and the SVG alike, so both lay
//! out the same), and on the bitmap it rasterises glyphs at their exact
//! sub-pixel positions. Everything else goes straight to the inner backend.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
    FontFamily, FontStyle, FontTransform,
};

/// The embedded faces: DejaVu Sans regular and bold.
struct Faces {
    regular: FontRef<'static>,
    bold: FontRef<'static>,
}

fn faces() -> Option<&'static Faces> {
    static FACES: OnceLock<Option<Faces>> = OnceLock::new();
    FACES
        .get_or_init(|| {
            Some(Faces {
                regular: FontRef::try_from_slice(dejavu::sans::regular()).ok()?,
                bold: FontRef::try_from_slice(dejavu::sans::bold()).ok()?,
            })
        })
        .as_ref()
}

/// Whether the embedded faces parse (checked before any drawing).
pub(crate) fn fonts_ok() -> bool {
    faces().is_some()
}

fn face(style: FontStyle) -> &'static FontRef<'static> {
    let f = faces().expect("fonts checked by ensure_fonts before drawing");
    match style {
        FontStyle::Bold => &f.bold,
        _ => &f.regular,
    }
}

/// Width (advances plus kerning) and height (ascent - descent) of `text`.
fn measure(font: &FontRef<'static>, size: f32, text: &str) -> (f32, f32) {
    let sf = font.as_scaled(PxScale::from(size));
    let mut w = 0.0;
    let mut prev = None;
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            w += sf.kern(p, id);
        }
        w += sf.h_advance(id);
        prev = Some(id);
    }
    (w, sf.ascent() - sf.descent())
}

/// A backend whose text is measured (and, if `raster`, drawn) with the
/// embedded font.
pub(crate) struct Typeset<B> {
    inner: B,
    raster: bool,
}

impl<B: DrawingBackend> Typeset<B> {
    /// Wraps `inner`; `raster` draws glyphs as pixels (bitmaps), otherwise
    /// text is handed to the inner backend (SVG `<text>`).
    pub fn new(inner: B, raster: bool) -> Self {
        Typeset { inner, raster }
    }
}

type Res<B> = Result<(), DrawingErrorKind<<B as DrawingBackend>::ErrorType>>;

impl<B: DrawingBackend> DrawingBackend for Typeset<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Res<B> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Res<B> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Res<B> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        s: &S,
    ) -> Res<B> {
        self.inner.draw_line(from, to, s)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        s: &S,
        fill: bool,
    ) -> Res<B> {
        self.inner.draw_rect(upper_left, bottom_right, s, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        s: &S,
    ) -> Res<B> {
        self.inner.draw_path(path, s)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        s: &S,
        fill: bool,
    ) -> Res<B> {
        self.inner.draw_circle(center, radius, s, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        s: &S,
    ) -> Res<B> {
        self.inner.fill_polygon(vert, s)
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Res<B> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (w, h) = measure(face(style.style()), style.size() as f32, text);
        Ok((w.ceil() as u32, h.ceil() as u32))
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Res<B> {
        if !self.raster {
            return self.inner.draw_text(text, &SvgText(style), pos);
        }
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let font = face(style.style());
        let size = style.size() as f32;
        let (w, h) = measure(font, size, text);
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -w / 2.0,
            HPos::Right => -w,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0.0,
            VPos::Center => -h / 2.0,
            VPos::Bottom => -h,
        };
        let sf = font.as_scaled(PxScale::from(size));
        let baseline = dy + sf.ascent();
        let trans = style.transform();
        let (img_w, img_h) = self.inner.get_size();
        let mut caret = dx;
        let mut prev = None;
        for c in text.chars() {
            let id = sf.glyph_id(c);
            if let Some(p) = prev {
                caret += sf.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(sf.scale(), point(caret, baseline));
            caret += sf.h_advance(id);
            let Some(outline) = font.outline_glyph(glyph) else {
                continue;
            };
            let min = outline.px_bounds().min;
            let mut pixels = Vec::new();
            outline.draw(|x, y, cov| pixels.push((x, y, cov)));
            for (x, y, cov) in pixels {
                if cov <= 0.0 {
                    continue;
                }
                let (lx, ly) = (min.x as i32 + x as i32, min.y as i32 + y as i32);
                let (tx, ty) = trans.transform(lx, ly);
                let (px, py) = (pos.0 + tx, pos.1 + ty);
                if px < 0 || py < 0 || px >= img_w as i32 || py >= img_h as i32 {
                    continue;
                }
                let alpha = color.alpha * f64::from(cov.min(1.0));
                self.inner.draw_pixel(
                    (px, py),
                    BackendColor {
                        alpha,
                        rgb: color.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }
}

/// Font family written into SVG files: the embedded face first, then the
/// viewer's generic sans-serif.
const SVG_FAMILY: &str = "DejaVu Sans, sans-serif";

/// A text style as the SVG backend should see it: the family above, and a
/// size such that the SVG em (plotters writes `size / 1.24`) equals the em of
/// the rasterised text (ab_glyph scales `size` to ascent - descent).
struct SvgText<'a, T>(&'a T);

impl<T: BackendTextStyle> BackendTextStyle for SvgText<'_, T> {
    type FontError = T::FontError;

    fn color(&self) -> BackendColor {
        self.0.color()
    }

    fn size(&self) -> f64 {
        let font = face(self.0.style());
        let em = font.units_per_em().unwrap_or(1.0);
        let height = font.ascent_unscaled() - font.descent_unscaled();
        self.0.size() * 1.24 * f64::from(em / height)
    }

    fn transform(&self) -> FontTransform {
        self.0.transform()
    }

    fn style(&self) -> FontStyle {
        self.0.style()
    }

    fn anchor(&self) -> plotters_backend::text_anchor::Pos {
        self.0.anchor()
    }

    fn family(&self) -> FontFamily<'_> {
        FontFamily::Name(SVG_FAMILY)
    }

    fn layout_box(&self, text: &str) -> Result<((i32, i32), (i32, i32)), Self::FontError> {
        self.0.layout_box(text)
    }

    fn draw<E, F: FnMut(i32, i32, BackendColor) -> Result<(), E>>(
        &self,
        text: &str,
        pos: BackendCoord,
        draw: F,
    ) -> Result<Result<(), E>, Self::FontError> {
        self.0.draw(text, pos, draw)
    }
}
