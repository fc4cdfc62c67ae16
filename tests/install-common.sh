# Shared by the installers under tests/ (sourced, not run): progress and errors on stderr
# prefixed with $installer (set it before sourcing), and root-only steps through sudo when not
# root.

log() { printf '%s: %s\n' "$installer" "$*" >&2; }
die() { printf '%s: error: %s\n' "$installer" "$*" >&2; exit 2; }

as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "need root to run: $* (run this script as root, or install it by hand)"
    fi
}
