//! The parker's backlog: connections ready for a worker that the full worker queue did not take
//! yet. The parker thread never blocks on the queue (it would stop serving deadlines, idle
//! closes and lingering closes while every worker is busy); what the queue refuses waits here,
//! in order, and a worker that takes a job wakes the parker to hand it on.

use std::collections::VecDeque;

use crossbeam_channel::{Sender, TrySendError};

use super::connection::Job;
use super::park::Parker;

/// Connections ready for a worker that the full queue did not take yet, in order: the parker
/// thread never blocks on the queue, so it keeps serving deadlines, idle closes and lingering
/// closes while every worker is busy.
#[derive(Default)]
pub(super) struct Backlog(VecDeque<Job>);

/// The workers' queue has gone: the server is stopping and the parker thread ends.
pub(super) struct QueueGone;

impl Backlog {
    /// Hands `job` to the workers, behind any held back; held back when the queue is full.
    pub(super) fn hand(
        &mut self,
        queue: &Sender<Job>,
        job: Job,
        parker: &Parker,
    ) -> Result<(), QueueGone> {
        self.0.push_back(job);
        self.flush(queue, parker)
    }

    /// Hands what is held back to the workers, in order, as far as the queue takes it.
    pub(super) fn flush(&mut self, queue: &Sender<Job>, parker: &Parker) -> Result<(), QueueGone> {
        while let Some(job) = self.0.pop_front() {
            let job = match queue.try_send(job) {
                Ok(()) => continue,
                Err(TrySendError::Disconnected(_)) => return Err(QueueGone),
                Err(TrySendError::Full(job)) => job,
            };
            // Asked to be woken before the last try, so a worker that takes a job between the
            // two cannot leave it waiting.
            parker.ask_to_be_woken();
            match queue.try_send(job) {
                Ok(()) => continue,
                Err(TrySendError::Disconnected(_)) => return Err(QueueGone),
                Err(TrySendError::Full(job)) => {
                    self.0.push_front(job);
                    break;
                }
            }
        }
        Ok(())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
