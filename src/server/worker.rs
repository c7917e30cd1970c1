//! Worker threads: take a connection with a whole request head buffered (or a session with work
//! to do), serve its requests as plain blocking code, then close it or hand it back to the
//! parker once nothing whole is buffered: idle, part of its next head, or lingering after an
//! error. A worker never waits for a request head (with parking on).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::Builder;
use super::connection::{Connection, Job, Wait};
use super::detached::{Waiter, detach_session};
use super::exchange::{SocketSource, pump, too_slow};
use super::head::{self, Outcome};
use super::park::{Parker, Parking, WakeParked};
use super::session::{self, Session};
use crate::Handler;
use crate::deadline;
use crate::engine::Control;
use crate::handler::answer;
use crate::http::body::Decoder;
use crate::http::buf::ReadBuf;
use crate::http::conn::{After, Answer, BodyVerdict, Close, Conn, Late, State};
use crate::http::due::HeadDue;
use crate::http::reader::BodyReader;
use crate::http::request::RequestHead;
use crate::http::session::Start;
use crate::net::io::{self, flush, linger_close};
use crate::net::transport::Stream;
use crate::net::upgrade::detach;
use crate::rate::Meter;
use crate::stats::{Activity, Counters};
use crate::ws::WS_READ_BUF;

/// What one server's workers share.
pub(crate) struct Shared<H> {
    pub(crate) handler: H,
    pub(crate) config: Builder,
    pub(crate) parker: Option<Arc<Parker>>,
    pub(crate) control: Arc<Control>,
}

impl<H> Shared<H> {
    /// WebSockets and event streams are parked (else each gets a thread).
    fn parks_sessions(&self) -> bool {
        self.parker.is_some() && self.config.parking == super::Parking::All
    }
}

/// A worker's own buffers, lent to each connection it serves.
struct Scratch {
    read: ReadBuf,
    write: Vec<u8>,
    /// The minimum rate of what `write` is flushing: the response under way.
    sent: Meter,
    head: RequestHead,
    /// WebSockets read into this (`WS_READ_BUF` bytes), made when the first one comes.
    ws: Option<ReadBuf>,
}

impl Scratch {
    /// Writes out what `write` holds, at the minimum response rate; a client that takes it
    /// slower is counted as refused for being too slow.
    fn write_out(&mut self, stream: &mut Stream, counters: &Counters) -> std::io::Result<()> {
        let written = flush(stream, &mut self.write, &mut self.sent);
        if let Err(e) = &written {
            too_slow(e, counters);
        }
        written
    }
}

/// Bytes of response buffered before it is written out while more pipelined requests wait.
const WRITE_BUF: usize = 16 * 1024;

pub(crate) fn run<H: Handler>(shared: &Shared<H>, queue: &Receiver<Job>) {
    let mut scratch = Scratch {
        read: ReadBuf::new(),
        write: Vec::with_capacity(WRITE_BUF),
        sent: Meter::new(shared.config.min_response_rate),
        head: RequestHead::default(),
        ws: None,
    };
    while let Ok(job) = queue.recv() {
        if let Some(parker) = &shared.parker {
            parker.job_taken();
        }
        let mut next = Some(job.into_connection());
        while let Some(conn) = next.take() {
            let idle = match (&conn.wait, &shared.parker) {
                (Wait::Session(_), _) => {
                    let buf = scratch
                        .ws
                        .get_or_insert_with(|| ReadBuf::with_len(WS_READ_BUF));
                    session::drive(shared, conn, buf)
                }
                // Back from a park that found an event for it: what came is dropped here.
                (Wait::Linger(_), Some(parker)) => {
                    match head::read(conn, parker.reads(), Instant::now()) {
                        Outcome::Park(conn) | Outcome::Ready(conn) => Some(conn),
                        Outcome::Close => None,
                    }
                }
                _ => serve(shared, conn, &mut scratch),
            };
            if let (Some(idle), Some(parker)) = (idle, &shared.parker) {
                if idle.session().is_some_and(|s| s.has_more()) {
                    // A busy WebSocket yields after its budget, as on the reactor.
                    if let Err(conn) = parker.requeue(idle) {
                        next = Some(conn);
                    }
                } else {
                    match parker.park(idle) {
                        Parking::Parked => {}
                        Parking::Ready(conn) => next = Some(conn),
                        // Parking has ended for shutdown: dropping closes the connection.
                        Parking::Refused(conn) => session::abandon(conn),
                    }
                }
            }
            scratch.read.reset();
            scratch.write.clear();
        }
    }
}

