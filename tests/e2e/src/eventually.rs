//! The one wait of the e2e tests: poll a check until it holds or a deadline passes, and on
//! timeout say what was awaited, for how long, and what the check saw last.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use harmony_e2e::eventually::eventually;
//!
//! let mut polls = 0;
//! let n = eventually(Duration::from_secs(5), "three polls", || {
//!     polls += 1;
//!     let seen = polls;
//!     async move { if seen >= 3 { Ok(seen) } else { Err(format!("{seen} polls")) } }
//! })
//! .await
//! .unwrap();
//! assert_eq!(n, 3);
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

/// The first pause between two polls; it doubles up to [`MAX_PAUSE`].
pub const FIRST_PAUSE: Duration = Duration::from_millis(20);

/// The longest pause between two polls.
pub const MAX_PAUSE: Duration = Duration::from_millis(250);

/// What one poll of a check found: the value awaited, or not yet (with what it saw).
///
/// Implemented for `Option<T>` (`None` is "not yet") and `Result<T, E: Debug>` (`Err(e)` is
/// "not yet", and `e` is what the timeout message shows as last seen).
pub trait Poll<T> {
    /// The value, or a description of what was seen instead.
    fn into_poll(self) -> Result<T, String>;
}

impl<T> Poll<T> for Option<T> {
    fn into_poll(self) -> Result<T, String> {
        self.ok_or_else(|| "not yet".to_string())
    }
}

impl<T, E: fmt::Debug> Poll<T> for Result<T, E> {
    fn into_poll(self) -> Result<T, String> {
        self.map_err(|e| format!("{e:?}"))
    }
}

/// A wait whose check never held: what was awaited, for how long, what was seen last.
pub struct Waited {
    /// What the caller waited for.
    pub what: String,
    /// How long it waited.
    pub deadline: Duration,
    /// What the last poll saw.
    pub last: String,
    /// How many polls were made.
    pub polls: u32,
}

impl fmt::Display for Waited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "still waiting for {} after {:?} ({} polls); last seen: {}",
            self.what, self.deadline, self.polls, self.last
        )
    }
}

impl fmt::Debug for Waited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Waited {}

/// What a check saw, shown as it is when the wait times out: a check returning
/// `Err(Seen(text))` rather than `Err(text)` keeps a JSON document or a multi-line output
/// readable (a `String` would be shown quoted, its quotes and newlines escaped).
pub struct Seen(pub String);

impl fmt::Debug for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The polls of one wait: counts them and paces them ([`FIRST_PAUSE`], doubling up to
/// [`MAX_PAUSE`], never past the deadline).
struct Attempts {
    deadline: Duration,
    end: Instant,
    next: Duration,
    polls: u32,
}

impl Attempts {
    fn new(deadline: Duration) -> Self {
        Self {
            deadline,
            end: Instant::now() + deadline,
            next: FIRST_PAUSE,
            polls: 0,
        }
    }

    /// After a poll that saw `last`: the pause before the next one, or the [`Waited`] that ends
    /// the wait when the deadline has passed.
    fn after(&mut self, last: String, what: &impl fmt::Display) -> Result<Duration, Waited> {
        self.polls += 1;
        let Some(left) = self.end.checked_duration_since(Instant::now()) else {
            return Err(Waited {
                what: what.to_string(),
                deadline: self.deadline,
                last,
                polls: self.polls,
            });
        };
        let pause = self.next.min(left);
        self.next = (self.next * 2).min(MAX_PAUSE);
        Ok(pause)
    }
}

/// Polls `check` until it yields a value or `deadline` has passed; the last poll starts no
/// later than the deadline. On timeout the [`Waited`] names `what` and the last thing seen.
pub async fn eventually<T, P, F, Fut>(
    deadline: Duration,
    what: impl fmt::Display,
    mut check: F,
) -> Result<T, Waited>
where
    P: Poll<T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = P>,
{
    let mut attempts = Attempts::new(deadline);
    loop {
        match check().await.into_poll() {
            Ok(v) => return Ok(v),
            Err(last) => tokio::time::sleep(attempts.after(last, &what)?).await,
        }
    }
}

/// [`eventually`] for a test without a runtime: the same polls, sleeping the thread.
pub fn eventually_blocking<T, P, F>(
    deadline: Duration,
    what: impl fmt::Display,
    mut check: F,
) -> Result<T, Waited>
where
    P: Poll<T>,
    F: FnMut() -> P,
{
    let mut attempts = Attempts::new(deadline);
    loop {
        match check().into_poll() {
            Ok(v) => return Ok(v),
            Err(last) => std::thread::sleep(attempts.after(last, &what)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_value_a_check_yields() {
        let mut n = 0;
        let got = eventually(Duration::from_secs(5), "n = 3", || {
            n += 1;
            let seen = n;
            async move { (seen == 3).then_some(seen) }
        })
        .await
        .unwrap();
        assert_eq!(got, 3);
    }

    #[tokio::test]
    async fn a_timeout_names_what_was_awaited_and_the_last_thing_seen() {
        let mut n = 0;
        let err = eventually(
            Duration::from_millis(100),
            "the region to be healthy",
            || {
                n += 1;
                let seen = n;
                async move { Err::<(), _>(format!("unhealthy at poll {seen}")) }
            },
        )
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("the region to be healthy"), "{text}");
        assert!(
            text.contains(&format!("unhealthy at poll {}", err.polls)),
            "{text}"
        );
        assert!(err.polls >= 2, "polled again before giving up: {text}");
    }

    #[test]
    fn the_blocking_form_polls_the_same_way() {
        let mut n = 0;
        assert_eq!(
            eventually_blocking(Duration::from_secs(5), "n = 2", || {
                n += 1;
                (n == 2).then_some(n)
            })
            .unwrap(),
            2
        );
        let err = eventually_blocking(Duration::ZERO, "never", || None::<()>).unwrap_err();
        assert_eq!((err.polls, err.last.as_str()), (1, "not yet"));
    }

    #[test]
    fn pauses_double_up_to_the_cap_and_stop_at_the_deadline() {
        let mut a = Attempts::new(Duration::from_secs(60));
        let seen: Vec<_> = (0..6)
            .map(|_| a.after(String::new(), &"x").unwrap())
            .collect();
        assert_eq!(seen[0], FIRST_PAUSE);
        assert_eq!(seen[1], FIRST_PAUSE * 2);
        assert_eq!(seen[5], MAX_PAUSE);
        let mut late = Attempts::new(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2));
        let w = late.after("seen".into(), &"x").unwrap_err();
        assert_eq!((w.polls, w.last.as_str()), (1, "seen"));
    }
}
