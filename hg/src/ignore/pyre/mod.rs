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
}

mod escapes;
mod groups;
