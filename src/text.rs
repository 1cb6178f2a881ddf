//! Text that came from a probe, made safe to print.
//!
//! A probe's child writes what it likes: its messages, its stderr, the
//! command lines of processes it leaves behind. Printed raw on preflight's
//! terminal, a control character in any of them is an instruction to the
//! terminal (clear the screen, move the cursor, rewrite a line already
//! printed, set the window title). Every such text is passed through
//! [`printable`] (or [`printable_line`]) where preflight takes it in, so
//! that whatever prints it later (a table, a warning, `select`'s answer,
//! JSON) shows the characters, escaped, and the terminal obeys none.

use std::borrow::Cow;

/// `text` with every control character but newline and tab written as an
/// escape (`\x1b`, `\x07`, `\u{9b}`): C0 controls, DEL and the C1
/// controls, which some terminals obey as the 7-bit sequences they stand
/// for. Text without any is returned as it is.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// [`printable`] for text shown on one line: newlines and carriage
/// returns are escaped too (a newline in a warning would forge a line of
/// preflight's own output).
pub fn printable_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\t')
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && !keep(c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(printable("plain text"), Cow::Borrowed("plain text"));
        assert_eq!(printable("\u{1b}[2Jgone"), "\\x1b[2Jgone");
        assert_eq!(
            printable("bell\u{7} del\u{7f} csi\u{9b}"),
            "bell\\x07 del\\x7f csi\\u{9b}"
        );
        assert_eq!(
            printable("two\nlines\tand a tab\r"),
            "two\nlines\tand a tab\\x0d"
        );
        assert_eq!(printable_line("two\nlines"), "two\\x0alines");
        assert_eq!(printable("naïve ✓"), "naïve ✓");
    }
}
