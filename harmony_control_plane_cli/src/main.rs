//! `harmony-control-plane`: see `--help`.

fn main() {
    harmony_control_plane_cli::program_main();
}
