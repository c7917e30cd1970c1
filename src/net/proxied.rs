//! The PROXY protocol (versions 1 and 2, HAProxy's) as a transport: a proxy in front writes a
//! header naming the client before the connection's own bytes, and [`Proxied`] reads it in the
//! engine's first reads (non-blocking, on whichever thread drives the connection, under the
//! head deadline that covers every byte before a request's head), then passes the stream
//! through unchanged. It sits under TLS: the header comes before the handshake. Parsing is
//! `ppp`'s.
//!
//! With the setting on, a connection must start with a header: one that does not (a client
//! speaking HTTP or TLS straight away, or a malformed version 2 header) is closed when its first
//! bytes show it, and a version 1 line once it ended (or passed 107 bytes, or the head deadline
//! came), before a byte of it reaches HTTP or TLS.

use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};

use ppp::{HeaderResult, PartialResult, v1, v2};

use crate::transport::Transport;

/// The longest header read: a version 1 header is at most 107 bytes; version 2's addresses
/// take 216 at most, and its extensions (TLVs: TLS details, a unique id) fit in the rest. It
/// is held only as its bytes arrive, until the head deadline at most, outside the memory
/// budget (as the engines' read buffers are).
const MAX_HEADER: usize = 4096;

/// The longest version 1 header, its CRLF included.
const V1_MAX: usize = 107;
/// How a version 1 header begins.
const V1_PREFIX: &[u8] = b"PROXY ";

/// A version 2 header's version and command byte for `LOCAL` (version 2 in the high nibble,
/// command 0 in the low).
const V2_LOCAL: u8 = 0x20;
/// A version 2 header's fixed part: the signature, the version and command, the family and
/// protocol, and the length of the address block (big-endian, its two last bytes).
const V2_FIXED: usize = 16;

/// How much is read at once while the header is incomplete: a version 1 header whole, and a
/// version 2 header without extensions.
const READ_STEP: usize = 256;

/// Where the stream stands.
enum Preface {
    /// The header is not complete yet: the bytes read so far.
    Reading(Vec<u8>),
    /// The header was read; bytes that came after it in the same reads are returned first.
    Leftover { bytes: Vec<u8>, at: usize },
    /// The header and what followed it are read: reads go to the stream.
    Through,
}

/// A stream that begins with a PROXY protocol header.
pub(crate) struct Proxied<T: Transport> {
    inner: T,
    preface: Preface,
    /// The client's address, as the header gave it: `None` until it is read, and for a header
    /// that names none (a proxy's own health check: `LOCAL`, `UNKNOWN`, a Unix socket).
    source: Option<SocketAddr>,
}

impl<T: Transport> Proxied<T> {
    pub(crate) fn new(inner: T) -> Self {
        Proxied {
            inner,
            preface: Preface::Reading(Vec::new()),
            source: None,
        }
    }

    /// Reads on until the header is complete (`Ok`), the stream has nothing more now
    /// (`WouldBlock`), or the header is missing or malformed (`InvalidData`).
    fn read_header(&mut self) -> io::Result<()> {
        loop {
            let Preface::Reading(bytes) = &mut self.preface else {
                return Ok(());
            };
            let filled = bytes.len();
            let want = READ_STEP.min(MAX_HEADER - filled);
            bytes.resize(filled + want, 0);
            let read = self.inner.read(&mut bytes[filled..]);
            bytes.truncate(filled + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            match parse(bytes) {
                Parsed::Header { len, source } => {
                    let rest = bytes.split_off(len);
                    self.source = source;
                    self.preface = Preface::Leftover { bytes: rest, at: 0 };
                    return Ok(());
                }
                Parsed::Partial if bytes.len() < MAX_HEADER => {}
                Parsed::Partial | Parsed::Invalid => {
                    log::debug!(
                        "closing a connection that did not begin with a PROXY protocol header"
                    );
                    return Err(io::Error::new(
                        ErrorKind::InvalidData,
                        "the connection did not begin with a PROXY protocol header",
                    ));
                }
            }
        }
    }
}

/// What the bytes read so far are.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// A complete header of `len` bytes, naming `source` (or no address).
    Header {
        len: usize,
        source: Option<SocketAddr>,
    },
    /// The beginning of a header.
    Partial,
    /// Not a header: missing, malformed, or one this server does not take.
    Invalid,
}

