//! One memory budget for a whole server: the bytes held for request bodies in memory, response
//! tails waiting for a slow client, WebSocket and event-stream send queues, and the encoders of
//! responses compressed as they stream, all together.
//! Every per-connection bound still holds; this bounds their sum. Envoy's overload manager is
//! the model: past the budget the server degrades, it does not die.
//!
//! - a request body arriving while the budget is spent goes to its temporary file at once
//!   ([`crate::http::spool`]), and a new request that would need a body buffer is answered
//!   `503` with `Retry-After` ([`Refusal::BodyOverBudget`]);
//! - when a session's (WebSocket, event stream) queue would grow past the budget, the
//!   sessions whose unsent data is oldest — peers that read slower than they are sent to —
//!   are dropped first ([`Refusal::SessionOverBudget`]), their queues freed at once, until it
//!   fits. When no session holds unsent data, the message goes anyway, so the budget can be
//!   passed by at most one message per session that keeps up;
//! - a response already made is never cut for the budget: its tail waits for its client
//!   under the minimum rate, and counts;
//! - memory the server may go without is taken only below [`PAUSE_AT`] sixteenths
//!   ([`Budget::optional`]): a response goes out uncompressed rather than hold an encoder;
//! - from [`PAUSE_AT`] sixteenths of the budget held, a WebSocket stops reading its input (TCP
//!   back-pressure on its peer: a message read may be sent on to many) until what is held
//!   falls to [`RESUME_AT`] sixteenths ([`Budget::may_read`]).
//!
//! [`Refusal::BodyOverBudget`]: crate::http::refusal::Refusal::BodyOverBudget
//! [`Refusal::SessionOverBudget`]: crate::http::refusal::Refusal::SessionOverBudget

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use slab::Slab;

/// The default budget: a quarter of a small (1 GiB) machine.
pub(crate) const DEFAULT_MEMORY_BUDGET: usize = 256 * 1024 * 1024;

/// What each holder (a body, a send queue) keeps without charge: like a connection's read and
/// write buffers, a working size every connection may have, so that small bodies and a queue
/// that keeps up touch no counter shared by every thread. Only what grows past it is charged.
pub(crate) const ALLOWANCE: usize = 16 * 1024;

/// Sessions stop reading input once this share of the budget, in sixteenths, is held: before
/// it is spent (a charge that does not fit is refused, so what is held seldom reaches the
/// limit itself), as Envoy's overload actions start at a share of theirs.
pub(crate) const PAUSE_AT: usize = 15;

/// Input paused resumes once what is held falls to this share of the budget, in sixteenths:
/// room for a few messages at once, so sessions do not pause and resume at every message.
pub(crate) const RESUME_AT: usize = 14;

/// How many sessions one message or event may drop to make room before it is refused.
pub(crate) const DROPS_PER_MESSAGE: usize = 8;

/// What one try to charge a session's message came to.
pub(crate) enum Room {
    /// It is charged.
    Fits,
    /// It does not fit: drop the session with the oldest unsent data, then try again.
    Short(Budget),
    /// It does not fit and no more may be dropped for it: refuse it.
    Refused,
}

/// What one try to queue a message came to (the queue's own answer, or room to make).
pub(crate) enum Attempt<T> {
    Done(T),
    Short(Budget),
}

/// Queues a session's message past the budget, the one way every session does: `attempt`
/// runs under the queue's lock and charges it ([`Held::room`]); between attempts, with no
/// queue locked, the session whose unsent data is oldest is dropped (perhaps the caller's), up
/// to [`DROPS_PER_MESSAGE`]. `attempt(last)`: `last` when none may be dropped any more (then it
/// never answers `Short`).
pub(crate) fn make_room<T>(mut attempt: impl FnMut(bool) -> Attempt<T>) -> T {
    let mut last = false;
    let mut drops = 0;
    loop {
        match attempt(last) {
            Attempt::Done(done) => return done,
            Attempt::Short(budget) => {
                drops += 1;
                last = drops == DROPS_PER_MESSAGE || !budget.shed_oldest();
            }
        }
    }
}

/// The budget shared by every thread of one engine. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Budget(Arc<Inner>);

struct Inner {
    limit: usize,
    held: AtomicUsize,
    bodies_refused: AtomicU64,
    sessions_dropped: AtomicU64,
    /// Times a session stopped reading its input for the budget.
    reads_paused: AtomicU64,
    /// Sessions not reading their input now, to wake once there is room.
    paused: AtomicUsize,
    /// Every session's send queue, to drop the one with the oldest unsent data.
    sessions: Mutex<Slab<Weak<dyn Queued>>>,
}

