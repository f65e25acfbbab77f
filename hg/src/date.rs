//! Commit dates as hg reads them: a port of Mercurial 6.3's `dateutil.parsedate` (the
//! `-d/--date` argument of `hg commit`) and `dateutil.makedate` (the date of a commit made
//! without `-d`).
//!
//! A date is `(unixtime, offset)`, the offset in seconds **west** of UTC as hg stores it
//! (UTC+1 is `-3600`). Accepted, exactly as hg accepts them:
//!
//! * `UNIXTIME OFFSET`: two Python integers separated by one space (`"0 0"`,
//!   `"1700000000 -3600"`, `"1_0 +5"`);
//! * `now`, `today` (midnight, local time) and `yesterday`;
//! * every format of hg's `defaultdateformats` (`2026-11-21 10:00:00`, `2026-11-21T10:00`,
//!   `11/21/2026`, `Sat Nov 21 10:00:00 2026`, `Nov 21`, `10:00pm`, ...), matched the way
//!   Python's `time.strptime` matches them (its regular expressions, case-insensitive, with
//!   its backtracking order), optionally followed by a zone: `GMT`/`UTC`, `+hhmm`/`-hhmm`,
//!   ISO `Z` after a digit, or `+hh:mm`. Missing fields come from hg's defaults: finer
//!   fields than the finest one given are zero (or 1), coarser ones are today's.
//!
//! Without a zone the local time zone applies (`mktime`, so `TZ` is honoured). The result
//! must fit in 32 bits and the offset in UTC-14..UTC+12 (hg's checks). Errors carry hg's
//! exact text ([`DateError::hg_message`]): `hg: parse error: invalid date: 'xyz'`.

use regex::Regex;
use std::sync::OnceLock;
use thiserror::Error;

/// Why a date was refused, with hg's wording.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DateError {
    /// No format matched (the stripped input is kept, shown as Python's `repr`).
    #[error("invalid date: {}", py_bytes_repr(.0))]
    Invalid(Vec<u8>),
    /// The time does not fit in a signed 32-bit integer (the value in decimal).
    #[error("date exceeds 32 bits: {0}")]
    Exceeds32Bits(String),
    /// The offset is outside -50400..=43200 (the value in decimal).
    #[error("impossible time zone offset: {0}")]
    ImpossibleOffset(String),
    /// The clock is before 1970 (`now`).
    #[error("negative timestamp: {0}")]
    NegativeTimestamp(i64),
}

impl DateError {
    /// Everything hg prints on stderr for this error (exit status 255): parse errors are
    /// `hg: parse error: ...`, the clock error is an abort with a hint.
    pub fn hg_message(&self) -> String {
        match self {
            DateError::NegativeTimestamp(_) => format!("abort: {self}\n(check your clock)\n"),
            _ => format!("hg: parse error: {self}\n"),
        }
    }
}

/// Python's `repr()` of a byte string without the `b` prefix (what hg's `%r` of a
/// `bytestr` prints): single quotes unless the text has `'` and no `"`, `\t \n \r`, `\\`,
/// the quote escaped, other bytes outside printable ASCII as `\xhh`.
pub fn py_bytes_repr(s: &[u8]) -> String {
    let quote = if s.contains(&b'\'') && !s.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote as char);
    for &b in s {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if b == quote => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote as char);
    out
}

/// hg's `defaultdateformats`, in its order (the first that matches wins).
const DEFAULT_FORMATS: [&str; 31] = [
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%dT%H%M%S",
    "%Y-%m-%dT%H%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H%M%S",
    "%Y-%m-%d %H%M",
    "%Y-%m-%d %I:%M:%S%p",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %I:%M%p",
    "%Y-%m-%d",
    "%m-%d",
    "%m/%d",
    "%m/%d/%y",
    "%m/%d/%Y",
    "%a %b %d %H:%M:%S %Y",
    "%a %b %d %I:%M:%S%p %Y",
    "%a, %d %b %Y %H:%M:%S",
    "%b %d %H:%M:%S %Y",
    "%b %d %I:%M:%S%p %Y",
    "%b %d %H:%M:%S",
    "%b %d %I:%M:%S%p",
    "%b %d %H:%M",
    "%b %d %I:%M%p",
    "%b %d %Y",
    "%b %d",
    "%H:%M:%S",
    "%I:%M:%S%p",
    "%H:%M",
    "%I:%M%p",
];

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// The current time and the local zone's offset at that time, as hg's `makedate()`
/// records a commit made without `-d` (whole seconds, truncated).
pub fn now() -> (i64, i32) {
    let t = match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    (t, local_offset_west(t))
}

