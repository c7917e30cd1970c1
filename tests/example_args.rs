//! The examples' command line as a user meets it: `--help` prints the options and exits 0; an
//! option the example would ignore (another engine, one engine's options on the other, `--workers`
//! without pool dispatch) or does not know is refused with a message naming it and exit status 2, before anything is
//! bound.
#[path = "../examples/support/child.rs"]
#[allow(dead_code)]
mod child;

use std::process::{Command, Output};

/// Runs the example `name` (built by `cargo test`) with `args` to its end.
fn run(name: &str, args: &[&str]) -> Output {
    Command::new(child::example_for_test(name))
        .args(args)
        .env("RUST_LOG", "off")
        .output()
        .expect("run the example")
}

/// `files`: the example serves `--static`'s folder, and its help lists the option (only then:
/// elsewhere `--static` is refused, and a user's trial found it listed by `hello`).
fn assert_help(name: &str, files: bool) {
    for flag in ["--help", "-h"] {
        let out = run(name, &[flag]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name} {flag}: {out:?}");
        for option in ["--addr HOST:PORT", "--engine server|reactor", "--dispatch"] {
            assert!(stdout.contains(option), "{name} {flag}: {stdout}");
        }
        assert_eq!(
            stdout.contains("--static"),
            files,
            "{name} {flag}: {stdout}"
        );
        assert!(out.stderr.is_empty(), "{name} {flag}: {out:?}");
    }
}

/// Exit status 2, and standard error starts with `error: {message}` then lists the options
/// (`--static` only for `app`, the one example that takes it).
fn assert_refused(name: &str, args: &[&str], message: &str) {
    let out = run(name, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name} {args:?}: {stderr}");
    assert!(
        stderr.starts_with(&format!("error: {message}\n")),
        "{name} {args:?}: {stderr}"
    );
    assert!(
        stderr.contains("--addr HOST:PORT"),
        "{name} {args:?}: {stderr}"
    );
    assert_eq!(
        stderr.contains("--static DIR"),
        name == "app",
        "{name} {args:?}: {stderr}"
    );
}

#[test]
fn help_prints_the_options_and_exits_0() {
    assert_help("hello_reactor", false);
    #[cfg(feature = "server")]
    assert_help("hello", false);
    #[cfg(all(feature = "server", feature = "json"))]
    assert_help("app", true);
}

#[test]
fn hello_reactor_refuses_another_engine() {
    assert_refused(
        "hello_reactor",
        &["--engine", "server"],
        "hello_reactor runs the reactor engine only; --engine server is not supported here",
    );
    assert_refused(
        "hello_reactor",
        &["--no-park"],
        "--no-park is for the server engine, not the reactor",
    );
}

#[cfg(feature = "server")]
#[test]
fn the_server_engines_options_are_refused_on_the_reactor() {
    assert_refused(
        "hello",
        &["--engine", "reactor", "--park-linger-us", "100"],
        "--park-linger-us is for the server engine, not the reactor",
    );
}

#[cfg(feature = "server")]
#[test]
fn the_reactors_options_are_refused_on_the_server_engine() {
    for flag in [
        &["--dispatch", "pool"][..],
        &["--accept", "thread"],
        &["--workers", "3"],
    ] {
        let mut args = vec!["--engine", "server"];
        args.extend_from_slice(flag);
        assert_refused(
            "hello",
            &args,
            &format!("{} is for the reactor, not the server engine", flag[0]),
        );
    }
}

#[test]
fn workers_are_refused_without_pool_dispatch() {
    assert_refused(
        "hello_reactor",
        &["--dispatch", "inline", "--workers", "3"],
        "--workers is for --dispatch pool (the pool's threads)",
    );
}

/// The load tools (`idle_conns`, `paced_load`, `ws_load`) print their usage for `--help` and
/// run nothing; an argument they do not know is refused (exit 2).
#[test]
fn the_load_tools_print_their_usage_and_refuse_what_they_do_not_know() {
    for (name, unknown) in [
        ("idle_conns", &["10", "--bogus"][..]),
        ("paced_load", &["--bogus", "1"]),
        ("ws_load", &["--bogus", "1"]),
    ] {
        for flag in ["--help", "-h"] {
            let out = run(name, &[flag]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{name} {flag}: {out:?}");
            assert!(
                stdout.starts_with(&format!("usage: {name} ")),
                "{name}: {stdout}"
            );
        }
        let out = run(name, unknown);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name} {unknown:?}: {out:?}");
        assert!(stderr.contains("--bogus"), "{name}: {stderr}");
    }
}

#[test]
fn an_unknown_option_is_refused() {
    assert_refused(
        "hello_reactor",
        &["--adr", "127.0.0.1:0"],
        "unknown option --adr",
    );
}

#[test]
fn a_trusted_proxy_that_is_no_network_is_refused() {
    assert_refused(
        "hello",
        &["--trusted-proxy", "10.0.0.0/8,nine"],
        "--trusted-proxy: `nine` is not a network (10.0.0.0/8), an IP address, `unix` or `forwarded`",
    );
}

#[test]
fn static_is_refused_where_no_files_are_served() {
    // Only `app` serves the folder `--static` names; elsewhere it would be ignored.
    assert_refused(
        "hello_reactor",
        &["--static", "examples/public"],
        "--static is for app only (the folder it serves under /static/)",
    );
    #[cfg(feature = "server")]
    assert_refused(
        "ws_echo",
        &["--static", "examples/public"],
        "--static is for app only (the folder it serves under /static/)",
    );
}
