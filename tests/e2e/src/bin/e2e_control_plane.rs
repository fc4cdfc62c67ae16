//! The control plane's real entry point (the `harmony-control-plane` program, embedded operator
//! included), built inside this package so the end-to-end tests can start it as a process
//! (`CARGO_BIN_EXE_e2e-control-plane`) with a binary cargo keeps fresh.

fn main() {
    harmony_control_plane_cli::program_main();
}
