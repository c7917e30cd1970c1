//! For the measuring examples: start an example server binary as a child process on an
//! ephemeral port, learn its address from the line it prints, and raise the descriptor limit.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// The example flags of every engine configuration, for tests that run an example on each.
pub const EVERY_CONFIGURATION: [&[&str]; 4] = [
    &["--engine", "server"],
    &["--engine", "server", "--no-park"],
    &["--engine", "reactor", "--dispatch", "inline"],
    &["--engine", "reactor", "--dispatch", "pool"],
];

/// A server started as a child process; killed (by PID) with [`ChildServer::stop`].
pub struct ChildServer {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ChildServer {
    /// Starts the example `name` (next to this executable) with `--addr 127.0.0.1:0` and `flags`.
    /// Exits with a hint when it has not been built.
    pub fn start(name: &str, flags: &[String]) -> ChildServer {
        let exe = std::env::current_exe().expect("own path");
        let bin = exe.parent().map(|d| d.join(name)).expect("examples dir");
        if !bin.exists() {
            eprintln!(
                "build the server first: cargo build --release --features server --example {name}"
            );
            std::process::exit(2);
        }
        let mut cmd = Command::new(&bin);
        cmd.args(["--addr", "127.0.0.1:0"]).args(flags);
        Self::spawn(cmd)
    }

    /// Spawns a prepared command for a server that prints `http://ADDR` (or `https://ADDR`) on
    /// its first stderr line.
    pub fn spawn(mut cmd: Command) -> ChildServer {
        let mut child = cmd.stderr(Stdio::piped()).spawn().expect("spawn server");
        let mut line = String::new();
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        stderr.read_line(&mut line).expect("address line");
        // The rest of its log is read and dropped, so that the server never writes to a closed
        // pipe (nor blocks on a full one).
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let addr = line
            .split("://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        ChildServer { child, addr }
    }

    /// Kills the server (also done on drop, so a failing caller leaves no process behind).
    pub fn stop(self) {}
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An example binary as a test finds it: `target/<profile>/deps/<test>` →
/// `target/<profile>/examples/<name>` (built by `cargo test`).
pub fn example_for_test(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples")
        .join(name);
    assert!(bin.exists(), "{} is built by cargo test", bin.display());
    bin
}

/// Raises the soft open-files limit to the hard one (children inherit it); returns it.
pub fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    lim.current = lim.maximum;
    let _ = setrlimit(Resource::Nofile, lim);
    getrlimit(Resource::Nofile).current.unwrap_or(1024)
}