/// The date of a commit: `hg commit` parses `-d` only when it is given and not empty,
/// and uses [`now`] otherwise.
pub fn commit_date(arg: Option<&str>) -> Result<(i64, i32), DateError> {
    match arg {
        Some(s) if !s.is_empty() => parse_date(s),
        _ => checked_now(),
    }
}

/// `makedate()`: [`now`], refusing a clock before 1970 as hg does.
fn checked_now() -> Result<(i64, i32), DateError> {
    let (t, tz) = now();
    if t < 0 {
        return Err(DateError::NegativeTimestamp(t));
    }
    Ok((t, tz))
}

/// Parses a date exactly as hg's `dateutil.parsedate(date)` (with its default formats and
/// no bias). An empty string is `(0, 0)`, as in hg.
pub fn parse_date(date: &str) -> Result<(i64, i32), DateError> {
    if date.is_empty() {
        return Ok((0, 0));
    }
    let mut date: Vec<u8> = strip_ascii(date.as_bytes()).to_vec();
    if date == b"now" {
        return checked_now();
    }
    if date == b"today" || date == b"yesterday" {
        let (t, tz) = now();
        let (y, m, d) = civil_from_days((t - tz as i64).div_euclid(86400));
        let (_, m, d) = if date == b"yesterday" {
            civil_from_days(days_from_civil(y, m, d) - 1)
        } else {
            (y, m, d)
        };
        date = format!("{} {d:02}", capitalized(MONTHS[(m - 1) as usize])).into_bytes();
    }
    let parsed = match split_unixtime(&date) {
        Some(pair) => pair,
        None => {
            let (now_t, now_tz) = now();
            let local = now_t - now_tz as i64;
            let (y, mo, d) = civil_from_days(local.div_euclid(86400));
            let secs = local.rem_euclid(86400);
            let today = Fields {
                d: format!("{d:02}"),
                m: format!("{mo:02}"),
                y: format!("{:02}", y.rem_euclid(100)),
                h: format!("{:02}", secs / 3600),
                min: format!("{:02}", secs / 60 % 60),
                s: format!("{:02}", secs % 60),
            };
            let found = DEFAULT_FORMATS
                .iter()
                .find_map(|f| strdate(&date, f, &today));
            match found {
                Some((when, offset)) => (PyInt::from(when), PyInt::from(offset)),
                None => return Err(DateError::Invalid(date)),
            }
        }
    };
    let (when, offset) = parsed;
    let when_v = match when.value() {
        Some(v) if (-0x8000_0000..=0x7fff_ffff).contains(&v) => v,
        _ => return Err(DateError::Exceeds32Bits(when.to_string())),
    };
    let offset_v = match offset.value() {
        Some(v) if (-50400..=43200).contains(&v) => v,
        _ => return Err(DateError::ImpossibleOffset(offset.to_string())),
    };
    Ok((when_v, offset_v as i32))
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// Python's `bytes.strip()`: ASCII whitespace at both ends.
pub fn strip_ascii(s: &[u8]) -> &[u8] {
    rstrip_ascii(lstrip_ascii(s))
}

fn lstrip_ascii(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !is_py_space(*b)).unwrap_or(s.len());
    &s[start..]
}

pub fn rstrip_ascii(s: &[u8]) -> &[u8] {
    let end = s
        .iter()
        .rposition(|b| !is_py_space(*b))
        .map_or(0, |i| i + 1);
    &s[..end]
}

fn is_py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// A Python integer as `int(bytes)` reads it: kept as sign and decimal digits, so that an
/// out-of-range value is still printed as hg prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PyInt {
    negative: bool,
    /// Decimal digits without leading zeros ("0" for zero).
    digits: String,
}

