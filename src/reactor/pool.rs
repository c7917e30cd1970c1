//! Pool dispatch: requests go to worker threads through a crossbeam channel; answers come back to
//! the owning loop through its completion queue, with one `Poller::notify` per batch.

use std::net::SocketAddr;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::inbox::Inbox;
use crate::handler::{Answer, answer};

use crate::Handler;
use crate::http::request::RequestHead;

/// A request for a pool worker. At most one per connection is in flight, so the queue is
/// bounded by the open-connection limit.
pub(crate) struct Job {
    pub(crate) key: usize,
    pub(crate) id: u64,
    pub(crate) head: Box<RequestHead>,
    pub(crate) body: Vec<u8>,
    pub(crate) peer: Option<SocketAddr>,
}

/// A worker's answer, on its way back to the loop.
pub(crate) struct Done {
    pub(crate) key: usize,
    pub(crate) id: u64,
    pub(crate) head: Box<RequestHead>,
    pub(crate) answered: Answer,
}

/// A loop's handle on the pool: the job queue and where its answers go.
pub(crate) struct PoolSender {
    jobs: Sender<(Job, Arc<Inbox<Done>>)>,
    completions: Arc<Inbox<Done>>,
}

impl PoolSender {
    pub(crate) fn new(
        jobs: Sender<(Job, Arc<Inbox<Done>>)>,
        completions: Arc<Inbox<Done>>,
    ) -> Self {
        PoolSender { jobs, completions }
    }

    pub(crate) fn send(&self, job: Job) {
        // Unbounded by type, bounded by max_connections (one job per connection).
        let _ = self.jobs.send((job, self.completions.clone()));
    }
}

/// A pool worker: runs the handler for each job and sends the answer back.
pub(crate) fn run<H: Handler>(handler: &H, jobs: &Receiver<(Job, Arc<Inbox<Done>>)>) {
    while let Ok((job, reply)) = jobs.recv() {
        let answered = answer(handler, &job.head, &mut &job.body[..], job.peer);
        reply.push(Done {
            key: job.key,
            id: job.id,
            head: job.head,
            answered,
        });
    }
}
