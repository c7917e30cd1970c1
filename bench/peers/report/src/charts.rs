//! The SVG charts: one line per server (medians, with a bar from the fastest to the slowest
//! repetition), drawn with plotters' SVG backend.

use std::path::Path;

use plotters::coord::combinators::BindKeyPoints;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::raw::Series;

/// What one chart shows.
pub struct Chart<'a> {
    pub title: String,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    /// Connections on a log axis (16, 64, 256, 1,024 spaced evenly); otherwise linear from 0.
    pub x_log: bool,
    /// The metric on a log axis (latencies that span milliseconds to seconds).
    pub y_log: bool,
    /// Shown values are the stored ones times this (KiB → MiB: 1/1024).
    pub scale: f64,
}

type Error = Box<dyn std::error::Error>;

/// Line colours that stay apart on white and for common colour blindness (Tableau 10).
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// Draws `lines` into the SVG file `path`.
pub fn draw(path: &Path, chart: &Chart<'_>, lines: &[(String, Series)]) -> Result<(), Error> {
    let points = || lines.iter().flat_map(|(_, s)| s.iter());
    let x_max = points().map(|(c, _)| f64::from(*c)).fold(1.0, f64::max);
    let x_min = points().map(|(c, _)| f64::from(*c)).fold(x_max, f64::min);
    let y_max = points()
        .map(|(_, s)| s.max * chart.scale)
        .fold(0.0, f64::max);
    let y_min = points()
        .map(|(_, s)| s.min * chart.scale)
        .filter(|v| *v > 0.0)
        .fold(y_max, f64::min);
    // Headroom above the lines for the legend.
    let y_top = if y_max > 0.0 { y_max * 1.35 } else { 1.0 };
    // Ticks at the measured connection counts (16, 64, 256, 1,024), not at powers of ten.
    let mut keys: Vec<f64> = points().map(|(c, _)| f64::from(*c)).collect();
    keys.sort_by(f64::total_cmp);
    keys.dedup();
    let x_log = (x_min * 0.8..x_max * 1.25)
        .log_scale()
        .with_key_points(keys);
    match (chart.x_log, chart.y_log) {
        (true, true) => {
            let (lo, hi) = (y_min.max(1e-3) * 0.8, y_top * 1.5);
            let y = (lo..hi).log_scale().with_key_points(one_two_five(lo, hi));
            plot(path, chart, lines, x_log, y)
        }
        (true, false) => plot(path, chart, lines, x_log, 0.0..y_top),
        (false, _) => plot(path, chart, lines, 0.0..x_max * 1.05, 0.0..y_top),
    }
}

fn plot<X, Y>(
    path: &Path,
    chart: &Chart<'_>,
    lines: &[(String, Series)],
    x: X,
    y: Y,
) -> Result<(), Error>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let root = SVGBackend::new(path, (760, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)?;
    ctx.configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .x_label_formatter(&|v| thousands(*v))
        .y_label_formatter(&|v| short(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, (name, series)) in lines.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        let color = RGBColor(r, g, b).to_rgba();
        let at = |c: u32, v: f64| (f64::from(c), v * chart.scale);
        ctx.draw_series(LineSeries::new(
            series.iter().map(|(c, s)| at(*c, s.median)),
            color.stroke_width(2),
        ))?
        .label(name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        ctx.draw_series(
            series
                .iter()
                .map(|(c, s)| Circle::new(at(*c, s.median), 3, color.filled())),
        )?;
        ctx.draw_series(series.iter().filter(|(_, s)| s.max > s.min).map(|(c, s)| {
            PathElement::new(vec![at(*c, s.min), at(*c, s.max)], color.stroke_width(1))
        }))?;
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Ticks for a log axis: 1, 2, 5, 10, 20, 50, ... between `lo` and `hi`.
fn one_two_five(lo: f64, hi: f64) -> Vec<f64> {
    let mut decade = 10f64.powf(lo.log10().floor());
    let mut out = Vec::new();
    while decade <= hi {
        out.extend(
            [1.0, 2.0, 5.0]
                .map(|m| m * decade)
                .into_iter()
                .filter(|v| (lo..=hi).contains(v)),
        );
        decade *= 10.0;
    }
    out
}

/// 1024 → "1,024"; fractions keep one decimal.
pub fn thousands(v: f64) -> String {
    if v.fract().abs() > 1e-9 && v.abs() < 10.0 {
        return format!("{v:.1}");
    }
    let n = v.round() as i64;
    let digits = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// An axis value in few characters: 250000 → "250k", 0.25 → "0.25".
fn short(v: f64) -> String {
    match v.abs() {
        0.0 => "0".to_owned(),
        a if a >= 1e6 => format!("{:.1}M", v / 1e6),
        a if a >= 1e4 => format!("{:.0}k", v / 1e3),
        a if a >= 100.0 || v.fract() == 0.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(thousands(1024.0), "1,024");
        assert_eq!(thousands(10000.0), "10,000");
        assert_eq!(thousands(16.0), "16");
        assert_eq!(short(250_000.0), "250k");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(
            one_two_five(0.3, 60.0),
            [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0]
        );
    }
}
