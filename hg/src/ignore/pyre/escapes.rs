//! Escapes and character classes of a Python regular expression, translated.

use super::*;

impl PyRe<'_> {
    /// An escape outside a class.
    pub(super) fn escape(&mut self, c: u8) -> Result<Last, ReError> {
        let lit = |t: &mut Self, b: u8| -> Result<Last, ReError> {
            t.push_byte(b);
            Ok(Last::Atom)
        };
        match c {
            b'B' => {
                self.uses_non_boundary = true;
                self.out.push_str(if self.for_empty_input {
                    "(?:\\b\\B)"
                } else {
                    "\\B"
                });
                Ok(Last::Assertion)
            }
            b'A' | b'b' => {
                self.out.push('\\');
                self.out.push(c as char);
                Ok(Last::Assertion)
            }
            b'Z' => {
                self.out.push_str("\\z");
                Ok(Last::Assertion)
            }
            b'd' | b'D' | b's' | b'S' | b'w' | b'W' => {
                self.out.push('\\');
                self.out.push(c as char);
                Ok(Last::Atom)
            }
            b'a' => lit(self, 0x07),
            b'f' => lit(self, 0x0c),
            b'n' => lit(self, b'\n'),
            b'r' => lit(self, b'\r'),
            b't' => lit(self, b'\t'),
            b'v' => lit(self, 0x0b),
            b'\\' => lit(self, b'\\'),
            b'x' => {
                let b = self.hex_escape()?;
                lit(self, b)
            }
            b'0' => {
                let digits = self.take_while(2, |c| (b'0'..=b'7').contains(&c))?;
                let v = digits
                    .iter()
                    .fold(0u32, |v, &d| v * 8 + u32::from(d - b'0'));
                lit(self, v as u8)
            }
            b'1'..=b'9' => {
                let mut digits = vec![c];
                if let Some(Tok::Ch(d)) = self.peek()? {
                    if d.is_ascii_digit() {
                        self.pos += 1;
                        digits.push(d);
                        let octal = |x: u8| (b'0'..=b'7').contains(&x);
                        if let Some(Tok::Ch(e)) = self.peek()? {
                            if octal(c) && octal(d) && octal(e) {
                                self.pos += 1;
                                let v = [c, d, e]
                                    .iter()
                                    .fold(0u32, |v, &x| v * 8 + u32::from(x - b'0'));
                                if v > 0o377 {
                                    return invalid(format!(
                                        "octal escape value \\{}{}{} outside of range 0-0o377",
                                        c as char, d as char, e as char
                                    ));
                                }
                                return lit(self, v as u8);
                            }
                        }
                    }
                }
                let group = digits
                    .iter()
                    .fold(0usize, |v, &x| v * 10 + usize::from(x - b'0'));
                if group <= self.groups {
                    if self.open.contains(&group) {
                        return invalid("cannot refer to an open group");
                    }
                    self.note_unsupported("backreferences are not supported");
                    Ok(Last::Atom)
                } else {
                    invalid(format!("invalid group reference {group}"))
                }
            }
            c if c.is_ascii_alphabetic() => invalid(format!("bad escape \\{}", c as char)),
            c => lit(self, c),
        }
    }

    pub(super) fn hex_escape(&mut self) -> Result<u8, ReError> {
        let digits = self.take_while(2, |c| c.is_ascii_hexdigit())?;
        if digits.len() != 2 {
            return invalid("incomplete escape \\x");
        }
        let s = std::str::from_utf8(&digits).map_err(|_| ReError::Invalid("bad escape".into()))?;
        u8::from_str_radix(s, 16).map_err(|_| ReError::Invalid("bad escape".into()))
    }

    /// An escape inside a class.
    pub(super) fn class_escape(&mut self, c: u8) -> Result<ClassItem, ReError> {
        Ok(ClassItem::Byte(match c {
            b'a' => 0x07,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0b,
            b'\\' => b'\\',
            b'd' | b'D' | b's' | b'S' | b'w' | b'W' => return Ok(ClassItem::Perl(c)),
            b'x' => self.hex_escape()?,
            b'0'..=b'7' => {
                let more = self.take_while(2, |c| (b'0'..=b'7').contains(&c))?;
                let v = std::iter::once(c)
                    .chain(more)
                    .fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                if v > 0o377 {
                    return invalid("octal escape value outside of range 0-0o377");
                }
                v as u8
            }
            c if c.is_ascii_alphanumeric() => {
                return invalid(format!("bad escape \\{}", c as char));
            }
            c => c,
        }))
    }

    /// A character class, after its `[`.
    pub(super) fn class(&mut self) -> Result<(), ReError> {
        let negate = self.eat(b'^')?;
        let mut items: Vec<ClassItem> = Vec::new();
        loop {
            let Some(tok) = self.next()? else {
                return invalid("unterminated character set");
            };
            if tok == Tok::Ch(b']') && !items.is_empty() {
                break;
            }
            let code1 = match tok {
                Tok::Esc(c) => self.class_escape(c)?,
                Tok::Ch(c) => ClassItem::Byte(c),
            };
            if self.eat(b'-')? {
                let Some(that) = self.next()? else {
                    return invalid("unterminated character set");
                };
                if that == Tok::Ch(b']') {
                    items.push(code1);
                    items.push(ClassItem::Byte(b'-'));
                    break;
                }
                let code2 = match that {
                    Tok::Esc(c) => self.class_escape(c)?,
                    Tok::Ch(c) => ClassItem::Byte(c),
                };
                match (code1, code2) {
                    (ClassItem::Byte(lo), ClassItem::Byte(hi)) if lo <= hi => {
                        items.push(ClassItem::Range(lo, hi));
                    }
                    _ => return invalid("bad character range"),
                }
            } else {
                items.push(code1);
            }
        }
        self.out.push('[');
        if negate {
            self.out.push('^');
        }
        for item in items {
            match item {
                ClassItem::Byte(b) => self.out.push_str(&format!("\\x{b:02X}")),
                ClassItem::Range(lo, hi) => {
                    self.out.push_str(&format!("\\x{lo:02X}-\\x{hi:02X}"));
                }
                ClassItem::Perl(c) => {
                    self.out.push('\\');
                    self.out.push(c as char);
                }
            }
        }
        self.out.push(']');
        Ok(())
    }

    /// Python's `getuntil`: a group name up to `term`.
    pub(super) fn get_until(&mut self, term: u8) -> Result<Vec<u8>, ReError> {
        let mut name = Vec::new();
        loop {
            match self.next()? {
                None if name.is_empty() => return invalid("missing group name"),
                None => {
                    return invalid(format!("missing {}, unterminated name", term as char));
                }
                Some(Tok::Ch(c)) if c == term => {
                    if name.is_empty() {
                        return invalid("missing group name");
                    }
                    return Ok(name);
                }
                Some(Tok::Ch(c)) => name.push(c),
                Some(Tok::Esc(c)) => name.extend_from_slice(&[b'\\', c]),
            }
        }
    }

    pub(super) fn note_unsupported(&mut self, what: &str) {
        if self.unsupported.is_none() {
            self.unsupported = Some(what.to_string());
        }
    }
}
