//! The bundle2 container (`hg help internals.bundle2`), read as a stream: the `HG20` magic,
//! the stream parameters (a mandatory one this reader does not know is refused, as hg
//! refuses it), then parts, each a header (type, id, mandatory and advisory parameters) and
//! a payload framed in chunks. A part's payload is read through [`Part::payload`] before the
//! next part is asked for; what the caller leaves unread is skipped.
//!
//! Compression of the whole stream (`Compression=GZ|ZS|UN`) is undone here; `BZ` (bzip2,
//! the default of `hg bundle`) is refused by name.

use super::BundleError;
use std::io::Read;

/// Reads one bundle2 stream.
pub struct Bundle2Reader {
    inner: Box<dyn Read>,
    /// Bytes of the current part's payload still unread in the current chunk; `None` when
    /// the part's payload has ended (or no part is open).
    chunk_left: Option<usize>,
}

/// The header of one part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartHeader {
    /// The part type, lower-cased (hg compares them so).
    pub kind: String,
    /// Whether the sender requires the reader to understand the part (an upper-case letter
    /// in the type).
    pub mandatory: bool,
    pub id: u32,
    pub mandatory_params: Vec<(String, Vec<u8>)>,
    pub advisory_params: Vec<(String, Vec<u8>)>,
}

impl PartHeader {
    /// The value of parameter `name`, mandatory or advisory.
    pub fn param(&self, name: &str) -> Option<&[u8]> {
        self.mandatory_params
            .iter()
            .chain(&self.advisory_params)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_slice())
    }
}

fn malformed(reason: impl Into<String>) -> BundleError {
    BundleError::Malformed {
        what: "bundle2 stream".into(),
        reason: reason.into(),
    }
}

fn read_exact_or(r: &mut dyn Read, buf: &mut [u8], what: &str) -> Result<(), BundleError> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            malformed(format!("stream ends inside {what}"))
        } else {
            BundleError::Io(e)
        }
    })
}

fn read_i32(r: &mut dyn Read, what: &str) -> Result<i32, BundleError> {
    let mut b = [0u8; 4];
    read_exact_or(r, &mut b, what)?;
    Ok(i32::from_be_bytes(b))
}