impl PyInt {
    /// `int(s)` for bytes: surrounding whitespace, an optional sign, ASCII digits with
    /// single underscores between them.
    fn parse(s: &[u8]) -> Option<PyInt> {
        let s = strip_ascii(s);
        let (negative, body) = match s.first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        if body.is_empty() || !body[0].is_ascii_digit() || !body[body.len() - 1].is_ascii_digit() {
            return None;
        }
        let mut digits = String::with_capacity(body.len());
        let mut prev_underscore = false;
        for &b in body {
            match b {
                b'0'..=b'9' => {
                    digits.push(b as char);
                    prev_underscore = false;
                }
                b'_' if !prev_underscore => prev_underscore = true,
                _ => return None,
            }
        }
        let trimmed = digits.trim_start_matches('0');
        let digits = if trimmed.is_empty() { "0" } else { trimmed }.to_owned();
        let negative = negative && digits != "0";
        Some(PyInt { negative, digits })
    }

    /// The value, when it fits in an i64.
    fn value(&self) -> Option<i64> {
        if self.digits.len() > 18 {
            return None;
        }
        let v: i64 = self.digits.parse().ok()?;
        Some(if self.negative { -v } else { v })
    }
}

impl From<i64> for PyInt {
    fn from(v: i64) -> PyInt {
        PyInt {
            negative: v < 0,
            digits: v.unsigned_abs().to_string(),
        }
    }
}

impl std::fmt::Display for PyInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        f.write_str(&self.digits)
    }
}

/// `when, offset = map(int, date.split(b' '))`: exactly two integers.
fn split_unixtime(date: &[u8]) -> Option<(PyInt, PyInt)> {
    let mut parts = date.split(|&b| b == b' ');
    let when = PyInt::parse(parts.next()?)?;
    let offset = PyInt::parse(parts.next()?)?;
    if parts.next().is_some() {
        return None;
    }
    Some((when, offset))
}

/// Today's values of the fields a format may leave out (hg's `defaults[part][1]`, from
/// `datestr(now, '%d')` etc.).
struct Fields {
    d: String,
    m: String,
    y: String,
    h: String,
    min: String,
    s: String,
}

/// `parsetimezone`: a trailing zone, if any, and the rest of the string.
fn parse_timezone(s: &[u8]) -> (Option<i64>, &[u8]) {
    let n = s.len();
    if s.ends_with(b"GMT") || s.ends_with(b"UTC") {
        return (Some(0), rstrip_ascii(&s[..n - 3]));
    }
    let digits = |t: &[u8]| !t.is_empty() && t.iter().all(u8::is_ascii_digit);
    let num = |t: &[u8]| t.iter().fold(0i64, |a, b| a * 10 + (b - b'0') as i64);
    if n >= 5 && matches!(s[n - 5], b'+' | b'-') && digits(&s[n - 4..]) {
        let sign = if s[n - 5] == b'+' { 1 } else { -1 };
        let (hours, minutes) = (num(&s[n - 4..n - 2]), num(&s[n - 2..]));
        return (
            Some(-sign * (hours * 60 + minutes) * 60),
            rstrip_ascii(&s[..n - 5]),
        );
    }
    if s.ends_with(b"Z") && n >= 2 && s[n - 2].is_ascii_digit() {
        return (Some(0), &s[..n - 1]);
    }
    if n >= 6
        && matches!(s[n - 6], b'+' | b'-')
        && s[n - 3] == b':'
        && digits(&s[n - 5..n - 3])
        && digits(&s[n - 2..])
    {
        let sign = if s[n - 6] == b'+' { 1 } else { -1 };
        let (hours, minutes) = (num(&s[n - 5..n - 3]), num(&s[n - 2..]));
        return (Some(-sign * (hours * 60 + minutes) * 60), &s[..n - 6]);
    }
    (None, s)
}

/// `strdate(string, format, defaults)`: `None` where Python raises ValueError or
/// OverflowError (the next format is then tried).
fn strdate(string: &[u8], format: &str, today: &Fields) -> Option<(i64, i64)> {
    let (offset, date) = parse_timezone(string);
    let mut date = date.to_vec();
    let mut format = format.to_owned();
    let mut usenow = false;
    // Decreasing specificity: a missing field finer than every given one takes its
    // "zero", a missing coarser one takes today's value.
    let parts: [(&str, &str, &str); 6] = [
        ("S", "00", &today.s),
        ("M", "00", &today.min),
        ("HI", "00", &today.h),
        ("d", "1", &today.d),
        ("mb", "1", &today.m),
        ("yY", "1", &today.y),
    ];
    for (part, zero, now) in parts {
        let found = part.chars().any(|p| format.contains(&format!("%{p}")));
        if found {
            usenow = true;
        } else {
            date.push(b'@');
            date.extend_from_slice(if usenow { now } else { zero }.as_bytes());
            format.push_str("@%");
            format.push(part.chars().next()?);
        }
    }
    let date = String::from_utf8(date).ok()?;
    let tm = strptime(&date, &format)?;
    let local = timegm(&tm);
    match offset {
        Some(off) => Some((local + off, off)),
        None => {
            let unixtime = mktime(&tm)?;
            Some((unixtime, unixtime - local))
        }
    }
}

