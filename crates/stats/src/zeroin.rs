//! Brent's root finder exactly as R's `uniroot` runs it (R_zeroin2, default
//! tolerance `.Machine$double.eps^0.25`). Fisher's exact test finds its
//! conditional MLE and CI with `uniroot`, whose loose tolerance makes the
//! reported numbers depend on the iteration path; following the same path is
//! the only way to report the same numbers.

/// `uniroot(f, c(lower, upper))$root` with R's defaults.
pub fn uniroot(f: impl Fn(f64) -> f64, lower: f64, upper: f64) -> f64 {
    let fa = f(lower);
    let fb = f(upper);
    zeroin2(&f, lower, upper, fa, fb, f64::EPSILON.powf(0.25), 1000)
}

fn zeroin2(f: &impl Fn(f64) -> f64, ax: f64, bx: f64, fa: f64, fb: f64, tol: f64, maxit: usize) -> f64 {
    let (mut a, mut b) = (ax, bx);
    let (mut fa, mut fb) = (fa, fb);
    let mut c = a;
    let mut fc = fa;
    if fa == 0.0 {
        return a;
    }
    if fb == 0.0 {
        return b;
    }
    for _ in 0..=maxit {
        let prev_step = b - a;
        if fc.abs() < fb.abs() {
            a = b;
            b = c;
            c = a;
            fa = fb;
            fb = fc;
            fc = fa;
        }
        let tol_act = 2.0 * f64::EPSILON * b.abs() + tol / 2.0;
        let mut new_step = (c - b) / 2.0;
        if new_step.abs() <= tol_act || fb == 0.0 {
            return b;
        }
        if prev_step.abs() >= tol_act && fa.abs() > fb.abs() {
            let (mut p, mut q);
            let cb = c - b;
            if a == c {
                let t1 = fb / fa;
                p = cb * t1;
                q = 1.0 - t1;
            } else {
                q = fa / fc;
                let t1 = fb / fc;
                let t2 = fb / fa;
                p = t2 * (cb * q * (q - t1) - (b - a) * (t1 - 1.0));
                q = (q - 1.0) * (t1 - 1.0) * (t2 - 1.0);
            }
            if p > 0.0 {
                q = -q;
            } else {
                p = -p;
            }
            if p < (0.75 * cb * q - (tol_act * q).abs() / 2.0) && p < (prev_step * q / 2.0).abs() {
                new_step = p / q;
            }
        }
        if new_step.abs() < tol_act {
            new_step = if new_step > 0.0 { tol_act } else { -tol_act };
        }
        a = b;
        fa = fb;
        b += new_step;
        fb = f(b);
        if (fb > 0.0 && fc > 0.0) || (fb < 0.0 && fc < 0.0) {
            c = a;
            fc = fa;
        }
    }
    b
}
