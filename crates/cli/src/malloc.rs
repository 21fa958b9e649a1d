//! How many malloc arenas glibc may keep (Linux with glibc only).
//!
//! glibc gives every thread that allocates while the others hold their arenas an arena of its
//! own, up to eight per core. Each arena keeps the high-water mark of what its thread allocated:
//! a merge-on-read read of 20M rows ran 7 threads (the main one, a runtime worker per core and
//! the short-lived threads that read local files) and ended 1.15x to 1.28x above the peak of a
//! 2M-row read of the same shape, with nothing held longer. One arena per core bounds that:
//! 1.07x to 1.09x, at the same speed for reads and for a 2M-row bulk insert (README "Whole-process
//! read memory").
//!
//! A user who sets `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` keeps what they set.

/// Limits glibc to one malloc arena per core, unless the environment already chooses.
///
/// Called first thing in `main`, before any other thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn limit_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var_os("GLIBC_TUNABLES").is_some()
    {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
    set_arena_max(arenas);
}

/// On other platforms the allocator is left as it is.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn limit_arenas() {}

/// `mallopt(M_ARENA_MAX, arenas)`; a refusal (it returns 0) leaves glibc's default, which is
/// only a matter of memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set_arena_max(arenas: libc::c_int) {
    // SAFETY: mallopt takes two integers, touches only the allocator's own settings (under its
    // lock) and is documented as callable at any time; M_ARENA_MAX only bounds arenas made after
    // the call.
    let _accepted = unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
}
