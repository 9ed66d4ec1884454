//! The Go scheduling policy as a pure model (no kernel dependency).

/// proc.go randomOrder.reset: the strides coprime with `count`, so a walk
/// `pos = (pos + inc) % count` visits every P once.
pub fn coprimes(count: u32) -> Vec<u32> {
    fn gcd(mut a: u32, mut b: u32) -> u32 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    (1..=count.max(1)).filter(|&i| gcd(i, count) == 1).collect()
}
