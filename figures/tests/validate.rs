//! Bad data gives typed errors naming the series and category, never a panic.

mod common;

use common::*;
use figures::{Figure, FigureError, Panel, Scale, render_png, render_svg, validate};

fn err(fig: &Figure) -> FigureError {
    let e = validate(fig).unwrap_err();
    // Rendering refuses the same figure with the same message.
    assert_eq!(render_svg(fig).unwrap_err().to_string(), e.to_string());
    assert_eq!(render_png(fig).unwrap_err().to_string(), e.to_string());
    e
}

fn fig(chart: impl Into<figures::Chart>) -> Figure {
    Figure::new("t", chart, stamp())
}

#[test]
fn zero_on_a_log_axis_names_series_and_category() {
    let mut c = grouped();
    c.series[1].values[8] = Some(0.0);
    let e = err(&fig(c));
    assert!(
        matches!(e, FigureError::NonPositiveOnLog { axis: 'y', .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("`depth`") && msg.contains("`bilstm-tagger-withchar`"),
        "{msg}"
    );
}

#[test]
fn zero_is_fine_on_a_linear_axis() {
    let mut c = grouped();
    c.y_scale = Scale::Linear;
    c.series[1].values[8] = Some(0.0);
    validate(&fig(c)).unwrap();
}

#[test]
fn negative_paper_value_on_log_axis_is_named_as_paper() {
    let mut c = grouped();
    c.series[2].paper[3] = Some(-1.0);
    let msg = err(&fig(c)).to_string();
    assert!(
        msg.contains("`fsm (paper)`") && msg.contains("`tree-fc`"),
        "{msg}"
    );
}

#[test]
fn log_x_axis_rejects_zero_batch_size() {
    let mut c = lines();
    c.x[0] = 0.0;
    let e = err(&fig(c));
    assert!(
        matches!(e, FigureError::NonPositiveOnLog { axis: 'x', .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("x[0]"), "{e}");
}

#[test]
fn length_mismatch_names_the_series() {
    let mut c = grouped();
    c.series[0].values.pop();
    let e = err(&fig(c));
    assert!(
        matches!(&e, FigureError::LengthMismatch { series, expected: 15, found: 14, .. } if series == "agenda"),
        "{e:?}"
    );
    let mut c = lines();
    c.series[1].y.push(Some(1.0));
    assert!(err(&fig(c)).to_string().contains("`vpps`"));
    let mut c = stacked();
    c.components[2].values.truncate(1);
    assert!(err(&fig(c)).to_string().contains("`execution`"));
    let mut c = grouped();
    c.series[2].paper.truncate(3);
    let msg = err(&fig(c)).to_string();
    assert!(msg.contains("`fsm`") && msg.contains("paper"), "{msg}");
}

#[test]
fn no_series_no_categories_no_values() {
    let mut c = grouped();
    c.series.clear();
    assert!(matches!(err(&fig(c)), FigureError::NoSeries));
    let mut c = stacked();
    c.components.clear();
    assert!(matches!(err(&fig(c)), FigureError::NoSeries));
    let mut c = lines();
    c.series.clear();
    assert!(matches!(err(&fig(c)), FigureError::NoSeries));
    let mut c = grouped();
    c.categories.clear();
    assert!(matches!(err(&fig(c)), FigureError::NoCategories { .. }));
    let mut c = lines();
    for s in &mut c.series {
        s.y.iter_mut().for_each(|y| *y = None);
    }
    assert!(matches!(err(&fig(c)), FigureError::NoValues));
}

#[test]
fn non_finite_and_negative_stacked_values_are_named() {
    let mut c = lines();
    c.series[0].y[4] = Some(f64::NAN);
    let msg = err(&fig(c)).to_string();
    assert!(msg.contains("`cavs`") && msg.contains("x = 16"), "{msg}");
    let mut c = stacked();
    c.components[1].values[2] = -0.5;
    let e = err(&fig(c));
    assert!(matches!(e, FigureError::NegativeStacked { .. }), "{e:?}");
    assert!(e.to_string().contains("`scheduling`") && e.to_string().contains("`edbatch`"));
}

#[test]
fn labels_and_names_are_required_and_unique() {
    let mut c = grouped();
    c.x_label = " ".into();
    assert!(err(&fig(c)).to_string().contains("x label"));
    let mut c = lines();
    c.y_label.clear();
    assert!(err(&fig(c)).to_string().contains("y label"));
    let mut c = stacked();
    c.components[1].name = "construction".into();
    assert!(matches!(err(&fig(c)), FigureError::DuplicateSeries { .. }));
    let mut f = fig(stacked());
    f.title.clear();
    assert!(matches!(err(&f), FigureError::MissingText { .. }));
}

#[test]
fn figure_level_errors() {
    let mut f = fig(stacked());
    f.panels.clear();
    assert!(matches!(err(&f), FigureError::NoPanels));
    let mut f = panels();
    f.columns = 0;
    assert!(matches!(err(&f), FigureError::ZeroColumns));
    let f = fig(stacked()).with_size(100, 100);
    assert!(matches!(err(&f), FigureError::TooSmall { .. }));
}

#[test]
fn errors_in_a_panel_name_the_panel() {
    let mut bad = grouped();
    bad.series[0].values[0] = Some(-2.0);
    let f = Figure::grid(
        "two",
        vec![
            Panel::new("hidden = 64", grouped()),
            Panel::new("hidden = 256", bad),
        ],
        2,
        stamp(),
    );
    let e = err(&f);
    assert!(matches!(e, FigureError::InPanel { index: 1, .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("hidden = 256") && msg.contains("`agenda`") && msg.contains("`tree-lstm`"),
        "{msg}"
    );
}

#[test]
fn too_many_rows_of_panels_for_the_height_is_an_error_not_a_panic() {
    let panels = (0..6)
        .map(|i| Panel::new(format!("p{i}"), stacked()))
        .collect();
    let f = Figure::grid("tall", panels, 1, stamp()).with_size(800, 600);
    assert!(matches!(
        render_png(&f).unwrap_err(),
        FigureError::TooSmall { .. }
    ));
}

/// A series' own x is checked as the shared x is (one per y, each finite
/// and positive on a log axis); a shared x is needed only by a series
/// without its own.
#[test]
fn a_series_own_x_is_checked_like_the_shared_one() {
    let mut c = lines();
    c.series[0] = figures::LineSeries::new("cavs", [1.0, 2.0]).at([1.0, 2.0, 4.0]);
    let e = err(&fig(c));
    assert!(
        matches!(&e, FigureError::LengthMismatch { series, expected: 3, found: 2, .. } if series == "cavs"),
        "{e:?}"
    );
    let mut c = lines();
    c.series[0] = figures::LineSeries::new("cavs", [1.0, 2.0]).at([1.0, 0.0]);
    let e = err(&fig(c));
    assert!(
        matches!(&e, FigureError::NonPositiveOnLog { series, axis: 'x', .. } if series == "cavs"),
        "{e:?}"
    );
    let mut c = lines();
    c.x.clear();
    let e = err(&fig(c.clone()));
    assert!(matches!(e, FigureError::NoCategories { .. }), "{e:?}");
    for s in &mut c.series {
        s.x = Some(vec![1.0; s.y.len()]);
    }
    validate(&fig(c)).unwrap();
}
