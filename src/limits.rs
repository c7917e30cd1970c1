//! Size limits shared by both engines.

/// Size limits applied to every request, identical on both engines because both drive the same core.
///
/// Construct with [`Limits::default()`] and change the fields you need:
///
/// ```
/// let mut limits = twinhttp::Limits::default();
/// limits.max_body_bytes = 1 << 20;
/// # assert_eq!(limits.max_body_bytes, 1 << 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Longest request-target (path and query) accepted; longer gets `414 URI Too Long`.
    /// Default: 8 KiB.
    pub max_target_bytes: usize,
    /// Largest request head (request line and all header fields) accepted; larger gets
    /// `431 Request Header Fields Too Large`. Default: 32 KiB.
    pub max_head_bytes: usize,
    /// Most header fields accepted in one request; more gets `431`. Default: 100, at most
    /// [`Limits::MAX_HEADERS_CAP`].
    pub max_headers: usize,
    /// Largest request body accepted; larger gets `413 Content Too Large`. Default: 16 MiB.
    pub max_body_bytes: u64,
    /// Most bytes of a request body kept in memory while it arrives; a larger body waits for
    /// its handler in an anonymous temporary file (in `TMPDIR`, else `/tmp`), gone after its
    /// exchange. The handler reads either the same way. A body also goes to its file while the
    /// server's memory budget is spent, so the budget, not this, bounds the total. Default:
    /// 1 MiB (Envoy buffers up to 1 MiB per connection, Django 2.5 MiB per upload; Puma keeps
    /// 112 KiB, nginx 8–16 KiB); `usize::MAX` keeps every body in memory.
    pub max_body_in_memory: usize,
    /// Output buffered for pipelined responses before it is written to the socket. Default: 64 KiB.
    pub max_pipeline_output: usize,
}

impl Limits {
    /// The largest value [`Limits::max_headers`] can take; larger settings are clamped to it.
    pub const MAX_HEADERS_CAP: usize = 256;

    pub(crate) fn header_slots(&self) -> usize {
        self.max_headers.clamp(1, Self::MAX_HEADERS_CAP)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_target_bytes: 8 * 1024,
            max_head_bytes: 32 * 1024,
            max_headers: 100,
            max_body_bytes: 16 * 1024 * 1024,
            max_body_in_memory: 1024 * 1024,
            max_pipeline_output: 64 * 1024,
        }
    }
}