/// `urllib.parse.unquote` of bytes (a `%` not followed by two hex digits stays).
pub fn unquote(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex_val(s[i + 1]), hex_val(s[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The largest part header or stream-parameter block accepted (hg's are a few hundred
/// bytes; the bound keeps a hostile length from allocating).
const MAX_HEADER: usize = 1 << 20;

impl Bundle2Reader {
    /// Reads the magic and the stream parameters of `input`.
    pub fn new<R: Read + 'static>(mut input: R) -> Result<Self, BundleError> {
        let mut magic = [0u8; 4];
        read_exact_or(&mut input, &mut magic, "the magic")?;
        if &magic != b"HG20" {
            return Err(malformed(format!(
                "not a bundle2 stream (magic {:?})",
                String::from_utf8_lossy(&magic)
            )));
        }
        let size = read_i32(&mut input, "the stream parameters")?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s <= MAX_HEADER)
            .ok_or_else(|| malformed(format!("stream parameters of {size} bytes")))?;
        let mut params = vec![0u8; size];
        read_exact_or(&mut input, &mut params, "the stream parameters")?;
        let mut inner: Box<dyn Read> = Box::new(input);
        for p in params.split(|&b| b == b' ').filter(|p| !p.is_empty()) {
            let (name, value) = match p.iter().position(|&b| b == b'=') {
                Some(i) => (unquote(&p[..i]), unquote(&p[i + 1..])),
                None => (unquote(p), Vec::new()),
            };
            let name = String::from_utf8_lossy(&name).into_owned();
            match name.as_str() {
                "Compression" | "compression" => {
                    inner = match value.as_slice() {
                        b"UN" => inner,
                        b"GZ" => Box::new(flate2::read::ZlibDecoder::new(inner)),
                        b"ZS" => Box::new(
                            zstd::stream::read::Decoder::new(inner).map_err(BundleError::Io)?,
                        ),
                        other => {
                            return Err(BundleError::Unsupported(format!(
                                "bundle compression {}",
                                String::from_utf8_lossy(other)
                            )))
                        }
                    };
                }
                _ if name.starts_with(|c: char| c.is_ascii_uppercase()) => {
                    return Err(BundleError::Unsupported(format!(
                        "mandatory stream parameter {name}"
                    )))
                }
                _ => {}
            }
        }
        Ok(Bundle2Reader {
            inner,
            chunk_left: None,
        })
    }

    /// The next part's header, after skipping what is left of the current part's payload;
    /// `None` at the end of the stream.
    pub fn next_part(&mut self) -> Result<Option<PartHeader>, BundleError> {
        self.skip_payload()?;
        let size = read_i32(&mut *self.inner, "a part header size")?;
        if size == 0 {
            return Ok(None);
        }
        if size < 0 {
            return Err(malformed(format!(
                "a part header size of {size} (out-of-band parts are not read)"
            )));
        }
        let size = size as usize;
        if size > MAX_HEADER {
            return Err(malformed(format!("a part header of {size} bytes")));
        }
        let mut h = vec![0u8; size];
        read_exact_or(&mut *self.inner, &mut h, "a part header")?;
        let header = parse_part_header(&h)?;
        self.chunk_left = Some(0);
        Ok(Some(header))
    }

    /// The current part's payload, as a reader of its bytes (the chunk framing removed).
    pub fn payload(&mut self) -> PayloadReader<'_> {
        PayloadReader {
            inner: &mut *self.inner,
            chunk_left: &mut self.chunk_left,
        }
    }

    fn skip_payload(&mut self) -> Result<(), BundleError> {
        let mut sink = [0u8; 8192];
        let mut p = self.payload();
        loop {
            match p.read(&mut sink) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(io_to_bundle(e)),
            }
        }
    }
}

/// A payload reader's I/O error back into the bundle error it carries, when it does.
pub(crate) fn io_to_bundle(e: std::io::Error) -> BundleError {
    if e.kind() == std::io::ErrorKind::InvalidData {
        if let Some(inner) = e.get_ref() {
            return malformed(inner.to_string());
        }
    }
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        return malformed("stream ends inside a part");
    }
    BundleError::Io(e)
}

fn parse_part_header(h: &[u8]) -> Result<PartHeader, BundleError> {
    let mut pos = 0usize;
    let mut take = |n: usize| -> Result<&[u8], BundleError> {
        let s = h
            .get(pos..pos + n)
            .ok_or_else(|| malformed("a part header ends early"))?;
        pos += n;
        Ok(s)
    };
    let tlen = take(1)?[0] as usize;
    let raw_kind = String::from_utf8_lossy(take(tlen)?).into_owned();
    let id = u32::from_be_bytes(take(4)?.try_into().unwrap_or([0; 4]));
    let nman = take(1)?[0] as usize;
    let nadv = take(1)?[0] as usize;
    let sizes = take(2 * (nman + nadv))?.to_vec();
    let mut params = Vec::with_capacity(nman + nadv);
    for pair in sizes.chunks(2) {
        let k = String::from_utf8_lossy(take(pair[0] as usize)?).into_owned();
        let v = take(pair[1] as usize)?.to_vec();
        params.push((k, v));
    }
    let advisory_params = params.split_off(nman);
    Ok(PartHeader {
        mandatory: raw_kind != raw_kind.to_lowercase(),
        kind: raw_kind.to_lowercase(),
        id,
        mandatory_params: params,
        advisory_params,
    })
}

/// The payload of one part: its chunks' bytes, in order, then end of file.
pub struct PayloadReader<'a> {
    inner: &'a mut dyn Read,
    chunk_left: &'a mut Option<usize>,
}

