//! Rendering: files, sizes, contents, atomicity, determinism.

mod common;

use common::*;
use figures::{Chart, Figure, render, render_png, render_svg};

/// Renders `fig` to disk and checks both files.
fn check(fig: &Figure, name: &str, names: &[&str], labels: &[&str]) {
    let dir = temp_dir(name);
    let files = render(fig, &dir.join(name)).unwrap();
    assert_eq!(files.png, dir.join(format!("{name}.png")));
    assert_eq!(files.svg, dir.join(format!("{name}.svg")));

    let png = std::fs::read(&files.png).unwrap();
    assert_eq!(png_size(&png), (fig.width, fig.height));
    let decoder = png::Decoder::new(std::io::Cursor::new(&png));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (fig.width, fig.height));
    let pixels = &buf[..info.buffer_size()];
    assert!(pixels.iter().any(|&b| b < 128), "the image is not blank");

    let svg = std::fs::read_to_string(&files.svg).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
    assert!(svg.contains(&format!("width=\"{}\"", fig.width)));
    for text in [fig.title.as_str(), &fig.stamp.text()]
        .into_iter()
        .chain(names.iter().copied())
        .chain(labels.iter().copied())
    {
        assert!(svg.contains(text), "SVG lacks `{text}`");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn grouped_bars_render_with_labels_series_paper_and_stamp() {
    let fig = Figure::new("Batches per policy", grouped(), stamp());
    let labels = ["workload", "batches / lower bound", "lower bound", "paper"];
    check(&fig, "grouped", &["agenda", "depth", "fsm"], &labels);
}

#[test]
fn every_category_label_appears_in_the_svg() {
    let svg = render_svg(&Figure::new("t", grouped(), stamp()).with_size(900, 600)).unwrap();
    for w in WORKLOADS {
        // Labels may be wrapped at hyphens: every piece must be there.
        for piece in w.split_inclusive('-') {
            assert!(svg.contains(piece), "SVG lacks `{piece}` of `{w}`");
        }
    }
}

#[test]
fn lines_render() {
    let fig = Figure::new("Throughput", lines(), stamp()).with_size(1000, 700);
    check(
        &fig,
        "lines",
        &["cavs", "vpps"],
        &["batch size", "instances per second", "\n256\n"],
    );
}

/// Series at their own x (runs against their elapsed seconds): the axis
/// spans every series' x, and no shared x is needed.
#[test]
fn lines_at_their_own_x_render() {
    let mut c = lines();
    c.x_scale = figures::Scale::Linear;
    c.x.clear();
    c.series = vec![
        figures::LineSeries::new("eager", [3.0, 2.0, 1.5]).at([10.0, 20.0, 30.0]),
        figures::LineSeries::new("bt.run depth", [3.0, 2.0]).at([2.5, 5.0]),
    ];
    let fig = Figure::new("Loss against time", c, stamp()).with_size(1000, 700);
    check(
        &fig,
        "own-x",
        &["eager", "bt.run depth"],
        &["batch size", "\n30\n"],
    );
}

#[test]
fn stacked_bars_render() {
    let fig = Figure::new("Time split", stacked(), stamp()).with_size(900, 650);
    let names = ["construction", "scheduling", "execution"];
    check(&fig, "stacked", &names, &["executor", "seconds", "edbatch"]);
}

#[test]
fn panels_render_with_panel_titles() {
    let fig = panels();
    check(
        &fig,
        "panels",
        &["agenda", "fsm"],
        &["hidden = 64", "hidden = 256"],
    );
}

#[test]
fn atomic_write_leaves_only_the_two_files() {
    let dir = temp_dir("atomic");
    let fig = Figure::new("Atomic", stacked(), stamp()).with_size(640, 480);
    render(&fig, &dir.join("a")).unwrap();
    render(&fig, &dir.join("a")).unwrap(); // overwrite in place
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.png", "a.svg"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn invalid_figure_writes_nothing() {
    let dir = temp_dir("invalid");
    let mut chart = stacked();
    chart.components.clear();
    let fig = Figure::new("Nothing", chart, stamp());
    assert!(render(&fig, &dir.join("x")).is_err());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn render_creates_the_parent_folder() {
    let dir = temp_dir("nested");
    let fig = Figure::new("Nested", stacked(), stamp()).with_size(640, 480);
    let files = render(&fig, &dir.join("a/b/fig.v2")).unwrap();
    assert_eq!(
        files.png,
        dir.join("a/b/fig.v2.png"),
        "dots in the stem are kept"
    );
    assert!(files.svg.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn same_input_gives_identical_bytes() {
    for chart in [Chart::from(grouped()), lines().into(), stacked().into()] {
        let fig = Figure::new("Determinism", chart, stamp()).with_size(800, 600);
        assert_eq!(render_svg(&fig).unwrap(), render_svg(&fig).unwrap());
        assert_eq!(render_png(&fig).unwrap(), render_png(&fig).unwrap());
    }
}

#[test]
fn figures_round_trip_through_json() {
    let fig = panels();
    let json = serde_json::to_string(&fig).unwrap();
    assert!(json.contains("\"kind\":\"grouped_bars\""), "{json}");
    let back: Figure = serde_json::from_str(&json).unwrap();
    assert_eq!(back, fig);
    assert_eq!(render_svg(&back).unwrap(), render_svg(&fig).unwrap());
}

#[test]
fn text_is_rendered_with_the_embedded_font() {
    // A figure whose only dark pixels besides axes would be text: the title
    // band must contain dark anti-aliased pixels (glyphs, not empty boxes).
    let fig = Figure::new("TITLE TEXT", stacked(), stamp()).with_size(640, 480);
    let png = render_png(&fig).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(&png))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    reader.next_frame(&mut buf).unwrap();
    let row = |y: usize| &buf[y * 640 * 3..(y + 1) * 640 * 3];
    let dark = (14..50).flat_map(row).filter(|&&b| b < 100).count();
    let grey = (14..50)
        .flat_map(row)
        .filter(|&&b| b > 100 && b < 230)
        .count();
    assert!(dark > 100, "title glyphs drawn ({dark} dark bytes)");
    assert!(
        grey > 50,
        "glyph edges are anti-aliased ({grey} grey bytes)"
    );
}
