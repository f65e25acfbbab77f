//! Python regular expressions (bytes patterns, as hg's `re` module reads them) translated
//! into the `regex` crate's syntax with Python's validity rules: what `.hgignore`'s `re:`
//! and glob patterns compile to. This file owns that translation, end to end (a parser of
//! Python's `sre` syntax, its flags, classes and escapes); features the `regex` crate lacks
//! are reported as unsupported, never mis-matched.

use super::load::is_py_space;
use super::{show, MAX_GROUP_NESTING, PY_MAXREPEAT};
use regex::bytes::{Regex, RegexBuilder};

/// Compiles a Python (bytes) regular expression for use with `re.match`; also tells
/// whether Python would match it against the empty string.
pub(crate) fn compile_python_regex(py: &[u8]) -> Result<(Regex, bool), ReError> {
    let (body, uses_non_boundary) = translate_python_regex(py, false)?;
    let regex = build_regex(&body)?;
    let matches_empty = if uses_non_boundary {
        let (body, _) = translate_python_regex(py, true)?;
        build_regex(&body)?.is_match(b"")
    } else {
        regex.is_match(b"")
    };
    Ok((regex, matches_empty))
}

pub(super) fn build_regex(body: &str) -> Result<Regex, ReError> {
    RegexBuilder::new(&format!("\\A(?:{body})"))
        .unicode(false)
        .size_limit(64 << 20)
        .nest_limit(4 * MAX_GROUP_NESTING as u32 + 16)
        .build()
        .map_err(|e| ReError::Unsupported(e.to_string()))
}

#[derive(Debug)]
pub(crate) enum ReError {
    /// Python's `re` would reject the pattern.
    Invalid(String),
    /// Valid for Python, not expressible with the `regex` crate.
    Unsupported(String),
}

pub(super) fn invalid<T>(msg: impl Into<String>) -> Result<T, ReError> {
    Err(ReError::Invalid(msg.into()))
}

pub(super) fn unsupported<T>(msg: impl Into<String>) -> Result<T, ReError> {
    Err(ReError::Unsupported(msg.into()))
}

/// A token of Python's regex tokenizer: a byte, or a backslash and the byte after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tok {
    Ch(u8),
    Esc(u8),
}

/// What the last item of a sequence was, for Python's repeat checks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Last {
    Nothing,
    Assertion,
    Repeat,
    Atom,
    /// A lone `.`.
    Dot,
}

#[derive(Clone, Copy)]
pub(super) enum ClassItem {
    Byte(u8),
    Range(u8, u8),
    Perl(u8),
}

pub(super) const FLAG_I: u8 = 1;
pub(super) const FLAG_M: u8 = 2;
pub(super) const FLAG_S: u8 = 4;
pub(super) const FLAG_X: u8 = 8;
pub(super) const FLAG_A: u8 = 16;
pub(super) const FLAG_L: u8 = 32;
pub(super) const FLAG_T: u8 = 64;
pub(super) const FLAG_U: u8 = 128;
pub(super) const TYPE_FLAGS: u8 = FLAG_A | FLAG_L | FLAG_U;

pub(super) fn flag_bit(c: u8) -> Option<u8> {
    Some(match c {
        b'i' => FLAG_I,
        b'm' => FLAG_M,
        b's' => FLAG_S,
        b'x' => FLAG_X,
        b'a' => FLAG_A,
        b'L' => FLAG_L,
        b't' => FLAG_T,
        b'u' => FLAG_U,
        _ => return None,
    })
}

pub(super) fn rust_flags(bits: u8) -> String {
    let mut s = String::new();
    for (bit, c) in [(FLAG_I, 'i'), (FLAG_M, 'm'), (FLAG_S, 's')] {
        if bits & bit != 0 {
            s.push(c);
        }
    }
    s
}

pub(super) enum Flags {
    Global(u8),
    Scoped(u8, u8),
}

pub(super) enum GroupOutcome {
    Item,
    Comment,
    GlobalFlags(Mode),
}

/// The Python flags that change how the translator reads or emits what follows.
#[derive(Clone, Copy, Default)]
pub(super) struct Mode {
    /// `x`: whitespace and `#` comments are skipped.
    verbose: bool,
    /// `s`: `.` also matches a newline.
    dotall: bool,
}

impl Mode {
    fn with(self, add: u8, del: u8) -> Mode {
        Mode {
            verbose: (self.verbose || add & FLAG_X != 0) && del & FLAG_X == 0,
            dotall: (self.dotall || add & FLAG_S != 0) && del & FLAG_S == 0,
        }
    }
}

