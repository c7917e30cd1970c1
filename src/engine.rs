//! Plumbing both engines share: the shutdown flag, the open-connection count and the counters,
//! and joining threads against a deadline.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use polling::{Events, Poller};
use slab::Slab;

use crate::http::budget::Budget;
use crate::http::session::Wake;
use crate::net::transport::Address;
use crate::stats::{Activity, Counters, Refusal, Stats, StatsHandle};
use crate::upgraded::ShutdownSignal;
use crate::{Error, ErrorKind};

impl Wake for Poller {
    fn wake(&self) {
        let _ = self.notify();
    }
}

/// State shared by every thread of one running engine.
pub(crate) struct Control {
    /// Set once when shutdown begins.
    pub(crate) shutting_down: AtomicBool,
    /// The same, for upgraded connections' callbacks to learn of it.
    pub(crate) shutdown_signal: ShutdownSignal,
    /// Open connections (accepted and not yet closed).
    pub(crate) open: AtomicUsize,
    /// Threads started for sessions (WebSockets and event streams on the server engine),
    /// which end at shutdown: `wait` and `shutdown` wait for them.
    sessions: Detached,
    /// Threads running upgraded connections' callbacks, which the shutdown does not interrupt:
    /// `shutdown` waits for them up to its grace, `wait` does not.
    upgrades: Detached,
    /// Pollers of those threads, notified when shutdown begins.
    watchers: Mutex<Slab<Arc<dyn Wake>>>,
    /// The engine's own threads alive (workers, loops, pool, parker, acceptor).
    threads: AtomicUsize,
    /// The live counters ([`crate::stats`]).
    pub(crate) counters: Counters,
    /// Duplicates of the listening sockets, for a successor process
    /// ([`Running::listener_fds`]); closed as the shutdown begins.
    listeners: Mutex<Vec<OwnedFd>>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("shutting_down", &self.shutting_down)
            .field("open", &self.open)
            .field("sessions", &self.sessions)
            .field("upgrades", &self.upgrades)
            .finish_non_exhaustive()
    }
}

