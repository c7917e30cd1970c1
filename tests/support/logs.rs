//! A logger that keeps what the crate logs, for the tests that check log lines (one logger per
//! process: each such test binary installs this one, for the records it wants).

use std::sync::{Mutex, OnceLock};

/// Which records to keep: this level exactly, from targets starting with this prefix.
struct Capture {
    level: log::Level,
    target: &'static str,
}

static CAPTURE: OnceLock<Capture> = OnceLock::new();
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() == self.level && m.target().starts_with(self.target)
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            lines_mut().push(r.args().to_string());
        }
    }

    fn flush(&self) {}
}

fn lines_mut() -> std::sync::MutexGuard<'static, Vec<String>> {
    LINES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps the records at `level` from targets starting with `target`, from now on (the first
/// call of the process decides; later ones change nothing).
pub fn capture(level: log::Level, target: &'static str) {
    let mut first = false;
    let capture = CAPTURE.get_or_init(|| {
        first = true;
        Capture { level, target }
    });
    if first {
        log::set_logger(capture).expect("the only logger of this binary");
        log::set_max_level(level.to_level_filter());
    }
}

/// Every line kept so far, by every test of this binary.
pub fn lines() -> Vec<String> {
    lines_mut().clone()
}