/// Parses a header at the start of `bytes`.
fn parse(bytes: &[u8]) -> Parsed {
    // A version 2 header longer than this server takes is refused once its length is read,
    // not when its bytes have all come (or the header-read deadline has).
    if v2_declared(bytes).is_some_and(|len| len > MAX_HEADER) {
        return Parsed::Invalid;
    }
    if let Some(local) = v2_local(bytes) {
        return local;
    }
    let result = HeaderResult::parse(bytes);
    // A version 1 line is judged once it ended: cut anywhere, its start may read as an error
    // (`ppp` takes a line cut after the source port for one with an empty destination port).
    // Bytes that cannot begin one are refused at once.
    if let (HeaderResult::V1(_), None) = (&result, line_end(bytes)) {
        let begun = bytes.len().min(V1_PREFIX.len());
        return match bytes.len() < V1_MAX && bytes[..begun] == V1_PREFIX[..begun] {
            true => Parsed::Partial,
            false => Parsed::Invalid,
        };
    }
    if result.is_incomplete() {
        let unknown = bytes.starts_with(b"PROXY UNKNOWN ") || bytes.starts_with(b"PROXY UNKNOWN\r");
        return match (&result, line_end(bytes)) {
            // A version 1 line that ended without its fields is malformed, not partial; one of
            // protocol `UNKNOWN` names nobody, whatever follows (the specification's words).
            (HeaderResult::V1(_), Some(end)) if unknown => Parsed::Header {
                len: end,
                source: None,
            },
            (HeaderResult::V1(_), _) => Parsed::Invalid,
            _ => Parsed::Partial,
        };
    }
    match result {
        HeaderResult::V1(Ok(header)) => Parsed::Header {
            len: header.header.len(),
            source: match header.addresses {
                v1::Addresses::Tcp4(a) => Some((a.source_address, a.source_port).into()),
                v1::Addresses::Tcp6(a) => Some((a.source_address, a.source_port).into()),
                v1::Addresses::Unknown => None,
            },
        },
        // Its extensions must be well-formed too: a TLV whose length runs past the header
        // (or a stray byte after the last) is a malformed header (a user's trial found one
        // served).
        HeaderResult::V2(Ok(header)) if header.tlvs().any(|tlv| tlv.is_err()) => Parsed::Invalid,
        HeaderResult::V2(Ok(header)) => Parsed::Header {
            len: header.len(),
            source: match (header.command, header.addresses) {
                (v2::Command::Proxy, v2::Addresses::IPv4(a)) => {
                    Some((a.source_address, a.source_port).into())
                }
                (v2::Command::Proxy, v2::Addresses::IPv6(a)) => {
                    Some((a.source_address, a.source_port).into())
                }
                _ => None,
            },
        },
        HeaderResult::V1(Err(_)) | HeaderResult::V2(Err(_)) => Parsed::Invalid,
    }
}

/// A version 2 `LOCAL` header (a proxy's own connection, a health check), read here rather than
/// by `ppp`: the receiver must accept it and use the real endpoints, its family and address
/// block ignored (proxy-protocol.txt §2.2), while `ppp` refuses one whose declared family has
/// no room in its block (`AF_INET` with a length of 0, as some proxies send). `None` when
/// `bytes` are not (yet) seen to begin one.
fn v2_local(bytes: &[u8]) -> Option<Parsed> {
    let rest = bytes.strip_prefix(v2::PROTOCOL_PREFIX)?;
    if *rest.first()? != V2_LOCAL {
        return None;
    }
    let Some(len) = v2_declared(bytes) else {
        return Some(Parsed::Partial);
    };
    Some(match bytes.len() >= len {
        true => Parsed::Header { len, source: None },
        false => Parsed::Partial,
    })
}

