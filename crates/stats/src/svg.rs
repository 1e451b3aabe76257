//! SVG figures returned as strings: Kaplan–Meier curves with a numbers-at-risk
//! table, and forest plots of effect estimates with CIs. No IO: the caller
//! writes the string where it wants.

use std::fmt::Write;

use crate::survival::KmCurve;

const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// "Nice" tick step for a range (1, 2 or 5 times a power of ten).
fn tick_step(max: f64, target: usize) -> f64 {
    let raw = max / target as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let r = raw / mag;
    mag * if r <= 1.0 {
        1.0
    } else if r <= 2.0 {
        2.0
    } else if r <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// Number at risk in a curve at time `t` (those with time >= t).
pub fn number_at_risk(curve: &KmCurve, t: f64) -> f64 {
    curve.time.iter().position(|x| *x >= t).map_or(0.0, |i| curve.n_risk[i])
}

/// Kaplan–Meier step curves (one per group, labelled), censoring marks,
/// and a numbers-at-risk table under the time axis.
pub fn kaplan_meier_svg(curves: &[KmCurve], labels: &[String], time_label: &str) -> String {
    let (w, plot_h, left, top) = (720.0, 360.0, 110.0, 20.0);
    let right = 30.0;
    let risk_h = 24.0 * (curves.len() as f64 + 1.0);
    let h = top + plot_h + 50.0 + risk_h;
    let pw = w - left - right;
    let tmax = curves.iter().flat_map(|c| c.time.iter().copied()).fold(0.0, f64::max).max(1e-9);
    let step = tick_step(tmax, 6);
    let xs = |t: f64| left + pw * t / tmax;
    let ys = |s: f64| top + plot_h * (1.0 - s);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r##"<rect width="{w}" height="{h}" fill="#fff"/>"##);
    // Axes and grid.
    let _ = writeln!(
        o,
        r##"<g stroke="#000"><line x1="{left}" y1="{}" x2="{}" y2="{}"/><line x1="{left}" y1="{top}" x2="{left}" y2="{}"/></g>"##,
        top + plot_h,
        left + pw,
        top + plot_h,
        top + plot_h
    );
    for k in 0..=4 {
        let s = k as f64 / 4.0;
        let _ = writeln!(
            o,
            r##"<line x1="{}" y1="{y}" x2="{left}" y2="{y}" stroke="#000"/><text x="{}" y="{}" text-anchor="end">{s:.2}</text>"##,
            left - 5.0,
            left - 8.0,
            ys(s) + 4.0,
            y = ys(s)
        );
    }
    let mut ticks = Vec::new();
    let mut t = 0.0;
    while t <= tmax + 1e-9 {
        ticks.push(t);
        let _ = writeln!(
            o,
            r##"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#000"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            top + plot_h,
            top + plot_h + 5.0,
            top + plot_h + 18.0,
            fmt_num(t),
            x = xs(t)
        );
        t += step;
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        top + plot_h + 36.0,
        esc(time_label)
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">Survival probability</text>"#,
        top + plot_h / 2.0
    );
    // Curves.
    for (i, c) in curves.iter().enumerate() {
        let col = COLOURS[i % COLOURS.len()];
        let mut d = format!("M{:.2},{:.2}", xs(0.0), ys(1.0));
        let mut s_prev = 1.0;
        for (t, s) in c.time.iter().zip(&c.surv) {
            let _ = write!(d, " H{:.2}", xs(*t));
            if *s != s_prev {
                let _ = write!(d, " V{:.2}", ys(*s));
                s_prev = *s;
            }
        }
        let _ = writeln!(o, r#"<path d="{d}" fill="none" stroke="{col}" stroke-width="2" class="km-curve"/>"#);
        for ((t, s), cen) in c.time.iter().zip(&c.surv).zip(&c.n_censor) {
            if *cen > 0.0 {
                let _ = writeln!(
                    o,
                    r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="{col}" class="censor"/>"#,
                    ys(*s) - 4.0,
                    ys(*s) + 4.0,
                    x = xs(*t)
                );
            }
        }
        let label = labels.get(i).cloned().unwrap_or_else(|| fmt_num(c.group));
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" fill="{col}">{}</text>"#,
            left + pw - 150.0,
            top + 16.0 + 16.0 * i as f64,
            esc(&label)
        );
    }
    // Numbers at risk.
    let base = top + plot_h + 60.0;
    let _ = writeln!(o, r#"<text x="4" y="{base}" font-weight="bold">Number at risk</text>"#);
    for (i, c) in curves.iter().enumerate() {
        let y = base + 20.0 * (i as f64 + 1.0);
        let col = COLOURS[i % COLOURS.len()];
        let label = labels.get(i).cloned().unwrap_or_else(|| fmt_num(c.group));
        let _ = writeln!(o, r#"<text x="4" y="{y}" fill="{col}">{}</text>"#, esc(&label));
        for t in &ticks {
            let _ = writeln!(
                o,
                r#"<text x="{}" y="{y}" text-anchor="middle" class="at-risk">{}</text>"#,
                xs(*t),
                number_at_risk(c, *t)
            );
        }
    }
    o.push_str("</svg>\n");
    o
}

/// One row of a forest plot.
#[derive(Debug, Clone, PartialEq)]
pub struct ForestRow {
    pub label: String,
    pub estimate: f64,
    pub conf_low: f64,
    pub conf_high: f64,
}

/// Forest plot: a point and CI bar per row, a reference line at `null_value`
/// (1 for ratios), on a log axis when `log_scale`.
pub fn forest_svg(rows: &[ForestRow], x_label: &str, null_value: f64, log_scale: bool) -> String {
    let (w, left, right, top) = (720.0, 220.0, 150.0, 20.0);
    let row_h = 26.0;
    let plot_h = row_h * rows.len().max(1) as f64;
    let h = top + plot_h + 50.0;
    let pw = w - left - right;
    let tr = |v: f64| if log_scale { v.ln() } else { v };
    let finite: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.conf_low, r.conf_high, r.estimate])
        .chain([null_value])
        .filter(|v| v.is_finite() && (!log_scale || *v > 0.0))
        .map(tr)
        .collect();
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = ((hi - lo) * 0.05).max(1e-6);
    let (lo, hi) = (lo - pad, hi + pad);
    let xs = |v: f64| left + pw * ((tr(v).clamp(lo, hi)) - lo) / (hi - lo);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r##"<rect width="{w}" height="{h}" fill="#fff"/>"##);
    let _ = writeln!(
        o,
        r##"<line x1="{x}" y1="{top}" x2="{x}" y2="{}" stroke="#888" stroke-dasharray="4 3"/>"##,
        top + plot_h,
        x = xs(null_value)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = top + row_h * (i as f64 + 0.5);
        let _ = writeln!(o, r#"<text x="6" y="{}">{}</text>"#, y + 4.0, esc(&r.label));
        let _ = writeln!(
            o,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#000" class="ci"/><rect x="{}" y="{}" width="8" height="8" fill="#1f77b4" class="estimate"/>"##,
            xs(r.conf_low),
            xs(r.conf_high),
            xs(r.estimate) - 4.0,
            y - 4.0
        );
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}">{} ({}, {})</text>"#,
            w - right + 8.0,
            y + 4.0,
            fmt_num(r.estimate),
            fmt_num(r.conf_low),
            fmt_num(r.conf_high)
        );
    }
    let base = top + plot_h;
    let _ = writeln!(o, r##"<line x1="{left}" y1="{base}" x2="{}" y2="{base}" stroke="#000"/>"##, left + pw);
    for k in 0..=4 {
        let v = lo + (hi - lo) * k as f64 / 4.0;
        let label = if log_scale { v.exp() } else { v };
        let x = left + pw * k as f64 / 4.0;
        let _ = writeln!(
            o,
            r##"<line x1="{x}" y1="{base}" x2="{x}" y2="{}" stroke="#000"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            base + 5.0,
            base + 18.0,
            fmt_num(label)
        );
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        base + 38.0,
        esc(x_label)
    );
    o.push_str("</svg>\n");
    o
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return if v > 0.0 { "Inf".into() } else { "NA".into() };
    }
    if v == v.round() && v.abs() < 1e9 {
        format!("{}", v as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::survival::{kaplan_meier, ConfType};

    #[test]
    fn km_svg_has_one_curve_per_group_and_numbers_at_risk() {
        let time = [1.0, 2.0, 3.0, 4.0, 5.0, 2.0, 3.0, 6.0, 8.0, 9.0];
        let status = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0];
        let group = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        let curves = kaplan_meier(&time, &status, Some(&group), ConfType::Log, 0.95).unwrap();
        let svg = kaplan_meier_svg(&curves, &["control".into(), "treated <1>".into()], "Days");
        assert_eq!(svg.matches("class=\"km-curve\"").count(), 2);
        assert!(svg.contains("treated &lt;1&gt;"));
        // At time 0 everyone is at risk: 5 in each group.
        assert_eq!(number_at_risk(&curves[1], 0.0), 5.0);
        assert_eq!(number_at_risk(&curves[1], 7.0), 2.0);
        assert_eq!(number_at_risk(&curves[0], 6.0), 0.0);
        assert!(svg.contains(r#"class="at-risk">5</text>"#));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn forest_svg_has_a_row_per_estimate() {
        let rows = vec![
            ForestRow { label: "age".into(), estimate: 1.02, conf_low: 1.0, conf_high: 1.04 },
            ForestRow { label: "sex".into(), estimate: 0.6, conf_low: 0.43, conf_high: 0.83 },
        ];
        let svg = forest_svg(&rows, "Hazard ratio", 1.0, true);
        assert_eq!(svg.matches("class=\"estimate\"").count(), 2);
        assert!(svg.contains("0.60 (0.43, 0.83)"));
    }
}