/// Translates Python `re` syntax (bytes pattern, Python 3.11 rules) into `regex` syntax,
/// following `re._parser` closely enough to accept and reject the same patterns.
///
/// Returns the translation and whether it uses `\B`. Python's `\B` never matches in an
/// empty string while the `regex` crate's does: `for_empty_input` translates it to something
/// that never matches, for evaluating the pattern against the empty path.
pub(super) fn translate_python_regex(
    src: &[u8],
    for_empty_input: bool,
) -> Result<(String, bool), ReError> {
    let mut t = PyRe {
        src,
        pos: 0,
        out: String::with_capacity(src.len() * 2),
        groups: 0,
        names: Vec::new(),
        open: Vec::new(),
        depth: 0,
        global_mode: Mode::default(),
        for_empty_input,
        uses_non_boundary: false,
        unsupported: None,
        max_cond_ref: 0,
    };
    t.parse_sub(Mode::default(), 0)?;
    if t.pos < src.len() {
        return invalid("unbalanced parenthesis");
    }
    if t.max_cond_ref > t.groups {
        return invalid(format!("invalid group reference {}", t.max_cond_ref));
    }
    if let Some(what) = t.unsupported {
        return unsupported(what);
    }
    Ok((t.out, t.uses_non_boundary))
}

pub(super) struct PyRe<'a> {
    src: &'a [u8],
    pos: usize,
    out: String,
    /// Capturing groups opened so far.
    groups: usize,
    /// Named groups and their numbers.
    names: Vec<(Vec<u8>, usize)>,
    /// Numbers of the capturing groups not closed yet.
    open: Vec<usize>,
    depth: usize,
    /// Flags set by a leading `(?flags)`, for the whole pattern.
    global_mode: Mode,
    for_empty_input: bool,
    uses_non_boundary: bool,
    /// The first construct met that the regex crate cannot express.
    unsupported: Option<String>,
    /// The highest group number a conditional refers to (checked once all are known).
    max_cond_ref: usize,
}