/// The whole length a version 2 header declares (its fixed 16 bytes and its address block),
/// once its fixed part has come.
fn v2_declared(bytes: &[u8]) -> Option<usize> {
    bytes.strip_prefix(v2::PROTOCOL_PREFIX)?;
    let &[high, low] = bytes.get(V2_FIXED - 2..V2_FIXED)? else {
        return None;
    };
    Some(V2_FIXED + usize::from(u16::from_be_bytes([high, low])))
}

/// The length of a version 1 header's line, CRLF included, if it ended within the 107 bytes
/// the protocol allows.
fn line_end(bytes: &[u8]) -> Option<usize> {
    let line = bytes.get(..bytes.len().min(V1_MAX))?;
    line.windows(2).position(|w| w == b"\r\n").map(|i| i + 2)
}

impl<T: Transport> Read for Proxied<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_header()?;
        match &mut self.preface {
            Preface::Leftover { bytes, at } => {
                let left = bytes.get(*at..).unwrap_or_default();
                let n = left.len().min(buf.len());
                buf[..n].copy_from_slice(&left[..n]);
                *at += n;
                if *at >= bytes.len() {
                    self.preface = Preface::Through;
                }
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.inner.read(buf)
            }
            Preface::Through => self.inner.read(buf),
            // `read_header` returned only once it is read.
            Preface::Reading(_) => Err(ErrorKind::WouldBlock.into()),
        }
    }
}