/// What `time.strptime` returns that hg uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tm {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
}

/// Python's `_strptime` regular expression for one directive.
fn directive_regex(c: char) -> Option<String> {
    let alternatives = |name: char, words: &[&str]| format!("(?P<{name}>{})", words.join("|"));
    Some(match c {
        'd' => r"(?P<d>3[0-1]|[1-2]\d|0[1-9]|[1-9]| [1-9])".to_owned(),
        'H' => r"(?P<H>2[0-3]|[0-1]\d|\d)".to_owned(),
        'I' => r"(?P<I>1[0-2]|0[1-9]|[1-9])".to_owned(),
        'm' => r"(?P<m>1[0-2]|0[1-9]|[1-9])".to_owned(),
        'M' => r"(?P<M>[0-5]\d|\d)".to_owned(),
        'S' => r"(?P<S>6[0-1]|[0-5]\d|\d)".to_owned(),
        'y' => r"(?P<y>\d\d)".to_owned(),
        'Y' => r"(?P<Y>\d\d\d\d)".to_owned(),
        'a' => alternatives('a', &WEEKDAYS),
        'b' => alternatives('b', &MONTHS),
        'p' => alternatives('p', &["am", "pm"]),
        '%' => "%".to_owned(),
        _ => return None,
    })
}

/// `TimeRE.pattern(format)`: literal text escaped, whitespace runs as `\s+` (Python's
/// `\s`, which also has the ASCII separators 0x1c-0x1f), directives replaced.
fn strptime_pattern(format: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            out.push_str(&directive_regex(chars.next()?)?);
        } else if c.is_whitespace() {
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            out.push_str(r"[\s\x1c-\x1f]+");
        } else {
            out.push_str(&regex::escape(&c.to_string()));
        }
    }
    Some(out)
}

/// The value of a decimal digit character, as Python's `int()` reads any Unicode digit:
/// digits come in runs of ten starting at zero.
fn digit_value(c: char) -> Option<i64> {
    if let Some(v) = c.to_digit(10) {
        return Some(v as i64);
    }
    static DIGIT: OnceLock<Option<Regex>> = OnceLock::new();
    let re = DIGIT.get_or_init(|| Regex::new(r"^\d$").ok()).as_ref()?;
    let is_digit = |c: char| re.is_match(c.encode_utf8(&mut [0; 4]));
    if !is_digit(c) {
        return None;
    }
    let mut start = c as u32;
    while let Some(prev) = start.checked_sub(1).and_then(char::from_u32) {
        if !is_digit(prev) {
            break;
        }
        start -= 1;
    }
    Some(((c as u32 - start) % 10) as i64)
}

/// `int()` of a matched field (digits, possibly after the space of `%d`'s ` [1-9]`).
fn field_int(s: &str) -> Option<i64> {
    let digits = s.trim();
    if digits.is_empty() {
        return None;
    }
    digits
        .chars()
        .try_fold(0i64, |acc, c| Some(acc * 10 + digit_value(c)?))
}

