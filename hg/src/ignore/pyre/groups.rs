//! Groups of a Python regular expression (named, non-capturing, lookarounds, conditionals)
//! and inline flags, translated.

use super::*;

impl PyRe<'_> {
    /// The rest of a conditional group `(?(cond)yes|no)`, after `(?(`: only validated.
    pub(super) fn conditional(&mut self, mode: Mode) -> Result<GroupOutcome, ReError> {
        let cond = self.get_until(b')')?;
        if check_group_name(&cond).is_ok() {
            if !self.names.iter().any(|(n, _)| *n == cond) {
                return invalid(format!("unknown group name '{}'", show(&cond)));
            }
        } else if cond.iter().all(u8::is_ascii_digit) {
            let group = cond.iter().fold(0usize, |v, &d| {
                v.saturating_mul(10).saturating_add(usize::from(d - b'0'))
            });
            if group == 0 {
                return invalid("bad group number");
            }
            self.max_cond_ref = self.max_cond_ref.max(group);
        } else {
            return invalid(format!("bad character in group name '{}'", show(&cond)));
        }
        self.depth += 1;
        if self.depth > MAX_GROUP_NESTING {
            return unsupported("groups nested too deeply");
        }
        self.parse_seq(mode, false)?;
        if self.eat(b'|')? {
            self.parse_seq(mode, false)?;
            if self.peek()? == Some(Tok::Ch(b'|')) {
                return invalid("conditional backref with more than two branches");
            }
        }
        if !self.eat(b')')? {
            return invalid("missing ), unterminated subpattern");
        }
        self.depth -= 1;
        Ok(GroupOutcome::Item)
    }

    /// A group, after its `(`.
    pub(super) fn group(&mut self, mode: Mode, at_start: bool) -> Result<GroupOutcome, ReError> {
        let mut capture = true;
        let mut add = 0u8;
        let mut del = 0u8;
        if self.eat(b'?')? {
            let Some(tok) = self.next()? else {
                return invalid("unexpected end of pattern");
            };
            let c = match tok {
                Tok::Ch(c) => c,
                Tok::Esc(c) => {
                    return invalid(format!("unknown extension ?\\{}", c as char));
                }
            };
            match c {
                b'P' => {
                    if self.eat(b'<')? {
                        let name = self.get_until(b'>')?;
                        check_group_name(&name)?;
                        if self.names.iter().any(|(n, _)| *n == name) {
                            return invalid("redefinition of group name");
                        }
                        self.names.push((name, self.groups + 1));
                    } else if self.eat(b'=')? {
                        let name = self.get_until(b')')?;
                        check_group_name(&name)?;
                        let Some(&(_, group)) = self.names.iter().find(|(n, _)| *n == name) else {
                            return invalid(format!("unknown group name '{}'", show(&name)));
                        };
                        if self.open.contains(&group) {
                            return invalid("cannot refer to an open group");
                        }
                        self.note_unsupported("backreferences are not supported");
                        return Ok(GroupOutcome::Item);
                    } else {
                        return match self.next()? {
                            None => invalid("unexpected end of pattern"),
                            Some(_) => invalid("unknown extension ?P"),
                        };
                    }
                }
                b':' => capture = false,
                b'#' => loop {
                    match self.next()? {
                        None => return invalid("missing ), unterminated comment"),
                        Some(Tok::Ch(b')')) => return Ok(GroupOutcome::Comment),
                        Some(_) => {}
                    }
                },
                // What the regex crate lacks is parsed on, so that Python's verdict on the
                // validity of the whole pattern is still known.
                b'=' | b'!' => {
                    self.note_unsupported("look-ahead assertions are not supported");
                    capture = false;
                }
                b'<' => match self.next()? {
                    Some(Tok::Ch(b'=' | b'!')) => {
                        self.note_unsupported("look-behind assertions are not supported");
                        capture = false;
                    }
                    None => return invalid("unexpected end of pattern"),
                    Some(_) => return invalid("unknown extension ?<"),
                },
                b'(' => {
                    self.note_unsupported("conditional groups are not supported");
                    return self.conditional(mode);
                }
                b'>' => {
                    self.note_unsupported("atomic groups are not supported");
                    capture = false;
                }
                c if c == b'-' || flag_bit(c).is_some() => match self.flags(c)? {
                    Flags::Global(bits) => {
                        if !at_start {
                            return invalid("global flags not at the start of the expression");
                        }
                        let f = rust_flags(bits);
                        if !f.is_empty() {
                            self.out.push_str(&format!("(?{f})"));
                        }
                        self.global_mode = self.global_mode.with(bits, 0);
                        return Ok(GroupOutcome::GlobalFlags(mode.with(bits, 0)));
                    }
                    Flags::Scoped(a, d) => {
                        add = a;
                        del = d;
                        capture = false;
                    }
                },
                c => return invalid(format!("unknown extension ?{}", c as char)),
            }
        }
        if capture {
            self.groups += 1;
            self.open.push(self.groups);
        }
        self.depth += 1;
        if self.depth > MAX_GROUP_NESTING {
            return unsupported("groups nested too deeply");
        }
        let sub_mode = mode.with(add, del);
        let (a, d) = (rust_flags(add), rust_flags(del));
        self.out.push_str("(?");
        self.out.push_str(&a);
        if !d.is_empty() {
            self.out.push('-');
            self.out.push_str(&d);
        }
        self.out.push(':');
        self.parse_sub(sub_mode, 1)?;
        if !self.eat(b')')? {
            return invalid("missing ), unterminated subpattern");
        }
        self.out.push(')');
        self.depth -= 1;
        if capture {
            self.open.pop();
        }
        Ok(GroupOutcome::Item)
    }

    /// Python's `_parse_flags`, after `(?` and its first flag character `first`.
    pub(super) fn flags(&mut self, first: u8) -> Result<Flags, ReError> {
        let mut add = 0u8;
        let mut del = 0u8;
        let mut c = first;
        if c != b'-' {
            loop {
                if c == b'u' {
                    return invalid("bad inline flags: cannot use 'u' flag with a bytes pattern");
                }
                let f = flag_bit(c).unwrap_or(0);
                add |= f;
                if f & TYPE_FLAGS != 0 && add & TYPE_FLAGS != f {
                    return invalid("bad inline flags: flags 'a', 'u' and 'L' are incompatible");
                }
                match self.next()? {
                    None => return invalid("missing -, : or )"),
                    Some(Tok::Ch(n @ (b')' | b'-' | b':'))) => {
                        c = n;
                        break;
                    }
                    Some(Tok::Ch(n)) if flag_bit(n).is_some() => c = n,
                    Some(Tok::Ch(n)) if n.is_ascii_alphabetic() => return invalid("unknown flag"),
                    Some(_) => return invalid("missing -, : or )"),
                }
            }
        }
        if c == b')' {
            return Ok(Flags::Global(add));
        }
        if add & FLAG_T != 0 {
            return invalid("bad inline flags: cannot turn on global flag");
        }
        if c == b'-' {
            let mut n = match self.next()? {
                None => return invalid("missing flag"),
                Some(Tok::Ch(n)) if flag_bit(n).is_some() => n,
                Some(Tok::Ch(n)) if n.is_ascii_alphabetic() => return invalid("unknown flag"),
                Some(_) => return invalid("missing flag"),
            };
            loop {
                let f = flag_bit(n).unwrap_or(0);
                if f & TYPE_FLAGS != 0 {
                    return invalid("bad inline flags: cannot turn off flags 'a', 'u' and 'L'");
                }
                del |= f;
                match self.next()? {
                    None => return invalid("missing :"),
                    Some(Tok::Ch(b':')) => break,
                    Some(Tok::Ch(m)) if flag_bit(m).is_some() => n = m,
                    Some(Tok::Ch(m)) if m.is_ascii_alphabetic() => return invalid("unknown flag"),
                    Some(_) => return invalid("missing :"),
                }
            }
        }
        if del & FLAG_T != 0 {
            return invalid("bad inline flags: cannot turn off global flag");
        }
        if add & del != 0 {
            return invalid("bad inline flags: flag turned on and off");
        }
        Ok(Flags::Scoped(add, del))
    }
}

/// Python's `str.isidentifier` on a latin-1 decoded group name.
pub(super) fn check_group_name(name: &[u8]) -> Result<(), ReError> {
    let start = |c: u8| {
        c.is_ascii_alphabetic()
            || c == b'_'
            || matches!(c, 0xaa | 0xb5 | 0xba)
            || (c >= 0xc0 && c != 0xd7 && c != 0xf7)
    };
    let cont = |c: u8| start(c) || c.is_ascii_digit() || c == 0xb7;
    match name.split_first() {
        Some((&f, rest)) if start(f) && rest.iter().all(|&c| cont(c)) => Ok(()),
        _ => invalid(format!("bad character in group name '{}'", show(name))),
    }
}
