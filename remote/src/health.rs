//! Whether a server answers. Once a request to it has run out its deadline, fetches fail
//! at once instead of each waiting out a deadline of its own (a program going through a
//! thousand files not fetched yet would otherwise wait a thousand deadlines, one after the
//! other), until the server answers again. A thread finds that out: one probe at a time (a
//! new connection and the server's capabilities, under the same deadline), a fifth of a
//! second apart, for as long as the fetcher lives. A server that refuses connections is
//! not silent (a probe refused ends the silence too): those failures come at once anyway,
//! and the next fetch asks again.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long the prober waits between two probes.
const PAUSE: Duration = Duration::from_millis(200);

#[derive(Default)]
struct State {
    /// Since when the server has not answered, and the request's error.
    silent: Option<(Instant, String)>,
    /// A prober thread runs.
    probing: bool,
}

/// A server's health, shared by a fetcher's requests.
#[derive(Default)]
pub(crate) struct Health {
    state: Arc<Mutex<State>>,
}

impl Health {
    fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
        state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Err(why)` while the server is known not to answer: the caller fails at once.
    pub(crate) fn check(&self) -> Result<(), String> {
        match &Self::lock(&self.state).silent {
            None => Ok(()),
            Some((since, reason)) => Err(format!(
                "no answer for {:.1} s ({reason}); reads of what is not here fail at once \
                 until the server answers again",
                since.elapsed().as_secs_f64()
            )),
        }
    }

    /// A request ran out its deadline with `reason`: fetches fail at once from now on,
    /// until `probe` (run from a thread of its own) returns true: the server answered, or
    /// refused at once.
    pub(crate) fn silent(&self, reason: &str, probe: impl Fn() -> bool + Send + 'static) {
        let mut s = Self::lock(&self.state);
        if s.silent.is_none() {
            s.silent = Some((Instant::now(), reason.to_owned()));
            tracing::warn!("the server did not answer ({reason}): asking it again until it does");
        }
        if s.probing {
            return;
        }
        s.probing = true;
        drop(s);
        let state: Weak<Mutex<State>> = Arc::downgrade(&self.state);
        let spawned = std::thread::Builder::new()
            .name("revfs-probe".into())
            .spawn(move || loop {
                std::thread::sleep(PAUSE);
                // Ends with the fetcher.
                if state.strong_count() == 0 {
                    return;
                }
                let answered = probe();
                let Some(state) = state.upgrade() else {
                    return;
                };
                if answered {
                    let mut s = Self::lock(&state);
                    if let Some((since, _)) = s.silent.take() {
                        tracing::info!(
                            "the server answers again, after {:.1} s",
                            since.elapsed().as_secs_f64()
                        );
                    }
                    s.probing = false;
                    return;
                }
            });
        if spawned.is_err() {
            // No thread: the next fetch asks the server itself.
            let mut s = Self::lock(&self.state);
            s.silent = None;
            s.probing = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn silence_fails_fetches_at_once_until_a_probe_is_answered() {
        let h = Health::default();
        assert!(h.check().is_ok());
        let answers = Arc::new(AtomicBool::new(false));
        let probes = Arc::new(AtomicUsize::new(0));
        let (a, p) = (answers.clone(), probes.clone());
        h.silent("no answer within 2 s", move || {
            p.fetch_add(1, Ordering::SeqCst);
            a.load(Ordering::SeqCst)
        });
        // A second silence starts no second prober.
        h.silent("no answer within 2 s", || panic!("a second prober"));
        let err = h.check().unwrap_err();
        assert!(err.contains("(no answer within 2 s)"), "{err}");
        let until = Instant::now() + Duration::from_secs(10);
        while probes.load(Ordering::SeqCst) < 2 {
            assert!(Instant::now() < until);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(h.check().is_err());
        answers.store(true, Ordering::SeqCst);
        while h.check().is_err() {
            assert!(Instant::now() < until);
            std::thread::sleep(Duration::from_millis(10));
        }
        // Silent again: a new prober.
        h.silent("again", || true);
        while h.check().is_err() {
            assert!(Instant::now() < until);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