impl Control {
    /// The state of an engine with `loops` event loops (0: the server engine) and a memory
    /// budget of `budget` bytes.
    pub(crate) fn new(loops: usize, budget: usize) -> Self {
        Control {
            shutting_down: AtomicBool::new(false),
            shutdown_signal: ShutdownSignal::new(),
            open: AtomicUsize::new(0),
            sessions: Detached::default(),
            upgrades: Detached::default(),
            watchers: Mutex::new(Slab::new()),
            threads: AtomicUsize::new(0),
            counters: Counters::new(loops, Budget::new(budget)),
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// Duplicates of the listening sockets, while they are open.
    fn listener_fds(&self) -> Result<Vec<OwnedFd>, Error> {
        let kept = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .map(|fd| fd.try_clone().map_err(Error::from))
            .collect()
    }

    /// Closes the duplicates: the shutdown began.
    fn close_listeners(&self) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Publishes this engine's counters through `handle` (made by a builder before serving).
    pub(crate) fn publish_to(self: &Arc<Self>, handle: Option<&StatsHandle>) {
        if let Some(h) = handle {
            let _ = h.0.set(self.clone());
        }
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> Stats {
        let threads = self.threads.load(Ordering::Relaxed) + self.detached_threads();
        self.counters.snapshot(self.open_connections(), threads)
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Counts a new connection; `None` (and nothing counted) when `max` are already open.
    pub(crate) fn admit(self: &Arc<Self>, max: usize) -> Option<OpenGuard> {
        let open = self.open.fetch_add(1, Ordering::AcqRel);
        self.counters.accepted();
        if open >= max {
            self.open.fetch_sub(1, Ordering::AcqRel);
            self.counters.refused(Refusal::OverCapacity);
            return None;
        }
        self.counters.enter(Activity::Waiting);
        Some(OpenGuard {
            control: self.clone(),
            now: Activity::Waiting,
        })
    }

    /// Spawns one of the engine's own threads, counted while it runs.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<JoinHandle<()>, Error> {
        self.threads.fetch_add(1, Ordering::Relaxed);
        let guard = ThreadGuard(self.clone());
        spawn(name, move || {
            let _guard = guard;
            f()
        })
    }

    pub(crate) fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    fn watchers(&self) -> std::sync::MutexGuard<'_, Slab<Arc<dyn Wake>>> {
        // Nothing under this lock panics; a poisoned slab is still consistent.
        self.watchers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Has `poller` notified when shutdown begins, for as long as the guard lives. Check
    /// [`Control::is_shutting_down`] after this, so a shutdown that began just before is seen.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn watch(self: &Arc<Self>, waker: Arc<dyn Wake>) -> WatchGuard {
        let key = self.watchers().insert(waker);
        WatchGuard(self.clone(), key)
    }

    fn notify_watchers(&self) {
        for (_, w) in self.watchers().iter() {
            w.wake();
        }
    }

    /// Starts a thread for one connection, counted by what it runs until it ends, so shutdown
    /// can wait for it.
    pub(crate) fn spawn_detached(
        self: &Arc<Self>,
        name: &str,
        runs: Runs,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<(), Error> {
        self.detached(runs).enter();
        let guard = DetachedGuard(self.clone(), runs);
        spawn(name, move || {
            let _guard = guard;
            f()
        })
        .map(drop)
    }

    fn detached(&self, runs: Runs) -> &Detached {
        match runs {
            Runs::Session => &self.sessions,
            Runs::Upgraded => &self.upgrades,
        }
    }

    fn detached_threads(&self) -> usize {
        self.sessions
            .running()
            .saturating_add(self.upgrades.running())
    }
}

/// What a thread started for one connection runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Runs {
    /// A session (a WebSocket, an event stream), which the shutdown ends.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    Session,
    /// An upgraded connection's callback: the handler's code, which the shutdown does not
    /// interrupt.
    Upgraded,
}

/// The threads started for single connections that are still running, and the signal that the
/// last one ended: shutdown and [`Running::wait`] wait on it.
#[derive(Debug, Default)]
struct Detached {
    running: Mutex<usize>,
    none_left: Condvar,
}

impl Detached {
    fn count(&self) -> std::sync::MutexGuard<'_, usize> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn enter(&self) {
        *self.count() += 1;
    }

    fn leave(&self) {
        let mut running = self.count();
        *running = running.saturating_sub(1);
        if *running == 0 {
            self.none_left.notify_all();
        }
    }

    fn running(&self) -> usize {
        *self.count()
    }

    /// Waits until none is running or `deadline` passes (never, with `None`): whether none is.
    fn wait_for_none(&self, deadline: Option<Instant>) -> bool {
        let mut running = self.count();
        while *running > 0 {
            running = match deadline {
                None => self
                    .none_left
                    .wait(running)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let Some(left) = d.checked_duration_since(Instant::now()) else {
                        return false;
                    };
                    self.none_left
                        .wait_timeout(running, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        true
    }
}

/// Keeps a poller on the shutdown notification list.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) struct WatchGuard(Arc<Control>, usize);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.watchers().try_remove(self.1);
    }
}

struct DetachedGuard(Arc<Control>, Runs);

impl Drop for DetachedGuard {
    fn drop(&mut self) {
        self.0.detached(self.1).leave();
    }
}

struct ThreadGuard(Arc<Control>);

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        self.0.threads.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a connection as open for as long as it lives, and what it is doing
/// ([`Activity`]): every open connection is in exactly one activity.
#[derive(Debug)]
pub(crate) struct OpenGuard {
    control: Arc<Control>,
    /// What it is counted as now: moved only here, taken off the count at drop.
    now: Activity,
}

impl OpenGuard {
    /// The connection now does `what` (nothing to count when it did already).
    #[inline]
    pub(crate) fn set(&mut self, what: Activity) {
        if self.now != what {
            self.control.counters.moved(self.now, what);
            self.now = what;
        }
    }

    /// The engine's counters.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn counters(&self) -> &Counters {
        &self.control.counters
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.control.counters.leave(self.now);
        self.control.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Spawns a named thread.
pub(crate) fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, Error> {
    Ok(thread::Builder::new().name(name.to_owned()).spawn(f)?)
}

/// Joins one of the engine's threads. One that ended in a panic (a bug: handler code is caught
/// where it runs) leaves its payload here, which may be handler code (a value
/// `std::panic::panic_any` carried): dropped caught, so that the thread that joins goes on.
fn join(t: JoinHandle<()>) {
    if let Err(payload) = t.join() {
        log::error!("an engine thread ended in a panic");
        let _ = crate::http::panics::catch(|| drop(payload));
    }
}

/// Joins `threads`, giving up after `grace` ([`ErrorKind::ShutdownTimedOut`]; the rest are left
/// to finish on their own).
pub(crate) fn join_within(threads: Vec<JoinHandle<()>>, grace: Duration) -> Result<(), Error> {
    let deadline = crate::deadline::after(Instant::now(), grace);
    while threads.iter().any(|t| !t.is_finished()) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::new(ErrorKind::ShutdownTimedOut));
        }
        thread::sleep(Duration::from_millis(5));
    }
    for t in threads {
        join(t);
    }
    Ok(())
}