/// Python's `time.strptime(data, format)` for the directives hg uses: `None` for
/// Python's ValueError (no match, unconverted data, an impossible day).
fn strptime(data: &str, format: &str) -> Option<Tm> {
    let pattern = strptime_pattern(format)?;
    let re = Regex::new(&format!("(?i)^(?:{pattern})")).ok()?;
    let caps = re.captures(data)?;
    if caps.get(0)?.end() != data.len() {
        return None;
    }
    let get = |name: &str| caps.name(name).map(|m| m.as_str());
    let mut tm = Tm {
        year: 1900,
        month: 1,
        day: 1,
        hour: 0,
        minute: 0,
        second: 0,
    };
    if let Some(y) = get("y") {
        let y = field_int(y)?;
        tm.year = if y <= 68 { y + 2000 } else { y + 1900 };
    }
    if let Some(y) = get("Y") {
        tm.year = field_int(y)?;
    }
    if let Some(m) = get("m") {
        tm.month = field_int(m)?;
    }
    if let Some(b) = get("b") {
        let lower = b.to_lowercase();
        tm.month = MONTHS.iter().position(|m| *m == lower)? as i64 + 1;
    }
    if let Some(d) = get("d") {
        tm.day = field_int(d)?;
    }
    if let Some(h) = get("H") {
        tm.hour = field_int(h)?;
    }
    if let Some(i) = get("I") {
        let hour = field_int(i)?;
        let ampm = get("p").unwrap_or("").to_lowercase();
        tm.hour = match ampm.as_str() {
            "" | "am" if hour == 12 => 0,
            "pm" if hour != 12 => hour + 12,
            _ => hour,
        };
    }
    if let Some(m) = get("M") {
        tm.minute = field_int(m)?;
    }
    if let Some(s) = get("S") {
        tm.second = field_int(s)?;
    }
    if let Some(a) = get("a") {
        // Python looks the name up (and fails on a non-ASCII case variant) but does not
        // check it against the date.
        let lower = a.to_lowercase();
        WEEKDAYS.iter().position(|w| *w == lower)?;
    }
    // datetime.date(year, month, day) must exist.
    if !(1..=9999).contains(&tm.year)
        || !(1..=12).contains(&tm.month)
        || tm.day < 1
        || tm.day > days_in_month(tm.year, tm.month)
    {
        return None;
    }
    Some(tm)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// The proleptic Gregorian date of a day number (days since 1970-01-01).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// `calendar.timegm`: the fields read as UTC.
fn timegm(tm: &Tm) -> i64 {
    let days = days_from_civil(tm.year, tm.month, 1) + tm.day - 1;
    ((days * 24 + tm.hour) * 60 + tm.minute) * 60 + tm.second
}

extern "C" {
    // POSIX; not in the libc crate.
    fn tzset();
}

/// `time.mktime`: the fields read as local time (`TZ` honoured, DST decided by the C
/// library); `None` where Python raises OverflowError.
fn mktime(t: &Tm) -> Option<i64> {
    // SAFETY: tm is a plain C struct; zeroed is a valid value (tm_zone null).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = i32::try_from(t.year - 1900).ok()?;
    tm.tm_mon = (t.month - 1) as i32;
    tm.tm_mday = t.day as i32;
    tm.tm_hour = t.hour as i32;
    tm.tm_min = t.minute as i32;
    tm.tm_sec = t.second as i32;
    tm.tm_isdst = -1;
    tm.tm_wday = -1;
    // SAFETY: tzset and mktime only read the environment and the tm we own.
    let r = unsafe {
        tzset();
        libc::mktime(&mut tm)
    };
    if r == -1 && tm.tm_wday == -1 {
        return None;
    }
    Some(r as i64)
}

/// The local zone's offset in seconds west of UTC at time `t` (hg's `makedate` offset).
pub fn local_offset_west(t: i64) -> i32 {
    // (`as _`: libc's time_t, named deprecated for musl targets.)
    let tt = t as _;
    // SAFETY: tzset reads the environment; localtime_r fills the tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe {
        tzset();
        !libc::localtime_r(&tt, &mut tm).is_null()
    };
    if ok {
        -(tm.tm_gmtoff as i32)
    } else {
        0
    }
}

/// The committer's local time in a strftime `format`.
pub fn local_time(time: i64, tz: i32, format: &str) -> String {
    let local = time.saturating_sub(tz as i64);
    chrono::DateTime::from_timestamp(local, 0)
        .map(|d| d.format(format).to_string())
        .unwrap_or_else(|| local.to_string())
}

