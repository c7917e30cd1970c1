# Where cargo puts what the bench scripts build (sourced, with $here set to the repository):
# $CARGO_TARGET_DIR when it is set (a relative one is taken from the repository, where the
# scripts run cargo; it is exported absolute, so every cargo the scripts run agrees), else
# target/ in the repository and bench/peers/target/ for the peers' own workspace.
#   release        the crate's release builds: $release/examples/hello
#   peers_release  the Rust peers' release builds: $peers_release/hyper_hello
# shellcheck shell=bash
# Its variables are read by the scripts that source it:
# shellcheck disable=SC2034,SC2154
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  case $CARGO_TARGET_DIR in
    /*) ;;
    *) CARGO_TARGET_DIR=$here/$CARGO_TARGET_DIR ;;
  esac
  export CARGO_TARGET_DIR
  release=$CARGO_TARGET_DIR/release
  peers_release=$CARGO_TARGET_DIR/release
else
  release=$here/target/release
  peers_release=$here/bench/peers/target/release
fi
