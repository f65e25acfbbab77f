//! Mercurial's version-1 wire protocol over HTTP, the parts a client of a stock
//! remotefilelog server needs (`httppeer.makev1commandrequest`, `wireprotov1peer`):
//! arguments URL-encoded (sorted by name) and carried in `X-HgArg-<n>` headers no longer
//! than the server's `httpheader` capability; `batch` commands escaped and joined with
//! `;`, their answers split and unescaped; an `x_rfl_getfile` answer (`<code>\0<payload>`,
//! the payload a zlib-compressed blob) decoded. No I/O: the transport is the caller's.

/// Why an answer of the server is refused.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the server refused {what}: {message}")]
    Refused { what: String, message: String },
    #[error("malformed answer to {what}: {reason}")]
    Malformed { what: String, reason: String },
}

/// `wireprototypes.escapebatcharg`: `:` `,` `;` `=` as `:c` `:o` `:s` `:e`.
pub fn escape_batch_arg(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    for &b in v {
        match b {
            b':' => out.extend_from_slice(b":c"),
            b',' => out.extend_from_slice(b":o"),
            b';' => out.extend_from_slice(b":s"),
            b'=' => out.extend_from_slice(b":e"),
            _ => out.push(b),
        }
    }
    out
}

/// `wireprototypes.unescapebatcharg`; `None` for an escape hg never writes.
pub fn unescape_batch_arg(v: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(v.len());
    let mut it = v.iter();
    while let Some(&b) = it.next() {
        if b != b':' {
            out.push(b);
            continue;
        }
        out.push(match it.next()? {
            b'c' => b':',
            b'o' => b',',
            b's' => b';',
            b'e' => b'=',
            _ => return None,
        });
    }
    Some(out)
}

/// The `cmds` argument of a `batch` request: `op name=value,...;op ...`, every name and
/// value escaped.
pub fn batch_cmds<'a>(
    ops: impl IntoIterator<Item = (&'a str, Vec<(&'a str, &'a [u8])>)>,
) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (op, args)) in ops.into_iter().enumerate() {
        if i > 0 {
            out.push(b';');
        }
        out.extend_from_slice(op.as_bytes());
        out.push(b' ');
        for (j, (k, v)) in args.into_iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.extend(escape_batch_arg(k.as_bytes()));
            out.push(b'=');
            out.extend(escape_batch_arg(v));
        }
    }
    out
}

/// Splits a `batch` answer into each command's answer, unescaped.
pub fn split_batch_answer(body: &[u8]) -> Result<Vec<Vec<u8>>, WireError> {
    body.split(|&b| b == b';')
        .map(|part| {
            unescape_batch_arg(part).ok_or_else(|| WireError::Malformed {
                what: "batch".into(),
                reason: "a bad escape".into(),
            })
        })
        .collect()
}

/// Python's `urllib.parse.urlencode` of arguments sorted by name (as hg sends them):
/// `quote_plus` of each name and value.
pub fn urlencode(args: &[(&str, &[u8])]) -> String {
    let mut sorted: Vec<_> = args.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::new();
    for (i, (k, v)) in sorted.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        quote_plus(k.as_bytes(), &mut out);
        out.push('=');
        quote_plus(v, &mut out);
    }
    out
}

fn quote_plus(v: &[u8], out: &mut String) {
    percent_encode(v, b"", true, out)
}

/// Python's `urllib.parse.quote(v, safe)`: unreserved characters and `safe` as they are,
/// every other byte `%XX`.
pub fn quote(v: &[u8], safe: &[u8]) -> String {
    let mut out = String::with_capacity(v.len());
    percent_encode(v, safe, false, &mut out);
    out
}

/// `quote` (`plus`: `quote_plus`, a space as `+`).
fn percent_encode(v: &[u8], safe: &[u8], plus: bool, out: &mut String) {
    for &b in v {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(b as char)
            }
            b' ' if plus => out.push('+'),
            _ if safe.contains(&b) => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
}

/// `httppeer.encodevalueinheaders`: the encoded arguments in headers `X-HgArg-1`, ...,
/// each line (`name: value\r\n`) at most `limit` bytes (the server's `httpheader`).
pub fn arg_headers(encoded: &str, limit: usize) -> Vec<(String, String)> {
    // hg reserves three digits for the header's number.
    let chunk = limit
        .saturating_sub("X-HgArg-000".len() + ": \r\n".len())
        .max(1);
    encoded
        .as_bytes()
        .chunks(chunk)
        .enumerate()
        // The encoded arguments are ASCII: every chunk is a string.
        .map(|(i, c)| {
            (
                format!("X-HgArg-{}", i + 1),
                String::from_utf8_lossy(c).into_owned(),
            )
        })
        .collect()
}