/// A session's send queue, as the budget sees it.
pub(crate) trait Queued: Send + Sync {
    /// When the oldest data its peer has not taken was queued; `None` when nothing waits.
    fn oldest(&self) -> Option<Instant>;
    /// Drops the session: its queue is freed now (and counted), its connection closes on its
    /// next turn.
    fn shed(&self);
    /// The budget has room again: a session that stopped reading for it is woken
    /// ([`Budget::may_read`]). A session that never stops reading has nothing to do.
    fn resume(&self) {}
}

/// A session's place in the budget's list; it leaves the list when dropped.
pub(crate) struct Enlisted {
    budget: Budget,
    key: usize,
}

impl Enlisted {
    /// The budget whose list this is on.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }
}

impl Drop for Enlisted {
    fn drop(&mut self) {
        self.budget.sessions().try_remove(self.key);
    }
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("limit", &self.0.limit)
            .field("held", &self.held())
            .finish()
    }
}

impl Budget {
    /// A budget of `limit` bytes (`usize::MAX`: no limit, only the count).
    pub(crate) fn new(limit: usize) -> Budget {
        Budget(Arc::new(Inner {
            limit,
            held: AtomicUsize::new(0),
            bodies_refused: AtomicU64::new(0),
            sessions_dropped: AtomicU64::new(0),
            reads_paused: AtomicU64::new(0),
            paused: AtomicUsize::new(0),
            sessions: Mutex::new(Slab::new()),
        }))
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Slab<Weak<dyn Queued>>> {
        // Nothing under this lock panics; a poisoned list is still consistent.
        self.0.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts a session's queue on the list the budget drops from.
    pub(crate) fn enlist(&self, queue: Weak<dyn Queued>) -> Enlisted {
        Enlisted {
            budget: self.clone(),
            key: self.sessions().insert(queue),
        }
    }

    /// Drops the session whose unsent data is oldest; false when no session holds any. The
    /// caller holds no queue's lock (each is taken here, one at a time).
    pub(crate) fn shed_oldest(&self) -> bool {
        // The queues are looked at after the list's lock is let go: the last handle of a
        // queue dropped here leaves the list, which takes its lock.
        let queues: Vec<Arc<dyn Queued>> = {
            let sessions = self.sessions();
            sessions.iter().filter_map(|(_, q)| q.upgrade()).collect()
        };
        let victim = queues
            .iter()
            .filter_map(|q| q.oldest().map(|since| (since, q)))
            .min_by_key(|(since, _)| *since);
        match victim {
            Some((_, q)) => {
                q.shed();
                true
            }
            None => false,
        }
    }

    /// Whether a session (its `paused` mark) may read input, which may add to what is held:
    /// not from [`PAUSE_AT`] sixteenths of the budget held, and then not until what is held
    /// falls to [`RESUME_AT`] sixteenths; the session is then woken ([`Queued::resume`]) and
    /// asks again.
    pub(crate) fn may_read(&self, paused: &AtomicBool) -> bool {
        if paused.load(SeqCst) {
            if self.held() > self.resume_mark() {
                return false;
            }
            self.unpause(paused);
            return true;
        }
        if self.held() < self.share(PAUSE_AT) {
            return true;
        }
        paused.store(true, SeqCst);
        self.0.paused.fetch_add(1, SeqCst);
        // What was given back between the look above and the mark woke nobody: look again.
        if self.held() <= self.resume_mark() {
            self.unpause(paused);
            return true;
        }
        self.0.reads_paused.fetch_add(1, Relaxed);
        false
    }

    /// Takes a session's `paused` mark off (once, whoever gets there first). True when it was on.
    pub(crate) fn unpause(&self, paused: &AtomicBool) -> bool {
        let was = paused.swap(false, SeqCst);
        if was {
            self.0.paused.fetch_sub(1, SeqCst);
        }
        was
    }

    /// Sessions not reading their input now.
    #[cfg(test)]
    pub(crate) fn paused_sessions(&self) -> usize {
        self.0.paused.load(SeqCst)
    }

    /// True while what is held is above where paused input resumes.
    pub(crate) fn has_paused_input(&self) -> bool {
        self.held() > self.resume_mark()
    }

    fn resume_mark(&self) -> usize {
        self.share(RESUME_AT)
    }

    /// `sixteenths` of the budget (of a budget under 16 bytes too).
    fn share(&self, sixteenths: usize) -> usize {
        match self.0.limit {
            small @ 0..16 => small * sixteenths / 16,
            limit => limit / 16 * sixteenths,
        }
    }

    /// Wakes every session that stopped reading (they look again at their next turn). The
    /// queues are looked at after the list's lock is let go, as in [`Budget::shed_oldest`].
    fn resume_all(&self) {
        let queues: Vec<Arc<dyn Queued>> = {
            let sessions = self.sessions();
            sessions.iter().filter_map(|(_, q)| q.upgrade()).collect()
        };
        for q in &queues {
            q.resume();
        }
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> usize {
        // Sequentially consistent for `may_read`'s look after its mark (a plain load on x86).
        self.0.held.load(SeqCst)
    }

    pub(crate) fn limit(&self) -> usize {
        self.0.limit
    }

    /// True when `n` more bytes fit now.
    pub(crate) fn fits(&self, n: usize) -> bool {
        self.held()
            .checked_add(n)
            .is_some_and(|with| with <= self.0.limit)
    }

    /// True when nothing more fits.
    pub(crate) fn is_spent(&self) -> bool {
        self.held() >= self.0.limit
    }

    /// A charge of `bytes` for memory the server may go without (an encoder's state for a
    /// response compressed on the fly, which can go out as it is): taken only while what is
    /// held stays under [`PAUSE_AT`] sixteenths of the budget with it, so it gives way before
    /// bodies and sessions. `None`: go without.
    #[cfg_attr(not(feature = "compression"), allow(dead_code))]
    pub(crate) fn optional(&self, bytes: usize) -> Option<Held> {
        let with = self.held().checked_add(bytes)?;
        if with > self.share(PAUSE_AT) {
            return None;
        }
        let mut held = self.charge();
        held.try_grow(bytes).then_some(held)
    }

    /// A charge of nothing yet, to grow and shrink as its holder's memory does.
    pub(crate) fn charge(&self) -> Held {
        Held {
            budget: self.clone(),
            bytes: 0,
        }
    }

    /// Takes `n` bytes if they fit (nothing always does).
    fn take(&self, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        self.0
            .held
            .fetch_update(Relaxed, Relaxed, |held| {
                held.checked_add(n).filter(|&total| total <= self.0.limit)
            })
            .is_ok()
    }

    /// Takes `n` bytes whether or not they fit: memory that exists already.
    fn force(&self, n: usize) {
        let _ = self
            .0
            .held
            .fetch_update(Relaxed, Relaxed, |held| Some(held.saturating_add(n)));
    }

    /// Gives `n` bytes back; when that brings what is held down to the mark, sessions that
    /// stopped reading are woken. (Sequentially consistent, with [`Budget::may_read`]'s mark:
    /// one of the two sees the other. On x86 a read-modify-write costs the same either way.)
    fn give(&self, n: usize) {
        let before = self
            .0
            .held
            .fetch_update(SeqCst, SeqCst, |held| Some(held.saturating_sub(n)))
            .unwrap_or_else(|held| held);
        let mark = self.resume_mark();
        if before > mark && before.saturating_sub(n) <= mark && self.0.paused.load(SeqCst) > 0 {
            self.resume_all();
        }
    }

    /// A request that would need a body buffer was answered `503`.
    pub(crate) fn body_refused(&self) {
        self.0.bodies_refused.fetch_add(1, Relaxed);
    }

    /// A session was dropped to keep within the budget.
    pub(crate) fn session_dropped(&self) {
        self.0.sessions_dropped.fetch_add(1, Relaxed);
    }

    /// Times a session stopped reading its input for the budget, so far.
    pub(crate) fn reads_paused(&self) -> u64 {
        self.0.reads_paused.load(Relaxed)
    }

    /// `(bodies refused, sessions dropped)` so far.
    pub(crate) fn refusals(&self) -> (u64, u64) {
        (
            self.0.bodies_refused.load(Relaxed),
            self.0.sessions_dropped.load(Relaxed),
        )
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(usize::MAX)
    }
}

/// Bytes one holder has taken from the budget; given back when dropped, whatever happens to
/// the holder (a panic, a client that left).
pub(crate) struct Held {
    budget: Budget,
    bytes: usize,
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Held({})", self.bytes)
    }
}

impl Held {
    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds what a holder of `bytes` is charged for past its [`ALLOWANCE`], if it fits in
    /// the budget; false (and nothing more taken) if not. Touches the shared count only when
    /// the charge changes.
    pub(crate) fn try_hold(&mut self, bytes: usize) -> bool {
        let charge = bytes.saturating_sub(ALLOWANCE);
        match charge.checked_sub(self.bytes) {
            Some(0) => true,
            Some(more) => self.try_grow(more),
            None => {
                self.shrink(self.bytes - charge);
                true
            }
        }
    }

    /// A session's queue would hold `bytes`: charged if it fits; when it does not and no more
    /// sessions may be dropped (`last`), a queue charged nothing yet holds it anyway (past the
    /// budget by one message) and any other is refused.
    pub(crate) fn room(&mut self, bytes: usize, last: bool) -> Room {
        if self.try_hold(bytes) {
            Room::Fits
        } else if !last {
            Room::Short(self.budget.clone())
        } else if self.bytes == 0 {
            self.hold(bytes);
            Room::Fits
        } else {
            Room::Refused
        }
    }

    /// Holds what a holder of `bytes` is charged for past its [`ALLOWANCE`], whether or not
    /// it fits (memory that exists already).
    pub(crate) fn hold(&mut self, bytes: usize) {
        self.set(bytes.saturating_sub(ALLOWANCE));
    }

    /// Grows by `n` if it fits in the budget; false (and nothing taken) if not.
    pub(crate) fn try_grow(&mut self, n: usize) -> bool {
        let fits = self.budget.take(n);
        if fits {
            self.bytes = self.bytes.saturating_add(n);
        }
        fits
    }

    /// Grows by `n` whether or not it fits (memory that exists already).
    pub(crate) fn grow(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.budget.force(n);
        self.bytes = self.bytes.saturating_add(n);
    }

    /// Gives back `n` bytes (at most what it holds).
    pub(crate) fn shrink(&mut self, n: usize) {
        let n = n.min(self.bytes);
        if n == 0 {
            return;
        }
        self.budget.give(n);
        self.bytes -= n;
    }

    /// Holds exactly `n` bytes, whether or not they fit.
    pub(crate) fn set(&mut self, n: usize) {
        match n.checked_sub(self.bytes) {
            Some(more) => self.grow(more),
            None => self.shrink(self.bytes - n),
        }
    }

    /// The budget this is charged to.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.give(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_memory_gives_way_before_the_budget_is_spent() {
        // 15/16 of 160 is 150: room for optional memory up to there, not to the limit.
        let b = Budget::new(160);
        let first = b.optional(100).expect("fits under 150");
        assert_eq!(b.held(), 100);
        assert!(b.optional(60).is_none(), "160 would pass 150");
        let second = b.optional(50).expect("150 is the mark");
        assert!(b.optional(1).is_none());
        assert_eq!(b.held(), 150);
        // What is needed goes on past it.
        let mut body = b.charge();
        assert!(body.try_grow(10));
        drop((first, second));
        assert_eq!(b.held(), 10);
        assert!(b.optional(usize::MAX).is_none(), "no overflow");
    }

    #[test]
    fn charges_add_up_and_go_back_when_dropped() {
        let b = Budget::new(100);
        let mut one = b.charge();
        assert!(one.try_grow(60));
        let mut two = b.charge();
        assert!(!two.try_grow(41), "over the limit: nothing taken");
        assert_eq!(b.held(), 60);
        assert!(two.try_grow(40));
        assert!(b.is_spent());
        two.grow(10);
        assert_eq!(
            b.held(),
            110,
            "memory that exists is counted past the limit"
        );
        one.set(20);
        assert_eq!(b.held(), 70);
        drop(two);
        assert_eq!(b.held(), 20);
        one.shrink(1000);
        assert_eq!((b.held(), one.bytes()), (0, 0));
    }

    #[test]
    fn a_holder_is_charged_past_its_allowance_only() {
        let b = Budget::new(ALLOWANCE * 2);
        let mut h = b.charge();
        assert!(h.try_hold(ALLOWANCE));
        assert_eq!(b.held(), 0, "a working size is free");
        assert!(h.try_hold(ALLOWANCE + 100));
        assert_eq!(b.held(), 100);
        assert!(
            !h.try_hold(ALLOWANCE * 4),
            "past the budget: nothing more taken"
        );
        assert_eq!(b.held(), 100);
        h.hold(ALLOWANCE * 4);
        assert_eq!(b.held(), ALLOWANCE * 3, "what exists is counted");
        assert!(h.try_hold(10));
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn no_limit_counts_without_refusing() {
        let b = Budget::default();
        let mut h = b.charge();
        assert!(h.try_grow(usize::MAX / 2));
        assert!(!b.is_spent());
    }
}
