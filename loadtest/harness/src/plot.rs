//! Plots for reports, as SVG files a person can open in a browser.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

/// One named line of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// An 800×500 white SVG canvas at `path`, its directory created.
fn svg_canvas(path: &Path) -> anyhow::Result<DrawingArea<SVGBackend<'_>, plotters::coord::Shift>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).context("drawing the background")?;
    Ok(root)
}

/// Draws each series as a line in its palette colour, with a dot at each point when `dots`, and
/// the legend at `legend`.
fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[Series],
    dots: bool,
    legend: SeriesLabelPosition,
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .context("drawing a series")?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        if dots {
            chart
                .draw_series(s.points.iter().map(|p| Circle::new(*p, 4, color.filled())))
                .context("drawing points")?;
        }
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .context("legend")?;
    Ok(())
}

/// A line chart with a logarithmic x axis (watcher counts, Job sizes, …).
pub fn log_x_line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let x_max = xs.fold(1.0f64, f64::max) * 1.5;
    let y_max = ys.fold(1.0f64, f64::max) * 1.15;
    let root = svg_canvas(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d((0.8f64..x_max).log_scale(), 0f64..y_max)
        .context("building the chart")?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .draw()
        .context("drawing the axes")?;
    draw_lines(&mut chart, series, true, SeriesLabelPosition::MiddleRight)?;
    root.present().context("writing the SVG")?;
    Ok(())
}

/// Cumulative distributions of latencies: for each series, the share of samples (y, 0–100%) at
/// or under each latency (x, seconds). A goal can be drawn as a vertical line.
pub fn latency_cdf_chart(
    path: &Path,
    title: &str,
    series: &[Series],
    goal_seconds: Option<f64>,
) -> anyhow::Result<()> {
    let x_max = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(1.0f64, f64::max) * 1.1;
    let root = svg_canvas(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..100f64)
        .context("building the chart")?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("% of samples at or under")
        .x_label_formatter(&|x| format!("{x:.1}"))
        .y_label_formatter(&|y| format!("{y:.0}%"))
        .draw()
        .context("drawing the axes")?;
    if let Some(goal) = goal_seconds {
        chart
            .draw_series(LineSeries::new([(goal, 0.0), (goal, 100.0)], RED.stroke_width(1)))
            .context("drawing the goal")?
            .label(format!("goal: p99 under {goal} s"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(1)));
    }
    draw_lines(&mut chart, series, false, SeriesLabelPosition::LowerRight)?;
    root.present().context("writing the SVG")?;
    Ok(())
}

/// The points of the cumulative distribution of `sorted` (ascending), thinned to at most `points`.
pub fn cdf_points(sorted: &[f64], points: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(points.max(1)).max(1);
    let mut out: Vec<(f64, f64)> =
        (0..n).step_by(step).map(|i| (sorted[i], 100.0 * (i + 1) as f64 / n as f64)).collect();
    out.push((sorted[n - 1], 100.0));
    out
}

/// A line chart on linear axes from zero (throughput over time, the scaling curve), with a dot
/// at each point when `dots`.
pub fn line_chart(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    series: &[Series],
    dots: bool,
) -> anyhow::Result<()> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let x_max = xs.fold(1.0f64, f64::max) * 1.05;
    let y_max = ys.fold(1.0f64, f64::max) * 1.15;
    let root = svg_canvas(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .context("building the chart")?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .context("drawing the axes")?;
    draw_lines(&mut chart, series, dots, SeriesLabelPosition::UpperLeft)?;
    root.present().context("writing the SVG")?;
    Ok(())
}
