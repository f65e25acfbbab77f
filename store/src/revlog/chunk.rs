//! Decoding of stored revlog chunks: raw (`\0`, `u`), zlib (`x`) and zstd (`(`).

use std::borrow::Cow;
use std::io::Read;

/// Decompresses one stored chunk. `hint` is a capacity hint for the output.
pub fn decompress(chunk: &[u8], hint: usize) -> Result<Cow<'_, [u8]>, String> {
    let Some(&kind) = chunk.first() else {
        return Ok(Cow::Borrowed(&[]));
    };
    match kind {
        b'\0' => Ok(Cow::Borrowed(chunk)),
        b'u' => Ok(Cow::Borrowed(&chunk[1..])),
        b'x' => {
            let mut out = Vec::with_capacity(hint);
            flate2::read::ZlibDecoder::new(chunk)
                .read_to_end(&mut out)
                .map_err(|e| format!("revlog decompress error: {e}"))?;
            Ok(Cow::Owned(out))
        }
        b'(' => {
            let mut out = Vec::with_capacity(hint);
            zstd::stream::read::Decoder::with_buffer(chunk)
                .and_then(|mut d| d.read_to_end(&mut out))
                .map_err(|e| format!("revlog decompress error: {e}"))?;
            Ok(Cow::Owned(out))
        }
        other => Err(format!("unknown compression type {other:#04x}")),
    }
}

/// Decompresses at most the first `n` bytes of a chunk, for cheap peeks at the start of a
/// text (for example to see whether a filelog text carries a metadata header).
pub fn decompress_prefix(chunk: &[u8], n: usize) -> Result<Vec<u8>, String> {
    let Some(&kind) = chunk.first() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(n);
    let take = |r: &mut dyn Read, out: &mut Vec<u8>| {
        r.take(n as u64)
            .read_to_end(out)
            .map(|_| ())
            .map_err(|e| format!("revlog decompress error: {e}"))
    };
    match kind {
        b'\0' => out.extend_from_slice(&chunk[..n.min(chunk.len())]),
        b'u' => out.extend_from_slice(&chunk[1..(n + 1).min(chunk.len())]),
        b'x' => take(&mut flate2::read::ZlibDecoder::new(chunk), &mut out)?,
        b'(' => {
            let mut d = zstd::stream::read::Decoder::with_buffer(chunk)
                .map_err(|e| format!("revlog decompress error: {e}"))?;
            take(&mut d, &mut out)?
        }
        other => return Err(format!("unknown compression type {other:#04x}")),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn every_chunk_kind_decodes() {
        assert_eq!(&*decompress(b"", 0).unwrap(), b"");
        assert_eq!(&*decompress(b"\0abc", 0).unwrap(), b"\0abc");
        assert_eq!(&*decompress(b"uabc", 0).unwrap(), b"abc");
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"hello hello hello").unwrap();
        let z = z.finish().unwrap();
        assert_eq!(z[0], b'x');
        assert_eq!(&*decompress(&z, 0).unwrap(), b"hello hello hello");
        let zs = zstd::bulk::compress(b"zstd zstd zstd", 3).unwrap();
        assert_eq!(zs[0], b'(');
        assert_eq!(&*decompress(&zs, 0).unwrap(), b"zstd zstd zstd");
        assert_eq!(decompress_prefix(&zs, 4).unwrap(), b"zstd");
        assert_eq!(decompress_prefix(&z, 5).unwrap(), b"hello");
        assert_eq!(decompress_prefix(b"uab", 5).unwrap(), b"ab");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decompress(b"?abc", 0).is_err());
        assert!(decompress(b"x\x01\x02", 0).is_err());
        assert!(decompress(b"(\xb5\x2f\xfd\x00", 0).is_err());
    }
}
