//! A WebSocket's stream as tungstenite sees it: reads through the engine's buffer, in slices the
//! connection looks at the memory budget between, and writes counted for the output's rate.

use std::io::{self, ErrorKind, Read, Write};

use super::frames::Frames;
use crate::http::buf::ReadBuf;
use crate::http::session::{Duplex, Io, Reads};

/// Size of the read buffer a WebSocket is driven with: a 16 KiB message arrives in one read
/// instead of three through the 8 KiB HTTP buffer (`bench/syscalls.sh ws`: 3.15 reads per 16 KiB
/// message). Only the pages a read writes become resident.
pub(crate) const WS_READ_BUF: usize = 64 * 1024;

/// Bytes tungstenite takes in one read before the connection looks at the memory budget again
/// (and counts a message of its step): tungstenite gathers a message's fragments for as long as
/// input comes, so an endless message from a fast peer would otherwise be read in one call.
const READ_SLICE: usize = 256 * 1024;

/// The stream as tungstenite sees it: reads come through the engine's buffer (one `read(2)` of
/// up to its size, however little tungstenite asks for per call), writes go straight out.
pub(super) struct WsIo<'a> {
    stream: &'a mut dyn Duplex,
    buf: &'a mut ReadBuf,
    /// Once a read returned less than the space offered, the stream is drained: later reads
    /// in this turn answer `WouldBlock` without a system call, and the caller's level-triggered
    /// wait (the thread engine's `ppoll`) reports any byte that arrived since. Off on the
    /// reactor, where it was measured slower (bench/results/2026-11-22-reactor-edge-short-read.md).
    short_read_drains: bool,
    drained: bool,
    /// A read that fills the buffer doubles it, up to this many bytes (0: never grows).
    grow_to: usize,
    /// Bytes written since the last [`WsIo::take_written`], for the output's minimum rate.
    written: usize,
    /// Bytes handed to tungstenite in this read, for the budget.
    taken: usize,
    /// The frames in what tungstenite was handed, this read's bytes included.
    frames: Frames,
    /// Bytes tungstenite may still take in this read ([`READ_SLICE`]).
    slice_left: usize,
}

impl<'a> WsIo<'a> {
    /// With [`Reads::UntilShortRead`] (a connection's own buffer on the thread engine) reading
    /// stops after a short read and the buffer grows up to 64 KiB when reads fill it, so large
    /// messages take one read each; the buffer stays 8 KiB for a connection that never
    /// receives more at once.
    pub(super) fn over(io: &'a mut Io<'_>) -> Self {
        let until_short = io.reads == Reads::UntilShortRead;
        WsIo {
            stream: &mut *io.stream,
            buf: &mut *io.buf,
            short_read_drains: until_short,
            drained: false,
            grow_to: if until_short { WS_READ_BUF } else { 0 },
            written: 0,
            taken: 0,
            frames: Frames::default(),
            slice_left: READ_SLICE,
        }
    }

    /// A read of at most [`READ_SLICE`] bytes begins, the frames standing at `frames`.
    pub(super) fn new_slice(&mut self, frames: Frames) {
        self.slice_left = READ_SLICE;
        self.taken = 0;
        self.frames = frames;
    }

    /// The last read stopped at its slice, not for want of input.
    pub(super) fn sliced(&self) -> bool {
        self.slice_left == 0
    }

    /// What the socket holds that the peer has not acknowledged, where the transport knows.
    pub(super) fn unacknowledged(&self) -> Option<usize> {
        self.stream.unacknowledged()
    }

    /// Bytes written since the last call: what the socket took, where the transport says
    /// ([`Duplex::take_sent`]: a TLS stream's records), else what the writes returned.
    pub(super) fn take_written(&mut self) -> usize {
        let wrote = std::mem::take(&mut self.written);
        self.stream.take_sent().unwrap_or(wrote)
    }

    /// Bytes handed to tungstenite in this read, and where the frames stand after them.
    pub(super) fn slice_taken(&self) -> (usize, Frames) {
        (self.taken, self.frames)
    }
}

impl Read for WsIo<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.slice_left == 0 {
            return Err(ErrorKind::WouldBlock.into());
        }
        if self.buf.is_empty() {
            if self.drained {
                return Err(ErrorKind::WouldBlock.into());
            }
            let spare = self.buf.spare(0);
            let offered = spare.len();
            let n = loop {
                match self.stream.read(&mut *spare) {
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    other => break other?,
                }
            };
            self.drained =
                self.short_read_drains && n > 0 && n < offered && !self.stream.buffered_input();
            self.buf.filled_by(n);
            if n == offered && self.buf.len() < self.grow_to {
                self.buf.grow((self.buf.len() * 2).min(self.grow_to));
            }
            if n == 0 {
                return Ok(0);
            }
        }
        let have = self.buf.filled();
        let n = have.len().min(out.len()).min(self.slice_left);
        out[..n].copy_from_slice(&have[..n]);
        self.frames.saw(&out[..n]);
        self.buf.consume(n);
        self.taken += n;
        self.slice_left -= n;
        Ok(n)
    }
}

impl Write for WsIo<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        loop {
            match self.stream.write(data) {
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Ok(n) => {
                    self.written += n;
                    return Ok(n);
                }
                other => return other,
            }
        }
    }
    /// A transport that holds output (TLS) gets it out: `WouldBlock` until it is.
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}