/// The blob in an `x_rfl_getfile` answer (`<code>\0<payload>`): code 0 and the payload
/// zlib-decompressed (empty for the null node); another code is the server's refusal.
/// `limit` bounds the decompressed size.
pub fn getfile_blob(what: &str, answer: &[u8], limit: u64) -> Result<Vec<u8>, WireError> {
    let malformed = |reason: &str| WireError::Malformed {
        what: what.to_owned(),
        reason: reason.to_owned(),
    };
    let nul = memchr::memchr(0, answer).ok_or_else(|| malformed("no status code"))?;
    let (code, payload) = (&answer[..nul], &answer[nul + 1..]);
    if code != b"0" {
        return Err(WireError::Refused {
            what: what.to_owned(),
            message: String::from_utf8_lossy(payload).into_owned(),
        });
    }
    if payload.is_empty() {
        return Ok(Vec::new());
    }
    inflate(what, payload, limit)
}

/// A blob as the server compressed it (zlib), decompressed; at most `limit` bytes.
pub fn inflate(what: &str, payload: &[u8], limit: u64) -> Result<Vec<u8>, WireError> {
    let malformed = |reason: &str| WireError::Malformed {
        what: what.to_owned(),
        reason: reason.to_owned(),
    };
    use revfs_store::zlib::{inflate, InflateError};
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    // Text compresses about four times: room for that first.
    match inflate(payload, payload.len().saturating_mul(4), limit) {
        Ok(out) => Ok(out),
        Err(InflateError::TooLarge(_)) => Err(malformed("the blob is larger than the limit")),
        Err(e) => Err(malformed(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_arguments_escape_and_unescape_as_hgs() {
        assert_eq!(escape_batch_arg(b"a:b,c;d=e"), b"a:cb:oc:sd:ee");
        assert_eq!(unescape_batch_arg(b"a:cb:oc:sd:ee").unwrap(), b"a:b,c;d=e");
        assert_eq!(unescape_batch_arg(b"bad:x"), None);
        assert_eq!(unescape_batch_arg(b"cut:"), None);
        let cmds = batch_cmds([
            (
                "x_rfl_getfile",
                vec![("file", &b"a;b"[..]), ("node", b"00")],
            ),
            ("x_rfl_getfile", vec![("file", &b"c"[..]), ("node", b"11")]),
        ]);
        assert_eq!(
            cmds,
            b"x_rfl_getfile file=a:sb,node=00;x_rfl_getfile file=c,node=11"
        );
        assert_eq!(
            split_batch_answer(b"0\x00x:sy;1\x00no").unwrap(),
            vec![b"0\x00x;y".to_vec(), b"1\x00no".to_vec()]
        );
    }

    #[test]
    fn arguments_are_urlencoded_sorted_and_split_into_headers_of_the_servers_size() {
        let node = [b'd'; 40];
        let enc = urlencode(&[("node", &node[..]), ("file", b"dir/a b.txt")]);
        assert_eq!(enc, format!("file=dir%2Fa+b.txt&node={}", "d".repeat(40)));
        let long = "x".repeat(2500);
        let h = arg_headers(&long, 1024);
        assert_eq!(h.len(), 3);
        assert_eq!(h[0].0, "X-HgArg-1");
        for (name, value) in &h {
            assert!(name.len() + value.len() + 4 <= 1024);
        }
        assert_eq!(h.iter().map(|(_, v)| v.as_str()).collect::<String>(), long);
    }

    #[test]
    fn a_getfile_answer_is_decompressed_bounded_or_refused() {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&[7u8; 1000]).unwrap();
        let mut answer = b"0\0".to_vec();
        answer.extend(z.finish().unwrap());
        assert_eq!(getfile_blob("a", &answer, 1000).unwrap(), vec![7u8; 1000]);
        assert!(getfile_blob("a", &answer, 999).is_err());
        assert!(getfile_blob("a", &answer[..answer.len() - 3], 1000).is_err());
        assert_eq!(getfile_blob("a", b"0\0", 10).unwrap(), b"");
        assert!(matches!(
            getfile_blob("a", b"1\0cannot fetch remote files from shallow repo", 10),
            Err(WireError::Refused { .. })
        ));
        assert!(getfile_blob("a", b"garbage", 10).is_err());
    }
}