impl Read for PayloadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let left = match *self.chunk_left {
                None => return Ok(0),
                Some(n) => n,
            };
            if left > 0 {
                let want = left.min(buf.len());
                let n = self.inner.read(&mut buf[..want])?;
                if n == 0 && want > 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                *self.chunk_left = Some(left - n);
                return Ok(n);
            }
            let mut b = [0u8; 4];
            self.inner.read_exact(&mut b)?;
            let size = i32::from_be_bytes(b);
            if size == 0 {
                *self.chunk_left = None;
                return Ok(0);
            }
            if size < 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a payload chunk size of {size} (interrupts are not read)"),
                ));
            }
            *self.chunk_left = Some(size as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(kind: &str, params: &[(&str, &[u8])], payload: &[&[u8]]) -> Vec<u8> {
        let mut h = vec![kind.len() as u8];
        h.extend_from_slice(kind.as_bytes());
        h.extend_from_slice(&7u32.to_be_bytes());
        h.push(params.len() as u8);
        h.push(0);
        for (k, v) in params {
            h.push(k.len() as u8);
            h.push(v.len() as u8);
        }
        for (k, v) in params {
            h.extend_from_slice(k.as_bytes());
            h.extend_from_slice(v);
        }
        let mut out = (h.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&h);
        for c in payload {
            out.extend_from_slice(&(c.len() as i32).to_be_bytes());
            out.extend_from_slice(c);
        }
        out.extend_from_slice(&0i32.to_be_bytes());
        out
    }

    fn stream(params: &[u8], parts: &[Vec<u8>]) -> Vec<u8> {
        let mut s = b"HG20".to_vec();
        s.extend_from_slice(&(params.len() as i32).to_be_bytes());
        s.extend_from_slice(params);
        for p in parts {
            s.extend_from_slice(p);
        }
        s.extend_from_slice(&0i32.to_be_bytes());
        s
    }

    #[test]
    fn parts_are_read_in_order_with_their_params_and_chunked_payloads() {
        let s = stream(
            b"",
            &[
                part("CHANGEGROUP", &[("version", b"02")], &[b"abc", b"de"]),
                part(
                    "listkeys",
                    &[("namespace", b"phases")],
                    &[b"publishing\tTrue"],
                ),
            ],
        );
        let mut r = Bundle2Reader::new(std::io::Cursor::new(s)).unwrap();
        let h = r.next_part().unwrap().unwrap();
        assert_eq!(h.kind, "changegroup");
        assert!(h.mandatory);
        assert_eq!(h.param("version"), Some(&b"02"[..]));
        let mut body = Vec::new();
        r.payload().read_to_end(&mut body).unwrap();
        assert_eq!(body, b"abcde");
        // The second part's payload is skipped when not read.
        let h = r.next_part().unwrap().unwrap();
        assert_eq!((h.kind.as_str(), h.mandatory), ("listkeys", false));
        assert_eq!(r.next_part().unwrap(), None);
    }

    #[test]
    fn unknown_mandatory_stream_params_and_cut_streams_are_refused() {
        let s = stream(b"Frobnicate=1", &[]);
        assert!(matches!(
            Bundle2Reader::new(std::io::Cursor::new(s)),
            Err(BundleError::Unsupported(_))
        ));
        let s = stream(b"Compression=BZ", &[]);
        assert!(matches!(
            Bundle2Reader::new(std::io::Cursor::new(s)),
            Err(BundleError::Unsupported(m)) if m.contains("BZ")
        ));
        let mut s = stream(b"", &[part("output", &[], &[b"hello"])]);
        s.truncate(s.len() - 8);
        let mut r = Bundle2Reader::new(std::io::Cursor::new(s)).unwrap();
        r.next_part().unwrap();
        assert!(matches!(r.next_part(), Err(BundleError::Malformed { .. })));
        assert!(Bundle2Reader::new(std::io::Cursor::new(b"HG10UN".to_vec())).is_err());
    }

    #[test]
    fn unquote_decodes_percent_escapes_only() {
        assert_eq!(unquote(b"a%20b%zz%4"), b"a b%zz%4");
    }
}