/// What asking for more of a request head came to.
enum More {
    /// Bytes arrived.
    Got,
    /// Nothing whole is buffered and the socket has nothing more now: hand the connection to
    /// the parker, waiting for this.
    Park(Wait),
    /// The head was not complete by its deadline (thread per connection: the worker waited).
    TimedOut,
    /// The client closed, the connection failed, or shutdown ended a wait for a new request.
    Closed,
}

/// Serves requests on `conn` until it closes (`None`) or, with parking on, has nothing whole
/// buffered (`Some(conn)`, to park: idle, part of a head, or lingering after an error). Each
/// request is three steps, each ending in a named outcome: its head, its handler (with the body
/// streamed from the socket), its response.
fn serve<H: Handler>(
    shared: &Shared<H>,
    mut conn: Connection,
    s: &mut Scratch,
) -> Option<Connection> {
    let mut http = Conn::new(shared.config.access_log, conn.peer.as_ref());
    let mut due = take_input(shared, &mut conn, &mut s.read);
    loop {
        let decoder = match head(shared, &mut conn, &mut http, s, &mut due) {
            Head::Parsed(decoder) => decoder,
            Head::Park(wait) => {
                conn.wait = wait;
                return Some(conn);
            }
            Head::Refused => return finish(shared, conn, &http, s),
            Head::Gone => return None,
        };
        let handled = match handle(shared, &mut conn, &mut http, s, decoder) {
            Handled::Response(handled) => handled,
            Handled::BodyRefused => return finish(shared, conn, &http, s),
            Handled::Gone => return None,
        };
        conn = match respond(shared, conn, &mut http, s, handled) {
            Responded::Next(conn) => conn,
            Responded::Finish(conn) => return finish(shared, conn, &http, s),
            Responded::Left(next) => return next,
            Responded::Gone => return None,
        };
        // The next request: already buffered (pipelined), or read for by the next head step.
        due = HeadDue::after_response(
            Instant::now(),
            !s.read.is_empty(),
            shared.config.header_read_timeout,
            shared.config.idle_timeout,
        );
    }
}

/// How a request head step ended.
enum Head {
    /// A head was parsed into `s.head`; its body follows through this decoder.
    Parsed(Decoder),
    /// Nothing whole is buffered and the socket has nothing more now: park, waiting for this.
    Park(Wait),
    /// The head was malformed, too large or too slow: the error is in `s.write`; finish.
    Refused,
    /// The client closed, the connection failed, or shutdown ended a wait for a new request.
    Gone,
}

/// The request head, from the buffer; what is missing is read without waiting (or, thread per
/// connection, waited for). Responses to earlier pipelined requests go out first.
fn head<H>(
    shared: &Shared<H>,
    conn: &mut Connection,
    http: &mut Conn,
    s: &mut Scratch,
    due: &mut HeadDue,
) -> Head {
    let counters = &shared.control.counters;
    loop {
        match http.recv_head(&mut s.read, &mut s.head, &shared.config.limits) {
            Ok(Some(decoder)) => {
                counters.request();
                conn.set_activity(Activity::Writing);
                return Head::Parsed(decoder);
            }
            Ok(None) => {}
            Err(e) => {
                counters.refused(http.write_error(e.status(), &mut s.write));
                return Head::Refused;
            }
        }
        if s.write_out(conn.stream(), counters).is_err() {
            return Head::Gone;
        }
        match more_head(shared, conn, &mut s.read, due) {
            More::Got => {}
            More::Park(wait) => return Head::Park(wait),
            More::TimedOut => {
                if let Some(why) = http.request_timed_out(Late::Head, &mut s.write) {
                    counters.refused(why);
                }
                return Head::Refused;
            }
            More::Closed => return Head::Gone,
        }
    }
}

