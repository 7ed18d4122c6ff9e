//! How the worker's allocator gives memory back to the OS.
//!
//! mimalloc returns ("purges") pages of freed memory to the OS once they have gone unused for its
//! purge delay, 1 s by default. A worker under steady load frees and reuses the same pages all the
//! time, and a purged page is faulted in and zeroed again by the kernel when next used: in a
//! profile of a worker in `million`'s load, a tenth of its samples were the first touch of a
//! freed block (`_mi_page_malloc_zero`). Purging after a longer delay keeps the pages a busy
//! worker reuses, and still gives memory back after a peak it does not see again (a relist, a
//! burst of CronJobs).
//!
//! `MIMALLOC_PURGE_DELAY` in the environment, which mimalloc reads itself, wins over the
//! worker's default (`-1` never purges, `0` purges at once).

use std::ffi::c_long;
use std::time::Duration;

/// The worker's purge delay unless `MIMALLOC_PURGE_DELAY` is set.
pub const DEFAULT_PURGE_DELAY: Duration = Duration::from_secs(10);

/// mimalloc's own setting, which overrides [`DEFAULT_PURGE_DELAY`].
pub const PURGE_DELAY_ENV: &str = "MIMALLOC_PURGE_DELAY";

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (`mimalloc.h`), which `libmimalloc-sys`
/// does not name; a test checks it against mimalloc's default for it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc 3's default purge delay, in milliseconds.
#[cfg(test)]
const MIMALLOC_DEFAULT_PURGE_DELAY_MS: c_long = 1000;

/// Sets mimalloc's purge delay to `delay` unless [`PURGE_DELAY_ENV`] is set. Returns the delay
/// in force, in milliseconds (negative: never).
pub fn default_purge_delay(delay: Duration) -> c_long {
    if std::env::var_os(PURGE_DELAY_ENV).is_none() {
        let ms = c_long::try_from(delay.as_millis()).unwrap_or(c_long::MAX);
        // SAFETY: mi_option_set stores an integer in mimalloc's option table; any value is valid
        // for the purge delay and mimalloc reads it at each purge.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms) };
    }
    // SAFETY: reads an integer from the option table.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_set_unless_the_environment_sets_one() {
        // The environment is the test process's: it sets no delay unless run with one.
        let from_env: Option<c_long> =
            std::env::var(PURGE_DELAY_ENV).ok().map(|v| v.parse().expect("a number in MIMALLOC_PURGE_DELAY"));
        // SAFETY: reads an integer from the option table.
        let before = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(
            before,
            from_env.unwrap_or(MIMALLOC_DEFAULT_PURGE_DELAY_MS),
            "the option's index is the purge delay's"
        );
        let expected = from_env.unwrap_or(10_000);
        assert_eq!(default_purge_delay(DEFAULT_PURGE_DELAY), expected);
        if std::env::var_os(PURGE_DELAY_ENV).is_none() {
            assert_eq!(default_purge_delay(Duration::from_millis(1500)), 1500, "set again");
        }
    }
}
