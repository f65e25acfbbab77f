//! Progress bars for commands that can take a while (`commit`, `update`, `prefetch`): drawn
//! on stderr with indicatif, only when stderr is a terminal, and only once the command has
//! run for `progress.delay` seconds ([`DELAY`] by default: hg's is three seconds); a command
//! that is quick, quiet (`-q`), plain (`HGPLAIN`, unless `HGPLAINEXCEPT` names `progress`),
//! run with `progress.disable`, or whose stderr is not a terminal writes nothing extra at
//! all. These are hg's own rules for its progress bar.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How long a command runs before its bar appears.
pub const DELAY: Duration = Duration::from_millis(500);

/// A progress bar that may never be drawn: it is kept hidden until its request has run
/// for the delay (a timer thread reveals it, so a long silent phase shows too). It is the
/// library's [`client::Progress`] for the requests that report progress.
pub struct Progress {
    delay: Option<Duration>,
    bar: Option<ProgressBar>,
    reveal: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
    what: String,
    /// The bar counts (a known total) rather than spins.
    counting: bool,
}

/// Whether a command may draw progress (hg's `progress.shouldprint`, and
/// `progress.disable`), and after how long: `progress.delay` seconds, [`DELAY`] by default.
pub fn wanted(quiet: bool, repo_root: Option<&std::path::Path>) -> Option<Duration> {
    if quiet || revfs_hg::color::plain("progress") || !std::io::stderr().is_terminal() {
        return None;
    }
    let env = revfs_hg::config::Env::from_process();
    let cfg = revfs_hg::config::Config::load_env(&env, repo_root).ok();
    let disabled = cfg
        .as_ref()
        .and_then(|c| c.get_bool("progress", "disable").ok().flatten())
        .unwrap_or(false);
    if disabled {
        return None;
    }
    let delay = cfg
        .as_ref()
        .and_then(|c| c.get("progress", "delay"))
        .and_then(|v| String::from_utf8_lossy(v).trim().parse::<f64>().ok())
        .and_then(|d| Duration::try_from_secs_f64(d).ok())
        .unwrap_or(DELAY);
    Some(delay)
}

fn spinner_style() -> Option<ProgressStyle> {
    ProgressStyle::with_template("{msg:>11} {spinner} {elapsed}").ok()
}

fn bar_style() -> Option<ProgressStyle> {
    ProgressStyle::with_template("{msg:>11} [{wide_bar}] {pos}/{len} {eta}")
        .ok()
        .map(|s| s.progress_chars("=> "))
}

impl Progress {
    /// A bar shown `delay` after its request starts; nothing at all without one (see
    /// [`wanted`]).
    pub fn new(delay: Option<Duration>) -> Progress {
        Progress {
            delay,
            bar: None,
            reveal: None,
            what: String::new(),
            counting: false,
        }
    }
}

impl revfs_vfs::client::Progress for Progress {
    /// The request starts now: the bar says `what` until told more.
    fn start(&mut self, what: &str) {
        self.finish();
        let Some(delay) = self.delay else {
            return;
        };
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if let Some(style) = spinner_style() {
            bar.set_style(style);
        }
        bar.set_message(what.to_owned());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let shown = bar.clone();
        let timer = std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(delay) {
                shown.set_draw_target(ProgressDrawTarget::stderr());
                shown.enable_steady_tick(Duration::from_millis(100));
            }
        });
        self.bar = Some(bar);
        self.reveal = Some((tx, timer));
        what.clone_into(&mut self.what);
        self.counting = false;
    }

    fn enabled(&self) -> bool {
        self.bar.is_some()
    }

    /// `done` of `total` units of `what` are done (`total` 0: unknown, a spinner).
    fn update(&mut self, what: &str, done: u64, total: u64) {
        let Some(bar) = &self.bar else { return };
        let counting = total > 0;
        // Length first: the ticker thread may draw between two of these calls.
        if counting {
            bar.set_length(total);
            bar.set_position(done.min(total));
        }
        if what != self.what {
            bar.set_message(what.to_owned());
            what.clone_into(&mut self.what);
        }
        if counting != self.counting {
            let style = if counting {
                bar_style()
            } else {
                spinner_style()
            };
            if let Some(style) = style {
                bar.set_style(style);
            }
            self.counting = counting;
        }
    }

    /// Removes the bar (before the command prints its result).
    fn finish(&mut self) {
        if let Some((tx, timer)) = self.reveal.take() {
            drop(tx);
            let _ = timer.join();
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        revfs_vfs::client::Progress::finish(self);
    }
}
