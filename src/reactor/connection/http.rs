//! A connection's HTTP exchanges on the loop: the core's driver decides, the loop carries it
//! out (handlers run inline or go to the pool; a hand-over starts a session or detaches).

use super::session::loop_waker;
use super::{Connection, Cx, Next, Phase};
use crate::Handler;
use crate::handler::answer;
use crate::http::answer::Answer;
use crate::http::driver::{self, Action, Handover, Request};
use crate::http::request_head::RequestHead;
use crate::http::session::Start;
use crate::http::session_driver::SessionDriver;
use crate::http::stream::{Produced, Streaming};
use crate::reactor::blocking::later;
use crate::reactor::pool::Job;
use crate::stats::Activity;

impl Connection {
    /// Drives the connection's exchanges until the driver waits, yields, closes or hands the
    /// connection over.
    pub(super) fn drive_http<H: Handler>(&mut self, cx: &mut Cx<'_, H>) -> Next {
        let Phase::Http(driver) = &mut self.phase else {
            return Next::Close;
        };
        // A streamed body's next piece (handler code) is the loop's to place: on a worker with
        // pool dispatch, here and timed as a handler call with inline dispatch. A file's pieces
        // (over TLS) are the core's: the driver reads them here, as it sends them by `sendfile`.
        let mut turn =
            driver::Cx::new(cx.rules, cx.pools, cx.counters, cx.now, cx.date, cx.closing)
                .files_only();
        if !cx.readable {
            turn.not_readable();
        }
        let handover = loop {
            match driver.drive(self.socket.get_mut(), &mut turn) {
                Action::Run(Request { head, mut body }) => match cx.pool {
                    // Earlier responses go out while the pool runs it: drive on. Counted as
                    // served before it goes (a `/stats` handler on a worker sees itself, not
                    // the gauge of before, which the loop settles only after this step).
                    Some(pool) => {
                        self._open.set(Activity::Writing);
                        let job = Job::Http {
                            key: cx.key,
                            id: self.id,
                            head,
                            body,
                            peer: Some(self.peer.clone()),
                        };
                        if pool.send_back(job, cx.away).is_err() {
                            return Next::Close;
                        }
                    }
                    None => {
                        // Counted as served while its handler runs (a `/stats` handler sees
                        // itself); the step's end settles the gauge.
                        self._open.set(Activity::Writing);
                        let started = cx.blocking.start();
                        let answered =
                            answer(cx.handler, &head, &mut body, Some(&self.peer), cx.counters);
                        let held = cx.blocking.returned(started, &head, cx.counters);
                        body.release();
                        // Shutdown may have begun while the handler held the loop (for a tick
                        // of the coarse clock or more), which has not seen it yet: its response
                        // is then the last.
                        if cx.blocking.shutdown_began_while(held) {
                            turn.closing = true;
                        }
                        let at = later(turn.now, held);
                        driver.answer(head, answered, at, &mut turn);
                        // The loop's clock moves on with it (the next connections' deadlines,
                        // a session started here).
                        cx.now = at;
                    }
                },
                Action::Wait { on, until } => {
                    return Next::Wait {
                        on,
                        deadline: until,
                    };
                }
                Action::Produce => match cx.pool {
                    Some(pool) => match driver.lend_producer() {
                        Some((streaming, out)) => {
                            let job = Job::Produce {
                                key: cx.key,
                                id: self.id,
                                streaming,
                                out,
                            };
                            if pool.send_back(job, cx.away).is_err() {
                                return Next::Close;
                            }
                        }
                        None => return Next::Again,
                    },
                    None => {
                        let started = cx.blocking.start();
                        let (began, blocking, counters) =
                            (turn.now, &mut *cx.blocking, cx.counters);
                        driver.produce(&mut turn, || {
                            later(began, blocking.produced(started, counters))
                        });
                        cx.now = turn.now;
                    }
                },
                Action::Yield => return Next::Again,
                Action::Close => return Next::Close,
                Action::Switch(handover) => break handover,
            }
        };
        self.switch(handover, cx)
    }

    /// A pool worker's answer arrived.
    pub(crate) fn complete<H: Handler>(
        &mut self,
        head: Box<RequestHead>,
        answered: Answer,
        cx: &mut Cx<'_, H>,
    ) {
        match &mut self.phase {
            Phase::Http(driver) => driver.answer(
                head,
                answered,
                cx.now,
                &mut driver::Cx::new(cx.rules, cx.pools, cx.counters, cx.now, cx.date, cx.closing),
            ),
            Phase::Session(_) | Phase::Detaching { .. } => {
                cx.pools.give_head(head);
                answered.drop_caught(cx.counters.panics());
            }
        }
    }

    /// A pool worker produced the next piece of a streamed body. The body comes back when the
    /// connection no longer waits for it, to be dropped on a worker.
    pub(crate) fn produced(&mut self, out: Vec<u8>, produced: Produced) -> Option<Streaming> {
        match &mut self.phase {
            Phase::Http(driver) => driver.produced(out, produced),
            _ => produced.into_body(),
        }
    }

    /// The response that hands the connection over is out: a session starts on the loop (with
    /// the bytes read past its request, if it reads them), or a generic upgrade leaves it.
    fn switch<H>(&mut self, handover: Handover, cx: &mut Cx<'_, H>) -> Next {
        match handover {
            Handover::Session {
                takeover,
                encoder,
                input,
            } => {
                let session = takeover.start(Start {
                    waker: loop_waker(cx, self.id),
                    peer: Some(self.peer.clone()),
                    now: cx.now,
                    rate: cx.cfg.settings.min_response_rate,
                    encoder,
                    budget: cx.counters.budget().clone(),
                    panics: cx.counters.panics().clone(),
                });
                self.phase = Phase::Session(SessionDriver::new(session, input, cx.pools));
                self.drive_session(cx)
            }
            Handover::Detach { then, leftover } => {
                self.phase = Phase::Detaching { then, leftover };
                Next::Detach
            }
        }
    }
}