/// A handler's answer, with what the exchange needs to know to write it.
struct Answered {
    answer: Answer,
    /// The request body was read to its end: the next request's bytes follow.
    in_sync: bool,
}

/// How a handler step ended.
enum Handled {
    Response(Answered),
    /// The body was malformed or too slow: the core's error is in `s.write`; finish.
    BodyRefused,
    /// The connection failed while the body was read.
    Gone,
}

/// Runs the handler with the body streamed from the socket; what the body's end means for the
/// exchange (in sync, unsynced, refused) is the core's (`BodyReader::settle`,
/// `Conn::body_ended`).
fn handle<H: Handler>(
    shared: &Shared<H>,
    conn: &mut Connection,
    http: &mut Conn,
    s: &mut Scratch,
    decoder: Decoder,
) -> Handled {
    let cfg = &shared.config;
    let counters = &shared.control.counters;
    let (stream, peer) = conn.stream_and_peer();
    let source = SocketSource {
        stream,
        out: &mut s.write,
        sent: &mut s.sent,
        body: Meter::new(cfg.min_request_body_rate),
        wait: true,
    };
    let mut reader = BodyReader::new(decoder, &mut s.read, source, s.head.expect_continue);
    let answer = answer(&shared.handler, &s.head, &mut reader, peer, counters);
    // What the handler left unread is dropped as far as it has come; with parking on the drain
    // never waits for the client (the rest is the lingering close's, which costs no worker).
    reader.source.wait = shared.parker.is_none();
    let end = reader.settle(&answer, cfg.limits.max_drain_bytes);
    let in_sync = match http.body_ended(end, &mut s.write) {
        BodyVerdict::InSync => true,
        BodyVerdict::Unsynced => false,
        BodyVerdict::Refused(why) => {
            counters.refused(why);
            return Handled::BodyRefused;
        }
        BodyVerdict::Gone => return Handled::Gone,
    };
    Handled::Response(Answered { answer, in_sync })
}

/// How a response step ended.
enum Responded {
    /// Keep-alive: serve the next request.
    Next(Connection),
    /// The response was the last (or a session could not start and 503 was written): finish.
    Finish(Connection),
    /// The connection left this worker's exchange: parked as a session (`Some`), detached to a
    /// thread of its own or closed (`None`).
    Left(Option<Connection>),
    /// Writing failed.
    Gone,
}

