//! A loop's inbox: items pushed from other threads (pool answers, accepted sockets), with one
//! `Poller::notify` per burst rather than per item.

use std::sync::{Arc, Mutex};

use polling::Poller;

use crate::http::session::WakeFlag;

pub(crate) struct Inbox<T> {
    items: Mutex<Vec<T>>,
    /// Set while a wake-up is pending, so a burst of pushes costs one `notify`.
    notified: WakeFlag,
    poller: Arc<Poller>,
}

impl<T> Inbox<T> {
    pub(crate) fn new(poller: Arc<Poller>) -> Self {
        Inbox {
            items: Mutex::new(Vec::new()),
            notified: WakeFlag::new(false),
            poller,
        }
    }

    pub(crate) fn push(&self, item: T) {
        // Nothing under this lock can panic; a poisoned lock still holds consistent data.
        self.items
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(item);
        if self.notified.should_wake() {
            let _ = self.poller.notify();
        }
    }

    /// Moves everything pushed so far into `into` (the loop calls this after each wake-up).
    pub(crate) fn take(&self, into: &mut Vec<T>) {
        self.notified.settle(|| false);
        into.append(&mut self.items.lock().unwrap_or_else(|e| e.into_inner()));
    }
}
