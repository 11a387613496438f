//! Odd but valid data renders (or fails with a typed error), never panics.

mod common;

use common::*;
use figures::{
    BarSeries, Figure, GroupedBars, LineChart, LineSeries, Scale, render_png, render_svg,
};

fn renders(fig: &Figure) {
    let png = render_png(fig).unwrap();
    assert_eq!(png_size(&png), (fig.width, fig.height));
    render_svg(fig).unwrap();
}

fn bars(categories: &[&str], values: &[Option<f64>], scale: Scale) -> GroupedBars {
    GroupedBars {
        x_label: "x".into(),
        y_label: "y".into(),
        y_scale: scale,
        categories: categories.iter().map(|s| s.to_string()).collect(),
        series: vec![BarSeries {
            name: "s".into(),
            values: values.to_vec(),
            paper: Vec::new(),
        }],
        reference_lines: Vec::new(),
    }
}

#[test]
fn single_bar_and_equal_values() {
    renders(&Figure::new(
        "one",
        bars(&["a"], &[Some(3.0)], Scale::Linear),
        stamp(),
    ));
    renders(&Figure::new(
        "one",
        bars(&["a"], &[Some(3.0)], Scale::Log10),
        stamp(),
    ));
    renders(&Figure::new(
        "zero",
        bars(&["a", "b"], &[Some(0.0), Some(0.0)], Scale::Linear),
        stamp(),
    ));
    renders(&Figure::new(
        "gap",
        bars(&["a", "b"], &[None, Some(2.0)], Scale::Log2),
        stamp(),
    ));
}

#[test]
fn negative_and_extreme_linear_values() {
    let c = bars(
        &["a", "b", "c"],
        &[Some(-5.0), Some(2.0), Some(1e12)],
        Scale::Linear,
    );
    renders(&Figure::new("neg", c, stamp()));
    let c = bars(&["a", "b"], &[Some(1e-300), Some(1e300)], Scale::Log10);
    renders(&Figure::new("huge span", c, stamp()));
    let c = bars(&["a", "b"], &[Some(-1e300), Some(1e300)], Scale::Linear);
    renders(&Figure::new("huge linear", c, stamp()));
}

#[test]
fn very_long_and_odd_category_names() {
    let long = "x".repeat(300);
    let c = bars(
        &[&long, "", "ünïcödé 名前"],
        &[Some(1.0), Some(2.0), Some(3.0)],
        Scale::Linear,
    );
    let fig = Figure::new("long", c, stamp()).with_size(640, 480);
    match render_png(&fig) {
        Ok(png) => assert_eq!(png_size(&png), (640, 480)),
        Err(e) => assert!(matches!(e, figures::FigureError::TooSmall { .. }), "{e}"),
    }
}

#[test]
fn many_categories_and_series_in_a_small_image() {
    let cats: Vec<String> = (0..60).map(|i| format!("workload-{i}")).collect();
    let c = GroupedBars {
        x_label: "x".into(),
        y_label: "y".into(),
        y_scale: Scale::Linear,
        categories: cats.clone(),
        series: (0..14)
            .map(|j| {
                BarSeries::new(
                    format!("series number {j}"),
                    (0..60).map(|i| (i + j) as f64),
                )
            })
            .collect(),
        reference_lines: Vec::new(),
    };
    // Drawn at the size asked, or refused as too small: never a panic, never
    // an image of another size.
    match render_png(&Figure::new("crowded", c, stamp()).with_size(320, 240)) {
        Ok(png) => assert_eq!(png_size(&png), (320, 240)),
        Err(e) => assert!(matches!(e, figures::FigureError::TooSmall { .. }), "{e}"),
    }
}

#[test]
fn single_point_lines_and_linear_x() {
    let c = LineChart {
        x_label: "x".into(),
        y_label: "y".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x: vec![5.0],
        series: vec![LineSeries::new("only", [2.0])],
        reference_lines: Vec::new(),
    };
    renders(&Figure::new("point", c, stamp()));
    let mut c = lines();
    c.x_scale = Scale::Linear;
    c.y_scale = Scale::Linear;
    renders(&Figure::new("linear", c, stamp()));
}

#[test]
fn huge_sizes_are_refused() {
    let fig = Figure::new("big", stacked(), stamp()).with_size(100_000, 100_000);
    let e = render_png(&fig).unwrap_err();
    assert!(matches!(e, figures::FigureError::TooLarge { .. }), "{e}");
}

/// A grid point without a value is marked (a grey cross at the bar's foot),
/// so an empty slot does not read as a value too small to see.
#[test]
fn a_missing_bar_is_marked() {
    let with = |v: Option<f64>| {
        render_svg(&Figure::new(
            "gap",
            bars(&["a", "b"], &[Some(3.0), v], Scale::Log10),
            stamp(),
        ))
        .unwrap()
    };
    let grey = "#909090";
    assert_eq!(with(Some(2.0)).matches(grey).count(), 0);
    assert!(with(None).matches(grey).count() >= 2, "{}", with(None));
}