/// Writes the response, measured against the minimum rate from here: a body known in full is
/// buffered (pipelined responses go out together), a streamed one is pumped out, and a session
/// or an upgrade takes the connection over.
fn respond<H: Handler>(
    shared: &Shared<H>,
    mut conn: Connection,
    http: &mut Conn,
    s: &mut Scratch,
    handled: Answered,
) -> Responded {
    let cfg = &shared.config;
    let counters = &shared.control.counters;
    s.sent = Meter::new(cfg.min_response_rate);
    let closing = shared.control.is_shutting_down();
    let mark = s.write.len();
    let after = http.write_response(
        &s.head,
        handled.answer,
        handled.in_sync,
        closing,
        &mut s.write,
    );
    match after {
        After::Done => {}
        After::Refused(why) => counters.refused(why),
        After::Stream(encoder, kind) => {
            let mut bytes = 0;
            let pumped = catch_unwind(AssertUnwindSafe(|| {
                pump(
                    conn.stream(),
                    &mut s.write,
                    encoder,
                    kind,
                    &mut s.sent,
                    &mut bytes,
                )
            }));
            http.streamed(bytes);
            let complete = match pumped {
                Ok(Ok(complete)) => complete,
                Ok(Err(e)) => {
                    too_slow(&e, counters);
                    false
                }
                Err(_) => false,
            };
            if !complete {
                http.abort();
            }
        }
        After::Session(encoder, takeover) if shared.parks_sessions() => {
            return Responded::Left(into_session(shared, conn, http, s, mark, |wake, conn| {
                Session::start(takeover, encoder, wake, conn, cfg.min_response_rate)
            }));
        }
        After::Session(encoder, takeover) => {
            // A session lasts as long as its client: a thread of its own, whose waiter is made
            // before the head goes out (out of descriptors: 503 instead).
            let Ok(waiter) = Waiter::new().map(Arc::new) else {
                s.write.truncate(mark);
                counters.refused(http.write_error(503, &mut s.write));
                return Responded::Finish(conn);
            };
            let session = takeover.start(Start {
                waker: Box::new(waiter.clone()),
                peer: conn.peer.clone(),
                now: Instant::now(),
                rate: cfg.min_response_rate,
                encoder,
            });
            if s.write_out(conn.stream(), counters).is_err() {
                return Responded::Gone;
            }
            let leftover = s.read.filled().to_vec();
            let (stream, open) = conn.into_parts();
            detach_session(&shared.control, stream, leftover, session, open, waiter);
            return Responded::Left(None);
        }
        After::Detach(then) => {
            if s.write_out(conn.stream(), counters).is_err() {
                return Responded::Gone;
            }
            let leftover = s.read.filled().to_vec();
            let (stream, open) = conn.into_parts();
            detach(&shared.control, stream, leftover, then, open);
            return Responded::Left(None);
        }
    }
    if http.is_closing() {
        return Responded::Finish(conn);
    }
    if s.write.len() >= cfg.limits.max_pipeline_output
        && s.write_out(conn.stream(), &shared.control.counters)
            .is_err()
    {
        return Responded::Gone;
    }
    Responded::Next(conn)
}

/// Takes the bytes the parker read for `conn` into the worker's buffer (the worker's empty one
/// goes back to the pool), and says when the head is due.
fn take_input<H>(shared: &Shared<H>, conn: &mut Connection, read: &mut ReadBuf) -> HeadDue {
    let wait = std::mem::replace(&mut conn.wait, Wait::Idle { until: None });
    let (mut input, until) = match wait {
        Wait::Ready { input, until } | Wait::Head { input, until } => (input, until),
        Wait::New { until } => return HeadDue::First(until),
        Wait::Idle { until } => return HeadDue::Idle(until),
        // Neither reaches a worker's exchange (they are driven apart).
        Wait::Linger(_) | Wait::Session(_) => return HeadDue::Idle(None),
    };
    std::mem::swap(read, &mut input);
    if let Some(parker) = &shared.parker {
        parker.buffers().give(input);
    }
    HeadDue::Started(until)
}

/// More bytes of a request head. With parking on it reads what is there and never waits:
/// nothing whole buffered goes back to the parker. Thread per connection, it waits (for a new
/// request until the idle timeout, for the rest of a head until its deadline).
fn more_head<H>(
    shared: &Shared<H>,
    conn: &mut Connection,
    read: &mut ReadBuf,
    due: &mut HeadDue,
) -> More {
    let cfg = &shared.config;
    let shutting_down = &shared.control.shutting_down;
    // Shutdown interrupts a wait for a new request, never a request under way.
    let cancel = read.is_empty().then_some(shutting_down);
    if cancel.is_some_and(|c| c.load(Ordering::Acquire)) {
        return More::Closed;
    }
    let now = Instant::now();
    let Some(parker) = &shared.parker else {
        // Thread per connection: the worker waits on the socket, for a request or the rest.
        conn.set_activity(match read.is_empty() {
            true => Activity::Waiting,
            false => Activity::Reading,
        });
        return wait_for_head(shared, conn.stream(), read, due, cancel);
    };
    let stream = conn.stream();
    if cancel.is_some() && cfg.park_linger > Duration::ZERO && !stream.buffered_input() {
        // A short wait on the socket keeps a busy keep-alive connection on this worker.
        let _ = io::wait(
            &*stream,
            false,
            deadline::after(now, cfg.park_linger),
            cancel,
        );
    }
    match io::read_now(&mut *stream, read.spare(cfg.limits.max_head_bytes)) {
        Ok(Some(0)) | Err(_) => More::Closed,
        Ok(Some(n)) => {
            *due = due.bytes_came(now, cfg.header_read_timeout);
            read.filled_by(n);
            More::Got
        }
        Ok(None) => More::Park(match *due {
            HeadDue::First(until) if read.is_empty() => Wait::New { until },
            HeadDue::Idle(until) => Wait::Idle { until },
            HeadDue::First(until) | HeadDue::Started(until) => {
                let mut input = parker.buffers().take();
                std::mem::swap(read, &mut input);
                Wait::Head {
                    input: head::fitted(input, parker.buffers()),
                    until,
                }
            }
        }),
    }
}

