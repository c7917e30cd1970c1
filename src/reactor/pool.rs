//! Pool dispatch: requests go to worker threads through a crossbeam channel; answers come back to
//! the owning loop through its completion queue, with one `Poller::notify` per batch.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::inbox::Inbox;
use crate::handler::answer;
use crate::http::answer::Answer;

use crate::Handler;
use crate::http::request_head::RequestHead;
use crate::http::session::Work;
use crate::http::spool::Received;
use crate::http::stream::{Produced, Streaming};
use crate::net::transport::Address;
use crate::stats::Counters;

/// Work for a pool worker. At most one job per connection is in flight, so the queue is
/// bounded by the open-connection limit.
pub(crate) enum Job {
    /// A request for the handler.
    Http {
        key: usize,
        id: u64,
        head: Box<RequestHead>,
        body: Received,
        peer: Option<Address>,
    },
    /// A session's callbacks due on a connection (a WebSocket's messages).
    Session {
        key: usize,
        id: u64,
        work: Box<dyn Work>,
    },
    /// The next piece of a streamed response body (handler code), produced into `out`.
    Produce {
        key: usize,
        id: u64,
        streaming: Streaming,
        out: Vec<u8>,
    },
    /// A closed session's last callbacks (a WebSocket's `on_close`): nothing comes back.
    Last(Box<dyn Work>),
    /// A streamed body whose connection went while its piece was made: dropped here, since
    /// its drop is handler code too. Nothing comes back.
    Discard(Streaming),
}

/// A worker's answer, on its way back to the loop.
pub(crate) enum Done {
    Http {
        key: usize,
        id: u64,
        head: Box<RequestHead>,
        answered: Answer,
    },
    Session {
        key: usize,
        id: u64,
        work: Box<dyn Work>,
    },
    Produced {
        key: usize,
        id: u64,
        out: Vec<u8>,
        produced: Produced,
    },
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

    /// Sends a job that answers nothing back (a body to drop, a session's last calls).
    pub(crate) fn send(&self, job: Job) {
        // Unbounded by type, bounded by max_connections (one job per connection).
        let _ = self.jobs.send((job, self.completions.clone()));
    }

    /// Sends a job whose outcome comes back to the loop, counted in `away` until it does. The
    /// queue is gone only when every worker is, which only a bug could cause: the job is then
    /// dropped (its handler code caught where it holds any) and the caller closes its
    /// connection, which nothing would drive again.
    pub(crate) fn send_back(&self, job: Job, away: &mut usize) -> Result<(), PoolGone> {
        match self.jobs.send((job, self.completions.clone())) {
            Ok(()) => {
                *away = away.saturating_add(1);
                Ok(())
            }
            Err(_) => {
                log::error!("the reactor's pool takes no more jobs; its connection is closed");
                Err(PoolGone)
            }
        }
    }
}

/// The pool took no job: every worker is gone.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PoolGone;

/// A pool worker: runs the handler code of each job (a request's handler, a session's
/// callbacks, a streamed body's next piece) and sends the outcome back.
pub(crate) fn run<H: Handler>(
    handler: &H,
    jobs: &Receiver<(Job, Arc<Inbox<Done>>)>,
    counters: &Counters,
) {
    while let Ok((job, reply)) = jobs.recv() {
        match job {
            Job::Http {
                key,
                id,
                head,
                mut body,
                peer,
            } => {
                let answered = answer(handler, &head, &mut body, peer.as_ref(), counters);
                body.release();
                reply.push(Done::Http {
                    key,
                    id,
                    head,
                    answered,
                });
            }
            Job::Session { key, id, mut work } => {
                work.run();
                reply.push(Done::Session { key, id, work });
            }
            Job::Produce {
                key,
                id,
                streaming,
                mut out,
            } => {
                let produced = streaming.produce_away(&mut out);
                reply.push(Done::Produced {
                    key,
                    id,
                    out,
                    produced,
                });
            }
            Job::Last(mut work) => work.run(),
            Job::Discard(streaming) => drop(streaming),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::session::Work;

    struct Calls;

    impl Work for Calls {
        fn run(&mut self) {}
        fn close_due(&mut self) -> bool {
            false
        }
    }

    fn session_job() -> Job {
        Job::Session {
            key: 0,
            id: 0,
            work: Box::new(Calls),
        }
    }

    #[test]
    fn a_job_sent_back_is_counted_away_until_it_returns() {
        let poller = Arc::new(polling::Poller::new().expect("poller"));
        let (jobs, queue) = crossbeam_channel::unbounded();
        let pool = PoolSender::new(jobs, Arc::new(Inbox::new(poller)));
        let mut away = 0;
        assert_eq!(pool.send_back(session_job(), &mut away), Ok(()));
        assert_eq!(away, 1);
        assert!(queue.try_recv().is_ok());
    }

    #[test]
    fn a_pool_with_no_worker_left_refuses_the_job_and_counts_nothing_away() {
        // The caller closes the connection on the refusal: nothing would bring the job back.
        let poller = Arc::new(polling::Poller::new().expect("poller"));
        let (jobs, queue) = crossbeam_channel::unbounded();
        drop(queue);
        let pool = PoolSender::new(jobs, Arc::new(Inbox::new(poller)));
        let mut away = 0;
        assert_eq!(pool.send_back(session_job(), &mut away), Err(PoolGone));
        assert_eq!(away, 0);
    }
}
