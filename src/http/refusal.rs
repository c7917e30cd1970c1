//! Why the core (or an engine) answered or closed a connection itself: a value the core returns
//! and the engine counts, so the core keeps no counters of its own.

/// Why the engine answered or closed a connection itself, without its handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// A connection over `max_connections`: answered `503` (closed, over TLS) at accept.
    OverCapacity,
    /// A request head that did not arrive in full within the header-read timeout: `408`.
    HeaderTimeout,
    /// A request body that arrived slower than its minimum rate (`408`), or a client that took
    /// a response slower than its minimum rate (closed).
    TooSlow,
    /// A request with a body answered `503` (with `Retry-After`) because the server's memory
    /// budget was spent when its head came.
    BodyOverBudget,
    /// A request head longer than a working buffer (16 KiB), not all come, answered `503`
    /// (with `Retry-After`) because the server's memory budget had no room for it to wait.
    HeadOverBudget,
    /// A WebSocket or event stream dropped because its send queue would have grown past the
    /// server's memory budget while it still held unsent data (a peer reading slower than it
    /// is sent to).
    SessionOverBudget,
    /// Any other status the engine answered itself: `400` (malformed), `413`, `414`, `417`,
    /// `426`, `431`, `501`, `505`, and `503` for a WebSocket or event stream refused at shutdown.
    Status(u16),
}
