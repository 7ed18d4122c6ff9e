//! Seeds for jitter that need no OS randomness. The image's processes can run where neither the
//! getrandom syscall nor `/dev/urandom` is there: the image test found a worker panicking at
//! start on `rand`'s ThreadRng ("could not initialize ThreadRng: No such file or directory").
//! Jitter only has to differ between processes and moments, which the clock and the process id
//! give.

use std::time::{SystemTime, UNIX_EPOCH};

/// A seed that differs between processes and calls.
pub fn seed() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    // splitmix64's finalizer spreads the clock's low-entropy bits over the word.
    let mut z = nanos ^ u64::from(std::process::id()).rotate_left(32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fraction in [0, 1) from [`seed`].
pub fn fraction() -> f64 {
    (seed() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn fractions_stay_in_range_and_vary() {
        let seen: std::collections::BTreeSet<u64> = (0..64)
            .map(|_| {
                let f = super::fraction();
                assert!((0.0..1.0).contains(&f), "{f}");
                f.to_bits()
            })
            .collect();
        assert!(seen.len() > 1, "the clock moves between calls");
    }
}
