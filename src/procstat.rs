//! Reading a thread's line of `/proc/<tid>/stat` (proc(5)), which the
//! user-space mode uses to tell blocked, exited and kernel threads apart. It
//! lives here, in the library, so that its tests run outside the user mode's
//! allocator.

/// Field `n` (1-based, as in proc(5)) of a /proc/<tid>/stat line: the
/// state (field 3) as its letter, any later field as a number.
pub fn stat_field(stat: &[u8], n: usize) -> Option<u64> {
    // Fields from 3 on follow the last ')' (the command name may hold any).
    let rest = stat.get(stat.iter().rposition(|&b| b == b')')? + 2..)?;
    let field = rest.split(|&b| b == b' ').nth(n.checked_sub(3)?)?;
    match field {
        [state] if n == 3 => Some(*state as u64),
        digits => std::str::from_utf8(digits).ok()?.trim_end().parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_follow_the_last_parenthesis_of_any_name() {
        let line = b"4242 (a b) c)) S 1 4242 4242 0 -1 4194624 90 0 0 0 3 1 0 0 20 0 1 0 123456 \
                     1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 2 0 0 0 0 0\n";
        assert_eq!(stat_field(line, 3), Some(b'S' as u64));
        assert_eq!(stat_field(line, 4), Some(1));
        assert_eq!(stat_field(line, 9), Some(4194624));
        assert_eq!(stat_field(line, 22), Some(123456));
        assert_eq!(
            stat_field(line, 44),
            Some(0),
            "the last field, before the newline"
        );
        assert_eq!(stat_field(line, 45), None);
        assert_eq!(stat_field(line, 2), None, "the name is not a number");
    }

    #[test]
    fn stat_fields_of_a_cut_or_odd_line_are_none() {
        assert_eq!(stat_field(b"", 3), None);
        assert_eq!(stat_field(b"12 (no close paren R 1", 3), None);
        assert_eq!(stat_field(b"12 (x)", 3), None, "nothing after the name");
        assert_eq!(stat_field(b"12 ()) R 1", 3), Some(b'R' as u64));
        assert_eq!(stat_field(b"12 (x) R notanumber", 4), None);
    }
}