impl<T: Transport> Write for Proxied<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<T: Transport> AsFd for Proxied<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl<T: Transport> Transport for Proxied<T> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.inner.shutdown_write()
    }
    fn set_nonblocking(&mut self, nonblocking: bool) -> io::Result<()> {
        self.inner.set_nonblocking(nonblocking)
    }
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.sendfile_fd()
    }
    /// Bytes that followed the header in its reads are input the socket no longer signals.
    fn buffered_input(&self) -> bool {
        matches!(self.preface, Preface::Leftover { .. }) || self.inner.buffered_input()
    }
    fn wants_write(&self) -> bool {
        self.inner.wants_write()
    }
    fn unacknowledged(&self) -> Option<usize> {
        self.inner.unacknowledged()
    }
    fn take_sent(&mut self) -> Option<usize> {
        self.inner.take_sent()
    }
    fn abort(&mut self) {
        self.inner.abort()
    }
    fn proxied_source(&self) -> Option<SocketAddr> {
        self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// A proxied stream over one end of a socket pair, and the other end.
    fn pair() -> (Proxied<UnixStream>, UnixStream) {
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        ours.set_nonblocking(true).expect("non-blocking");
        (Proxied::new(ours), theirs)
    }

    #[test]
    fn a_header_in_pieces_is_read_across_reads_and_what_follows_is_returned_whole() {
        let (mut stream, mut peer) = pair();
        let header = b"PROXY TCP4 192.0.2.7 10.0.0.2 51000 80\r\n";
        let mut buf = [0u8; 4];
        peer.write_all(&header[..10]).expect("send");
        let read = stream.read(&mut buf);
        assert_eq!(read.map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
        assert_eq!(stream.proxied_source(), None);
        peer.write_all(&header[10..]).expect("send");
        peer.write_all(b"GET / HTTP/1.1\r\n").expect("send");
        // What followed the header comes out in the caller's pieces, flagged as buffered.
        let mut got = Vec::new();
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, b"GET / HTTP/1.1\r\n");
        assert!(!stream.buffered_input());
        assert_eq!(
            stream.proxied_source(),
            Some("192.0.2.7:51000".parse().expect("an address"))
        );
        peer.write_all(b"Host: t").expect("send");
        let n = stream.read(&mut buf).expect("passed through");
        assert_eq!(&buf[..n], b"Host");
    }

    #[test]
    fn leftover_bytes_are_buffered_input_until_read() {
        let (mut stream, mut peer) = pair();
        peer.write_all(b"PROXY UNKNOWN\r\nGET").expect("send");
        let mut one = [0u8; 1];
        assert_eq!(stream.read(&mut one).expect("a byte"), 1);
        assert!(stream.buffered_input(), "two bytes left inside");
        assert_eq!(stream.read(&mut one).expect("a byte"), 1);
        assert_eq!(stream.read(&mut one).expect("a byte"), 1);
        assert!(!stream.buffered_input());
        assert_eq!(&one, b"T");
    }

    #[test]
    fn the_end_of_the_stream_inside_the_header_is_an_error() {
        let (mut stream, mut peer) = pair();
        peer.write_all(b"PROXY TCP4 192").expect("send");
        drop(peer);
        let read = stream.read(&mut [0u8; 8]);
        assert_eq!(read.map_err(|e| e.kind()), Err(ErrorKind::UnexpectedEof));
    }

    fn v2_header(source: &str) -> Vec<u8> {
        let source: SocketAddr = source.parse().expect("an address");
        let destination: SocketAddr = match source {
            SocketAddr::V4(_) => "10.0.0.2:80".parse().expect("an address"),
            SocketAddr::V6(_) => "[2001:db8::2]:80".parse().expect("an address"),
        };
        v2::Builder::with_addresses(
            v2::Version::Two | v2::Command::Proxy,
            v2::Protocol::Stream,
            (source, destination),
        )
        .build()
        .expect("a header")
    }

    #[test]
    fn version_1_gives_the_source_and_its_length() {
        let header = b"PROXY TCP4 192.0.2.7 10.0.0.2 51000 80\r\n";
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(
            parse(&bytes),
            Parsed::Header {
                len: header.len(),
                source: Some("192.0.2.7:51000".parse().expect("an address")),
            }
        );
        // Cut anywhere before its line end, it is awaited (cut after the source port, `ppp`
        // reads an empty destination port).
        for cut in 1..header.len() {
            assert_eq!(parse(&header[..cut]), Parsed::Partial, "cut at {cut}");
        }
        let v6 = b"PROXY TCP6 2001:db8::7 2001:db8::1 51000 443\r\n";
        for cut in 1..v6.len() {
            assert_eq!(parse(&v6[..cut]), Parsed::Partial, "cut at {cut}");
        }
        assert_eq!(
            parse(b"PROXY UNKNOWN a b c d e\r\nGET"),
            Parsed::Header {
                len: 25,
                source: None
            }
        );
        assert_eq!(
            parse(b"PROXY UNKNOWN\r\n"),
            Parsed::Header {
                len: 15,
                source: None
            }
        );
    }

    /// A version 2 header for `source`, with these extension bytes after its addresses (the
    /// declared length counts them).
    fn v2_with_extensions(source: &str, extensions: &[u8]) -> Vec<u8> {
        let mut header = v2_header(source);
        header.extend_from_slice(extensions);
        let len = u16::from_be_bytes([header[V2_FIXED - 2], header[V2_FIXED - 1]]);
        let len = len + u16::try_from(extensions.len()).expect("short");
        header[V2_FIXED - 2..V2_FIXED].copy_from_slice(&len.to_be_bytes());
        header
    }

    #[test]
    fn version_2_extensions_must_be_well_formed() {
        let source = "192.0.2.7:51000";
        // A TLV of type 0x05 (a unique id) whose 2 bytes are there: taken.
        let good = v2_with_extensions(source, &[0x05, 0x00, 0x02, b'i', b'd']);
        assert_eq!(
            parse(&good),
            Parsed::Header {
                len: good.len(),
                source: Some(source.parse().expect("an address")),
            }
        );
        // One that says 9 bytes where 2 follow, and a stray byte after a good one: refused.
        for bad in [
            &[0x05, 0x00, 0x09, b'i', b'd'][..],
            &[0x05, 0x00, 0x02, b'i', b'd', 0x01][..],
        ] {
            assert_eq!(
                parse(&v2_with_extensions(source, bad)),
                Parsed::Invalid,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn version_2_gives_the_source_and_its_length() {
        for source in ["192.0.2.7:51000", "[2001:db8::7]:51000"] {
            let header = v2_header(source);
            let mut bytes = header.clone();
            bytes.extend_from_slice(b"\x16\x03\x01");
            assert_eq!(
                parse(&bytes),
                Parsed::Header {
                    len: header.len(),
                    source: Some(source.parse().expect("an address")),
                }
            );
            for cut in [1, 12, 15, header.len() - 1] {
                assert_eq!(parse(&header[..cut]), Parsed::Partial, "cut at {cut}");
            }
        }
    }

    /// proxy-protocol.txt §2.2: a `LOCAL` header's family and address block are ignored, so
    /// one that declares a family its block has no room for (`AF_INET`, length 0) is a header
    /// naming nobody, awaited while cut; its length is the 16 bytes plus the block's.
    #[test]
    fn version_2_local_is_a_header_whatever_its_family() {
        let signature = b"\r\n\r\n\0\r\nQUIT\n";
        for (family_protocol, block) in [
            (0x11, &[][..]),
            (0x21, &[][..]),
            (0x31, &[1, 2, 3][..]),
            (0x00, &[][..]),
            (0x11, &[0; 12][..]),
        ] {
            let mut header = signature.to_vec();
            header.extend_from_slice(&[0x20, family_protocol]);
            let len = u16::try_from(block.len()).expect("a short block");
            header.extend_from_slice(&len.to_be_bytes());
            header.extend_from_slice(block);
            let mut bytes = header.clone();
            bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
            assert_eq!(
                parse(&bytes),
                Parsed::Header {
                    len: header.len(),
                    source: None
                },
                "{header:?}"
            );
            for cut in 1..header.len() {
                assert_eq!(parse(&header[..cut]), Parsed::Partial, "cut at {cut}");
            }
        }
        // A `PROXY` header that has no room for its family's addresses stays invalid, and so
        // does a version other than 2.
        let mut proxy = signature.to_vec();
        proxy.extend_from_slice(&[0x21, 0x11, 0x00, 0x00]);
        assert_eq!(parse(&proxy), Parsed::Invalid);
        let mut version_3 = signature.to_vec();
        version_3.extend_from_slice(&[0x30, 0x11, 0x00, 0x00]);
        assert_eq!(parse(&version_3), Parsed::Invalid);
        // One that declares more than this server takes is refused once its length is read,
        // `PROXY` and `LOCAL` alike; one that declares just what it takes is awaited.
        for command in [0x20, 0x21] {
            let mut long = signature.to_vec();
            let over = u16::try_from(MAX_HEADER - V2_FIXED + 1).expect("a length");
            long.extend_from_slice(&[command, 0x11]);
            long.extend_from_slice(&over.to_be_bytes());
            assert_eq!(parse(&long), Parsed::Invalid, "{command:#x}");
            let mut most = signature.to_vec();
            most.extend_from_slice(&[command, 0x11]);
            most.extend_from_slice(&(over - 1).to_be_bytes());
            assert_eq!(parse(&most), Parsed::Partial, "{command:#x}");
        }
    }

    #[test]
    fn a_missing_or_malformed_header_is_invalid() {
        for bytes in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01\x02\x00",
            b"PROXY TCP4 999.0.2.7 10.0.0.2 51000 80\r\n",
            b"PROXY TCP9 192.0.2.7 10.0.0.2 51000 80\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.2 51000\r\nGET / HTTP/1.1\r\n",
            b"PROXY UNKNOWNxyz\r\n",
            &[b'P'; 8][..],
        ] {
            assert_eq!(parse(bytes), Parsed::Invalid, "{bytes:?}");
        }
        let mut long = b"PROXY TCP4 192.0.2.7 10.0.0.2 51000 80".to_vec();
        long.resize(V1_MAX, b' ');
        assert_eq!(parse(&long), Parsed::Invalid, "107 bytes and no line end");
    }
}
