//! The floor: the least a server can do per request, for `bench/instructions.sh` to measure every
//! server against. `floor_hello PORT`.
//!
//! One thread per core, each with its own `SO_REUSEPORT` listener and its own level-triggered
//! epoll. A readable connection gets one `read`; every whole request in the buffer (a head up to
//! its empty line, its lines found with `memchr`'s SIMD search, and its `Content-Length` body) is
//! answered with the same fixed `Hello, World!` response, all of them in one `write`. Nothing
//! else: no parser beyond finding the head's end and its `Content-Length` and `Connection:
//! close`, no routes, no clock (the `Date` is fixed), no timeouts, no limits but the buffer's
//! growth. It is not a server anyone should run: it is what
//! the kernel's `epoll_wait`/`read`/`write` cost plus the least user-space work around them.
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::net::{
    AddressFamily, Ipv4Addr, SocketAddrV4, SocketFlags, SocketType, accept_with, bind, listen,
    socket_with, sockopt,
};

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\
Date: Tue, 24 Nov 2026 00:00:00 GMT\r\n\r\nHello, World!";
const RESPONSE_CLOSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\
Connection: close\r\nDate: Tue, 24 Nov 2026 00:00:00 GMT\r\n\r\nHello, World!";
const LISTENER: u64 = u64::MAX;

/// One connection: what it has read and not answered, and what it has to write.
struct Conn {
    fd: OwnedFd,
    input: Vec<u8>,
    output: Vec<u8>,
    closing: bool,
    /// Registered for writability (a write found the socket full), not readability.
    writing: bool,
}

fn main() -> io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!("floor_hello listening on 127.0.0.1:{port} ({threads} threads)");
    let loops: Vec<_> = (0..threads)
        .map(|_| {
            let listener = listener(port)?;
            Ok(std::thread::spawn(move || serve(listener)))
        })
        .collect::<io::Result<_>>()?;
    for handle in loops {
        handle
            .join()
            .map_err(|_| io::Error::other("a loop panicked"))??;
    }
    Ok(())
}

fn listener(port: u16) -> io::Result<OwnedFd> {
    let fd = socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    sockopt::set_socket_reuseport(&fd, true)?;
    bind(&fd, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
    listen(&fd, 1024)?;
    Ok(fd)
}

/// One loop: its listener's connections, until an error.
fn serve(listener: OwnedFd) -> io::Result<()> {
    let poll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    epoll::add(
        &poll,
        &listener,
        epoll::EventData::new_u64(LISTENER),
        epoll::EventFlags::IN,
    )?;
    // Indexed by descriptor number.
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = Vec::with_capacity(256);
    loop {
        events.clear();
        match epoll::wait(&poll, spare_capacity(&mut events), None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        for event in &events {
            // A copy: the event is a packed struct.
            let (key, flags) = (event.data.u64(), { event.flags });
            if key == LISTENER {
                accept_all(&poll, &listener, &mut conns)?;
                continue;
            }
            let Ok(slot) = usize::try_from(key) else {
                continue;
            };
            let Some(conn) = conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let keep = if flags.contains(epoll::EventFlags::OUT) {
                flush(&poll, conn)
            } else {
                read_and_answer(&poll, conn)
            };
            if !keep {
                conns[slot] = None;
            }
        }
    }
}

fn accept_all(poll: &OwnedFd, listener: &OwnedFd, conns: &mut Vec<Option<Conn>>) -> io::Result<()> {
    loop {
        let fd = match accept_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::AGAIN) => return Ok(()),
            Err(rustix::io::Errno::INTR | rustix::io::Errno::CONNABORTED) => continue,
            // Out of descriptors or memory: the pending connections wait for the next wake-up.
            Err(e) => {
                eprintln!("floor_hello: accept: {e}");
                return Ok(());
            }
        };
        if sockopt::set_tcp_nodelay(&fd, true).is_err() {
            continue;
        }
        let slot = usize::try_from(fd.as_raw_fd()).map_err(io::Error::other)?;
        let key = u64::try_from(slot).map_err(io::Error::other)?;
        epoll::add(
            poll,
            &fd,
            epoll::EventData::new_u64(key),
            epoll::EventFlags::IN,
        )?;
        if conns.len() <= slot {
            conns.resize_with(slot + 1, || None);
        }
        conns[slot] = Some(Conn {
            fd,
            input: Vec::with_capacity(4096),
            output: Vec::new(),
            closing: false,
            writing: false,
        });
    }
}

/// One read, then an answer to every whole request read; false when the connection is done.
fn read_and_answer(poll: &OwnedFd, conn: &mut Conn) -> bool {
    if conn.input.capacity() == conn.input.len() {
        conn.input.reserve(4096);
    }
    match rustix::io::read(&conn.fd, spare_capacity(&mut conn.input)) {
        Ok(0) => return false,
        Ok(_) => {}
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return true,
        Err(_) => return false,
    }
    let used = answer(&conn.input, &mut conn.output, &mut conn.closing);
    conn.input.drain(..used);
    flush(poll, conn)
}

/// Appends a response for each whole request at the start of `input`; returns the bytes they
/// took. Stops after a `Connection: close` request.
fn answer(input: &[u8], output: &mut Vec<u8>, closing: &mut bool) -> usize {
    let mut at = 0;
    while !*closing {
        let rest = &input[at..];
        // One pass over the head's lines, each found with a SIMD search, to its empty line;
        // only a line starting with `c` can be `Content-Length` or `Connection`.
        let (mut from, mut end, mut body) = (0, None, 0);
        for newline in memchr::memchr_iter(b'\n', rest) {
            let line = &rest[from..newline];
            from = newline + 1;
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            match line.first() {
                None => {
                    end = Some(from);
                    break;
                }
                Some(b'c' | b'C') => {}
                Some(_) => continue,
            }
            if let Some(value) = field(line, b"content-length:") {
                body = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            } else if let Some(value) = field(line, b"connection:") {
                *closing = value.eq_ignore_ascii_case(b"close");
            }
        }
        let Some(end) = end else {
            break;
        };
        let whole = end + body;
        if rest.len() < whole {
            break;
        }
        output.extend_from_slice(if *closing { RESPONSE_CLOSE } else { RESPONSE });
        at += whole;
    }
    at
}

/// The trimmed value of a header line whose name (with its colon, lowercase) is `name`.
fn field<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let value = line
        .get(..name.len())
        .filter(|n| n.eq_ignore_ascii_case(name))
        .map(|_| &line[name.len()..])?;
    Some(value.trim_ascii())
}

/// Writes what is pending; waits for writability when the socket is full. False when the
/// connection is done (an error, or everything written to a closing one).
fn flush(poll: &OwnedFd, conn: &mut Conn) -> bool {
    while !conn.output.is_empty() {
        match rustix::io::write(&conn.fd, &conn.output) {
            Ok(n) => {
                conn.output.drain(..n);
            }
            Err(rustix::io::Errno::AGAIN) => return conn.writing || watch(poll, conn, true),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
    !conn.closing && (!conn.writing || watch(poll, conn, false))
}

/// Registers for writability (`writing`) or readability again.
fn watch(poll: &OwnedFd, conn: &mut Conn, writing: bool) -> bool {
    let Ok(key) = u64::try_from(conn.fd.as_fd().as_raw_fd()) else {
        return false;
    };
    let flags = if writing {
        epoll::EventFlags::OUT
    } else {
        epoll::EventFlags::IN
    };
    conn.writing = writing;
    epoll::modify(poll, &conn.fd, epoll::EventData::new_u64(key), flags).is_ok()
}