impl PyRe<'_> {
    fn peek(&self) -> Result<Option<Tok>, ReError> {
        match self.src.get(self.pos) {
            None => Ok(None),
            Some(b'\\') => match self.src.get(self.pos + 1) {
                None => invalid("bad escape (end of pattern)"),
                Some(&c) => Ok(Some(Tok::Esc(c))),
            },
            Some(&c) => Ok(Some(Tok::Ch(c))),
        }
    }

    fn bump(&mut self, t: Tok) {
        self.pos += match t {
            Tok::Ch(_) => 1,
            Tok::Esc(_) => 2,
        };
    }

    fn next(&mut self) -> Result<Option<Tok>, ReError> {
        let t = self.peek()?;
        if let Some(t) = t {
            self.bump(t);
        }
        Ok(t)
    }

    fn eat(&mut self, c: u8) -> Result<bool, ReError> {
        if self.peek()? == Some(Tok::Ch(c)) {
            self.pos += 1;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Consumes up to `max` plain tokens satisfying `pred`.
    fn take_while(&mut self, max: usize, pred: impl Fn(u8) -> bool) -> Result<Vec<u8>, ReError> {
        let mut got = Vec::new();
        while got.len() < max {
            match self.peek()? {
                Some(Tok::Ch(c)) if pred(c) => {
                    self.pos += 1;
                    got.push(c);
                }
                _ => break,
            }
        }
        Ok(got)
    }

    fn push_byte(&mut self, b: u8) {
        if b.is_ascii_alphanumeric() {
            self.out.push(b as char);
        } else {
            self.out.push_str(&format!("\\x{b:02X}"));
        }
    }

    fn parse_sub(&mut self, mode: Mode, nested: usize) -> Result<(), ReError> {
        let mut mode = mode;
        let mut first = nested == 0;
        loop {
            self.parse_seq(mode, first)?;
            first = false;
            if !self.eat(b'|')? {
                return Ok(());
            }
            self.out.push('|');
            if nested == 0 {
                mode = self.global_mode;
            }
        }
    }

    fn parse_seq(&mut self, mode: Mode, first: bool) -> Result<(), ReError> {
        let mut mode = mode;
        let mut last = Last::Nothing;
        let mut any_item = false;
        loop {
            let Some(tok) = self.peek()? else {
                return Ok(());
            };
            if tok == Tok::Ch(b'|') || tok == Tok::Ch(b')') {
                return Ok(());
            }
            self.bump(tok);
            if mode.verbose {
                match tok {
                    Tok::Ch(c) if is_py_space(c) => continue,
                    Tok::Ch(b'#') => {
                        while !matches!(self.next()?, None | Some(Tok::Ch(b'\n'))) {}
                        continue;
                    }
                    _ => {}
                }
            }
            match tok {
                Tok::Esc(c) => {
                    last = self.escape(c)?;
                    any_item = true;
                }
                Tok::Ch(b'[') => {
                    self.class()?;
                    last = Last::Atom;
                    any_item = true;
                }
                Tok::Ch(c @ (b'*' | b'+' | b'?' | b'{')) => {
                    let (min, max) = match c {
                        b'?' => (0, Some(1)),
                        b'*' => (0, None),
                        b'+' => (1, None),
                        _ => match self.brace_repeat()? {
                            Some(r) => r,
                            None => {
                                self.push_byte(b'{');
                                last = Last::Atom;
                                any_item = true;
                                continue;
                            }
                        },
                    };
                    match last {
                        Last::Nothing | Last::Assertion => return invalid("nothing to repeat"),
                        Last::Repeat => return invalid("multiple repeat"),
                        Last::Atom | Last::Dot => {}
                    }
                    match (min, max) {
                        (0, Some(1)) => self.out.push('?'),
                        (0, None) => self.out.push('*'),
                        (1, None) => self.out.push('+'),
                        (m, None) => self.out.push_str(&format!("{{{m},}}")),
                        (m, Some(n)) if m == n => self.out.push_str(&format!("{{{m}}}")),
                        (m, Some(n)) => self.out.push_str(&format!("{{{m},{n}}}")),
                    }
                    if self.eat(b'?')? {
                        self.out.push('?');
                    } else if self.eat(b'+')? {
                        // Possessive. `.{m,}+` (what hg makes of a relre starting with '+')
                        // eats the whole line: the same as `.{m,}` that must end there.
                        if last == Last::Dot && max.is_none() {
                            self.out
                                .push_str(if mode.dotall { "\\z" } else { "(?m:$)" });
                        } else {
                            self.note_unsupported("possessive quantifiers are not supported");
                        }
                    }
                    last = Last::Repeat;
                }
                Tok::Ch(b'.') => {
                    self.out.push('.');
                    last = Last::Dot;
                    any_item = true;
                }
                Tok::Ch(b'(') => match self.group(mode, first && !any_item)? {
                    GroupOutcome::Item => {
                        last = Last::Atom;
                        any_item = true;
                    }
                    GroupOutcome::Comment => {}
                    GroupOutcome::GlobalFlags(m) => mode = m,
                },
                Tok::Ch(b'^') => {
                    self.out.push('^');
                    last = Last::Assertion;
                    any_item = true;
                }
                Tok::Ch(b'$') => {
                    self.out.push('$');
                    last = Last::Assertion;
                    any_item = true;
                }
                Tok::Ch(c) => {
                    self.push_byte(c);
                    last = Last::Atom;
                    any_item = true;
                }
            }
        }
    }

    /// After a `{`: the repeat bounds, or None (position restored) when it is a literal.
    fn brace_repeat(&mut self) -> Result<Option<(u64, Option<u64>)>, ReError> {
        if self.peek()? == Some(Tok::Ch(b'}')) {
            return Ok(None);
        }
        let here = self.pos;
        let lo = self.take_while(usize::MAX, |c| c.is_ascii_digit())?;
        let hi = if self.eat(b',')? {
            self.take_while(usize::MAX, |c| c.is_ascii_digit())?
        } else {
            lo.clone()
        };
        if !self.eat(b'}')? {
            self.pos = here;
            return Ok(None);
        }
        let number = |d: &[u8]| -> Result<u64, ReError> {
            let mut v: u64 = 0;
            for &c in d {
                v = v.saturating_mul(10).saturating_add(u64::from(c - b'0'));
            }
            if v >= PY_MAXREPEAT {
                return invalid("the repetition number is too large");
            }
            Ok(v)
        };
        let min = if lo.is_empty() { 0 } else { number(&lo)? };
        let max = if hi.is_empty() {
            None
        } else {
            Some(number(&hi)?)
        };
        if let Some(max) = max {
            if max < min {
                return invalid("min repeat greater than max repeat");
            }
        }
        Ok(Some((min, max)))
    }

    /// An escape outside a class.
    fn escape(&mut self, c: u8) -> Result<Last, ReError> {
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

    fn hex_escape(&mut self) -> Result<u8, ReError> {
        let digits = self.take_while(2, |c| c.is_ascii_hexdigit())?;
        if digits.len() != 2 {
            return invalid("incomplete escape \\x");
        }
        let s = std::str::from_utf8(&digits).map_err(|_| ReError::Invalid("bad escape".into()))?;
        u8::from_str_radix(s, 16).map_err(|_| ReError::Invalid("bad escape".into()))
    }

    /// An escape inside a class.
    fn class_escape(&mut self, c: u8) -> Result<ClassItem, ReError> {
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
    fn class(&mut self) -> Result<(), ReError> {
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
    fn get_until(&mut self, term: u8) -> Result<Vec<u8>, ReError> {
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

    fn note_unsupported(&mut self, what: &str) {
        if self.unsupported.is_none() {
            self.unsupported = Some(what.to_string());
        }
    }

    /// The rest of a conditional group `(?(cond)yes|no)`, after `(?(`: only validated.
    fn conditional(&mut self, mode: Mode) -> Result<GroupOutcome, ReError> {
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
    fn group(&mut self, mode: Mode, at_start: bool) -> Result<GroupOutcome, ReError> {
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
    fn flags(&mut self, first: u8) -> Result<Flags, ReError> {
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