/// What a started engine is, whichever it is: its address, its threads, how to stop it.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) address: Address,
    pub(crate) handle: ShutdownHandle,
    pub(crate) threads: Vec<JoinHandle<()>>,
}

/// Duplicates of `listeners`, for [`Running`].
pub(crate) fn keep<'a>(
    listeners: impl IntoIterator<Item = &'a crate::net::transport::Listener>,
) -> Result<Vec<OwnedFd>, Error> {
    listeners
        .into_iter()
        .map(|l| l.as_fd().try_clone_to_owned().map_err(Error::from))
        .collect()
}

/// An engine being started: the threads spawned so far, and the pollers that wake them. The
/// threads wait at its gate before they run anything: [`Starting::finish`] opens it and makes
/// it the running engine; dropped before that (a later thread, poller or loop could not be
/// made), it sends them home, so they end without having served, and joins them. A start that
/// fails leaves nothing serving, and never served.
pub(crate) struct Starting {
    handle: ShutdownHandle,
    threads: Vec<JoinHandle<()>>,
    gate: Arc<Gate>,
}

/// What the threads of a start wait for.
#[derive(Default)]
struct Gate {
    decided: Mutex<Option<Go>>,
    changed: Condvar,
}

/// Whether the threads of a start run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Go {
    /// Every thread started: run.
    Run,
    /// The start failed: end without running.
    Home,
}

impl Gate {
    fn open(&self, go: Go) {
        *self.decided.lock().unwrap_or_else(|e| e.into_inner()) = Some(go);
        self.changed.notify_all();
    }

    fn wait(&self) -> Go {
        let mut decided = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(go) = *decided {
                return go;
            }
            decided = self
                .changed
                .wait(decided)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Starting {
    pub(crate) fn new(control: Arc<Control>) -> Self {
        Starting {
            handle: ShutdownHandle {
                control,
                wakers: Vec::new(),
            },
            threads: Vec::new(),
            gate: Arc::default(),
        }
    }

    /// `poller` is notified when shutdown begins (a thread of the engine sleeps in it).
    pub(crate) fn wakes(&mut self, poller: Arc<Poller>) {
        self.handle.wakers.push(poller);
    }

    /// Spawns one of the engine's own threads ([`Control::spawn`]); it runs `f` once the start
    /// is finished.
    pub(crate) fn spawn(
        &mut self,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<(), Error> {
        let gate = self.gate.clone();
        let thread = self.handle.control.spawn(name, move || {
            if gate.wait() == Go::Run {
                f()
            }
        })?;
        self.threads.push(thread);
        Ok(())
    }

    /// Every thread started: the engine runs, serving on `listeners`' duplicates kept for a
    /// successor.
    pub(crate) fn finish(mut self, address: Address, listeners: Vec<OwnedFd>) -> Running {
        let control = &self.handle.control;
        *control.listeners.lock().unwrap_or_else(|e| e.into_inner()) = listeners;
        self.gate.open(Go::Run);
        crate::systemd::ready();
        Running {
            address,
            handle: self.handle.clone(),
            threads: std::mem::take(&mut self.threads),
        }
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        log::error!("the engine could not start: ending the threads it had started");
        self.gate.open(Go::Home);
        for t in self.threads.drain(..) {
            join(t);
        }
    }
}

impl Running {
    /// Duplicates of the listening sockets, to hand to a successor process.
    pub(crate) fn listener_fds(&self) -> Result<Vec<OwnedFd>, Error> {
        self.handle.control.listener_fds()
    }

    /// Joins the engine's threads and waits for those of sessions (which end at shutdown), not
    /// for upgraded connections' callbacks (which it does not interrupt).
    pub(crate) fn wait(self) {
        for t in self.threads {
            join(t);
        }
        self.handle.control.sessions.wait_for_none(None);
    }

    pub(crate) fn shutdown(self, grace: Duration) -> Result<(), Error> {
        let deadline = crate::deadline::after(Instant::now(), grace);
        self.handle.shutdown();
        join_within(self.threads, grace)?;
        // Connection threads (WebSockets closing with 1001, upgraded connections' callbacks)
        // finish on their own.
        let control = &self.handle.control;
        if control.sessions.wait_for_none(deadline) && control.upgrades.wait_for_none(deadline) {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::ShutdownTimedOut))
        }
    }

    pub(crate) fn open_connections(&self) -> usize {
        self.handle.control.open_connections()
    }

    pub(crate) fn stats(&self) -> Stats {
        self.handle.control.stats()
    }
}

/// Starts an engine's graceful shutdown from any thread; `wait` or `shutdown` on the engine then
/// returns once its threads are done. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    control: Arc<Control>,
    /// Pollers of the engine's threads that sleep in `wait`: notified so they see the flag.
    wakers: Vec<Arc<Poller>>,
}