/// `+hhmm` / `-hhmm` for an offset in seconds west of UTC.
pub fn tz_suffix(tz: i32) -> String {
    let sign = if tz > 0 { '-' } else { '+' };
    let abs = tz.unsigned_abs();
    format!("{sign}{:02}{:02}", abs / 3600, (abs % 3600) / 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<(i64, i32), DateError> {
        parse_date(s)
    }

    #[test]
    fn unixtime_and_offset() {
        assert_eq!(p("0 0"), Ok((0, 0)));
        assert_eq!(p("1700000000 -3600"), Ok((1700000000, -3600)));
        assert_eq!(p("  1_0 +5 "), Ok((10, 5)));
        assert_eq!(p(""), Ok((0, 0)));
        assert_eq!(p("0  0"), Err(DateError::Invalid(b"0  0".to_vec())));
        assert_eq!(
            p("99999999999 0").map_err(|e| e.hg_message()),
            Err("hg: parse error: date exceeds 32 bits: 99999999999\n".to_owned())
        );
        assert_eq!(
            p("-000000000000000000000000000000099999999999 0").map_err(|e| e.to_string()),
            Err("date exceeds 32 bits: -99999999999".to_owned())
        );
        assert_eq!(
            p("0 99999").map_err(|e| e.to_string()),
            Err("impossible time zone offset: 99999".to_owned())
        );
        assert_eq!(p("2147483647 43200"), Ok((2147483647, 43200)));
        assert_eq!(p("-2147483648 -50400"), Ok((-2147483648, -50400)));
    }

    #[test]
    fn formats_with_explicit_zones() {
        assert_eq!(
            p("2026-11-21 10:00:00 +0100"),
            Ok((1795251600, -3600)),
            "10:00 at UTC+1 is 09:00 UTC"
        );
        assert_eq!(p("2026-11-21T10:00:00Z"), Ok((1795255200, 0)));
        assert_eq!(p("2026-11-21T10:00:00+01:00"), Ok((1795251600, -3600)));
        assert_eq!(p("Sat Nov 21 10:00:00 2026 +0100"), Ok((1795251600, -3600)));
        assert_eq!(p("sat nov 21 10:00:00 2026 GMT"), Ok((1795255200, 0)));
        assert_eq!(p("2026-11-21 UTC"), Ok((1795219200, 0)));
        assert_eq!(p("11/21/26 -0530"), Ok((1795219200 + 19800, 19800)));
        assert_eq!(
            p("2026-11-21 10:00pm +0000"),
            Ok((1795255200 + 12 * 3600, 0))
        );
        assert_eq!(p("2026-11-21 12:00am +0000"), Ok((1795219200, 0)));
        // Python's backtracking reads "1030" as %H%M%S = 10, 3, 0 (as hg does).
        assert_eq!(p("2026-11-21 1030 +0000"), Ok((1795219200 + 36180, 0)));
        // Leap seconds are accepted by strptime and carried over.
        assert_eq!(p("2026-11-21 10:00:60 +0000"), Ok((1795255260, 0)));
    }

    #[test]
    fn invalid_dates_print_like_hg() {
        for bad in [
            "xyz",
            "2026-02-30",
            "2026-11-21 10:00 +01:00",
            "0000-01-01 +0000",
            "2026-13-01",
            "Sun Nov 31 10:00:00 2026 +0000",
        ] {
            assert_eq!(
                p(bad),
                Err(DateError::Invalid(bad.as_bytes().to_vec())),
                "{bad}"
            );
        }
        assert_eq!(
            p(" xyz ").map_err(|e| e.hg_message()),
            Err("hg: parse error: invalid date: 'xyz'\n".to_owned())
        );
        assert_eq!(
            p("a'b").map_err(|e| e.to_string()),
            Err("invalid date: \"a'b\"".to_owned())
        );
        assert_eq!(
            p("é\t'\"").map_err(|e| e.to_string()),
            Err("invalid date: '\\xc3\\xa9\\t\\'\"'".to_owned())
        );
    }

    #[test]
    fn python_int_rules() {
        assert_eq!(PyInt::parse(b"1__0"), None);
        assert_eq!(PyInt::parse(b"_1"), None);
        assert_eq!(PyInt::parse(b"1_"), None);
        assert_eq!(PyInt::parse(b"-0").map(|i| i.to_string()), Some("0".into()));
        assert_eq!(PyInt::parse(b"\t+007\x0c").and_then(|i| i.value()), Some(7));
        assert_eq!(PyInt::parse(b"0x10"), None);
    }

    #[test]
    fn unicode_digits_count_as_python_digits() {
        assert_eq!(digit_value('7'), Some(7));
        assert_eq!(digit_value('\u{0663}'), Some(3)); // ARABIC-INDIC DIGIT THREE
        assert_eq!(digit_value('\u{ff19}'), Some(9)); // FULLWIDTH DIGIT NINE
        assert_eq!(digit_value('x'), None);
        assert_eq!(
            p("\u{ff12}\u{ff10}\u{ff12}\u{ff16}-11-21 +0000"),
            Ok((1795219200, 0))
        );
    }

    #[test]
    fn calendar_arithmetic() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11017);
        for z in [-800_000, -1, 59, 11016, 20_000, 2_000_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }
}
