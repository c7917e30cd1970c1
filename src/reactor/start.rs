//! Starting a reactor: its event loops (each with its own listener, or fed by an acceptor
//! thread), the acceptor, and the pool of workers for pool dispatch.

use std::sync::Arc;

use polling::Poller;

use super::inbox::Inbox;
use super::{Builder, Dispatch, Reactor, event_loop, pool};
use crate::engine::{Control, Starting};
use crate::net::acceptor::Acceptor;
use crate::net::transport::Listener;
use crate::{Error, Handler};

impl Builder {
    /// Starts the loops: each with its own listener, or (`shared_listener`) fed by an acceptor
    /// thread.
    pub(super) fn start<H: Handler>(
        self,
        listeners: Vec<Option<Listener>>,
        shared_listener: Option<Listener>,
        handler: H,
    ) -> Result<Reactor, Error> {
        let first = listeners
            .iter()
            .flatten()
            .next()
            .or(shared_listener.as_ref());
        let address = first.map(Listener::address).transpose()?.ok_or_else(|| {
            Error::from(std::io::Error::from(std::io::ErrorKind::AddrNotAvailable))
        })?;
        let kept = crate::engine::keep(listeners.iter().flatten().chain(&shared_listener))?;
        let handler = Arc::new(handler);
        let cfg = Arc::new(self.cfg);
        let control = Arc::new(Control::new(listeners.len(), cfg.settings.memory_budget));
        control.publish_to(self.stats.handed_out());
        // The threads spawned through it run once every one is up; a failed start ends them unrun.
        let mut starting = Starting::new(control.clone());
        let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded();
        // Every loop is made (its poller, its listener registered) before any thread starts.
        let mut loops = Vec::new();
        let mut inboxes = Vec::new();
        for (i, listener) in listeners.into_iter().enumerate() {
            let poller = Arc::new(Poller::new()?);
            let completions = Arc::new(Inbox::new(poller.clone()));
            let accepted = Arc::new(Inbox::new(poller.clone()));
            let pool = match self.dispatch {
                Dispatch::Pool(_) => {
                    Some(pool::PoolSender::new(jobs_tx.clone(), completions.clone()))
                }
                Dispatch::Inline => None,
            };
            let ev = event_loop::EventLoop::new(event_loop::Parts {
                poller: poller.clone(),
                listener,
                handler: handler.clone(),
                cfg: cfg.clone(),
                control: control.clone(),
                pool,
                completions,
                accepted: accepted.clone(),
                index: i,
            })?;
            loops.push((poller, ev));
            inboxes.push(accepted);
        }
        drop(jobs_tx);
        let acceptor = shared_listener
            .map(|listener| {
                Acceptor::new(
                    listener,
                    control.clone(),
                    cfg.settings.max_connections,
                    cfg.settings.wrap.clone(),
                )
            })
            .transpose()?;
        if let Dispatch::Pool(n) = self.dispatch {
            for i in 0..n {
                let (handler, jobs) = (handler.clone(), jobs_rx.clone());
                let ctl = control.clone();
                starting.spawn(&format!("twinhttp-pool-{i}"), move || {
                    pool::run(&*handler, &jobs, &ctl.counters)
                })?;
            }
        }
        for (i, (poller, ev)) in loops.into_iter().enumerate() {
            starting.wakes(poller);
            starting.spawn(&format!("twinhttp-loop-{i}"), move || ev.run())?;
        }
        if let Some(acceptor) = acceptor {
            starting.wakes(acceptor.waker());
            starting.spawn("twinhttp-accept", move || {
                let mut next = 0usize;
                acceptor.run(|stream, peer, open| {
                    if let Some(inbox) = inboxes.get(next % inboxes.len().max(1)) {
                        inbox.push((stream, peer, open));
                    }
                    next = next.wrapping_add(1);
                })
            })?;
        }
        Ok(Reactor(starting.finish(address, kept)))
    }
}