impl ShutdownHandle {
    /// Begins the shutdown; returns at once.
    pub fn shutdown(&self) {
        crate::systemd::stopping();
        // A successor has its own copies; without one, new connects are refused at once.
        self.control.close_listeners();
        self.control.shutting_down.store(true, Ordering::Release);
        self.control.shutdown_signal.begin();
        for w in &self.wakers {
            let _ = w.notify();
        }
        self.control.notify_watchers();
    }
}

/// One wait on a poller: interruptions are not errors; a real failure is logged and backed off
/// so a broken poller cannot spin a core.
pub(crate) fn wait_events(
    poller: &Poller,
    events: &mut Events,
    timeout: Option<Duration>,
    who: &str,
) {
    events.clear();
    if let Err(e) = poller.wait(events, timeout) {
        if e.kind() != std::io::ErrorKind::Interrupted {
            log::error!("{who}: poll failed: {e}");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A start dropped part-way ends the threads it started without running their work, and
    /// joins them: when the drop returns, the work's closure has been dropped unrun.
    #[test]
    fn a_start_dropped_part_way_ends_its_threads_unrun() {
        let control = Arc::new(Control::new(0, 1 << 20));
        let (ran_tx, ran_rx) = crossbeam_channel::bounded(1);
        let mut starting = Starting::new(control.clone());
        starting
            .spawn("test-thread", move || {
                let _ = ran_tx.send(());
            })
            .expect("spawn");
        assert_eq!(control.stats().threads, 1);
        drop(starting);
        assert_eq!(
            ran_rx.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected),
            "ended without running, before the drop returned"
        );
        assert_eq!(control.stats().threads, 0);
        assert!(!control.is_shutting_down(), "nothing ran to stop");
    }

    /// A finished start hands its threads to the running engine, which its shutdown stops.
    #[test]
    fn a_finished_start_runs_until_shut_down() {
        let control = Arc::new(Control::new(0, 1 << 20));
        let poller = Arc::new(Poller::new().expect("poller"));
        let mut starting = Starting::new(control.clone());
        starting.wakes(poller.clone());
        let ctl = control.clone();
        let (ran_tx, ran_rx) = crossbeam_channel::bounded(1);
        starting
            .spawn("test-thread", move || {
                let _ = ran_tx.send(());
                let mut events = Events::new();
                while !ctl.is_shutting_down() {
                    wait_events(&poller, &mut events, None, "test");
                }
            })
            .expect("spawn");
        assert_eq!(
            ran_rx.try_recv(),
            Err(crossbeam_channel::TryRecvError::Empty),
            "nothing runs before the start is finished"
        );
        let address = Address::Unix(None);
        let running = starting.finish(address, Vec::new());
        assert_eq!(ran_rx.recv_timeout(Duration::from_secs(5)), Ok(()));
        assert!(!control.is_shutting_down(), "finishing stops nothing");
        running.shutdown(Duration::from_secs(5)).expect("shutdown");
        assert_eq!(control.stats().threads, 0);
    }
}
