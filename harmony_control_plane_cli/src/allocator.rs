//! The program's malloc settings, made before any thread starts.
//!
//! glibc's malloc gives threads their own arenas (up to 8 per core) and memory freed in one
//! arena is not reused by the others. Every agent connection is served by whichever worker
//! thread polls it, so with several arenas each one keeps its own freed holes: measured at
//! 10,000 agents on 2 cores, 15.2 KiB of resident memory per connection with glibc's default,
//! 14.1 KiB with 2 arenas and 12.3 KiB with one, for a live heap of 9.3 KiB
//! (docs/benchmarks.md, "Memory per connection: where it goes"). The control plane's threads
//! spend their time in I/O and the database, not in malloc, so one arena costs no measurable
//! throughput here. `MALLOC_ARENA_MAX` (or `GLIBC_TUNABLES=glibc.malloc.arena_max=N`) in the
//! environment still wins: this setting is made only when neither is given.

/// Limits glibc's malloc to one arena unless the environment chose a number; a no-op on other
/// C libraries. Call before the runtime starts its threads.
pub(crate) fn one_malloc_arena_unless_configured() {
    let configured = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if configured {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's parameters; no thread but this one exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