/// Thread per connection: waits on the socket for the next request or the rest of a head.
fn wait_for_head<H>(
    shared: &Shared<H>,
    stream: &mut Stream,
    read: &mut ReadBuf,
    due: &mut HeadDue,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> More {
    let cfg = &shared.config;
    let until = match *due {
        HeadDue::First(until) | HeadDue::Started(until) => until,
        HeadDue::Idle(idle) => {
            if !stream.buffered_input() && io::wait(&*stream, false, idle, cancel).is_err() {
                return More::Closed;
            }
            *due = due.bytes_came(Instant::now(), cfg.header_read_timeout);
            due.until()
        }
    };
    match io::read(
        &mut *stream,
        read.spare(cfg.limits.max_head_bytes),
        until,
        cancel,
    ) {
        Ok(0) => More::Closed,
        Ok(n) => {
            read.filled_by(n);
            More::Got
        }
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut && !read.is_empty() => More::TimedOut,
        Err(_) => More::Closed,
    }
}

/// The last response is written (or about to be, in `s.write`): writes it and closes as the
/// core decided, lingering where framing is lost. A lingering close with parking on costs no
/// worker: the connection is handed to the parker to drop what its client still sends.
fn finish<H>(
    shared: &Shared<H>,
    mut conn: Connection,
    http: &Conn,
    s: &mut Scratch,
) -> Option<Connection> {
    s.write_out(conn.stream(), &shared.control.counters).ok()?;
    match (http.state(), &shared.parker) {
        (State::Closing(Close::Linger), Some(_)) => match head::linger(conn, Instant::now()) {
            Outcome::Park(conn) | Outcome::Ready(conn) => Some(conn),
            Outcome::Close => None,
        },
        (State::Closing(Close::Linger), None) => {
            conn.set_activity(Activity::Closing);
            linger_close(&mut *conn.stream());
            None
        }
        (State::Closing(Close::Abort), _) => {
            conn.stream().abort();
            None
        }
        _ => None,
    }
}

/// Makes `conn` a parked session: a WebSocket after its 101, an event stream after its head.
/// It is enrolled with the parker before the head (in `s.write` from `mark`) goes out, so a
/// refusal is still a 503; then its first turn runs at once (`on_open`, frames sent with the
/// upgrade, reading on after what the request left in the buffer).
fn into_session<H: Handler>(
    shared: &Shared<H>,
    conn: Connection,
    http: &mut Conn,
    s: &mut Scratch,
    mark: usize,
    make: impl FnOnce(WakeParked, &Connection) -> Session,
) -> Option<Connection> {
    let (mut conn, wake) = match shared.parker.as_ref()?.enroll(conn) {
        Ok(enrolled) => enrolled,
        Err(Some(conn)) => {
            s.write.truncate(mark);
            let why = http.write_error(503, &mut s.write);
            shared.control.counters.refused(why);
            return finish(shared, conn, http, s);
        }
        Err(None) => return None,
    };
    s.write_out(conn.stream(), &shared.control.counters).ok()?;
    conn.wait = Wait::Session(Box::new(make(wake, &conn)));
    conn.settle();
    session::drive(shared, conn, &mut s.read)
}
