//! Decoding of stored revlog chunks: raw (`\0`, `u`), zlib (`x`) and zstd (`(`).

use std::borrow::Cow;
use std::io::Read;

/// Deflate's largest expansion: a 258-byte match coded in about two bits.
const ZLIB_MAX_RATIO: usize = 1032;
/// Zstd's largest expansion: a 4-byte RLE block (3-byte header, 1 byte) stands for up to
/// 128 KiB.
const ZSTD_MAX_RATIO: usize = 32 << 10;

/// The most bytes `chunk` can decompress to at `ratio`: the bound put on capacity hints
/// and sizes read from the chunk, which come from the (untrusted) index or frame header.
fn max_output(chunk: &[u8], ratio: usize) -> usize {
    chunk.len().saturating_mul(ratio)
}

/// Decompresses one stored chunk. `hint` is a capacity hint for the output.
pub fn decompress(chunk: &[u8], hint: usize) -> Result<Cow<'_, [u8]>, String> {
    let Some(&kind) = chunk.first() else {
        return Ok(Cow::Borrowed(&[]));
    };
    match kind {
        b'\0' => Ok(Cow::Borrowed(chunk)),
        b'u' => Ok(Cow::Borrowed(&chunk[1..])),
        b'x' => {
            let max = max_output(chunk, ZLIB_MAX_RATIO);
            crate::zlib::inflate(chunk, hint.min(max), max)
                .map(Cow::Owned)
                .map_err(|e| format!("revlog decompress error: {e}"))
        }
        b'(' => zstd_decompress(chunk, hint).map(Cow::Owned),
        other => Err(format!("unknown compression type {other:#04x}")),
    }
}

/// Decompresses one stored chunk into a shared buffer: the whole text of a revision stored
/// in one chunk. A zstd frame that gives its size is decoded straight into the buffer the
/// text is shared in, not into a vector copied into it (that copy, and the page faults of
/// the vector, were a tenth of a first read's work in the daemon: docs/BENCHMARKS.md).
pub fn decompress_shared(chunk: &[u8], hint: usize) -> Result<std::sync::Arc<[u8]>, String> {
    if chunk.first() == Some(&b'(') {
        if let Some(size) = zstd_known_size(chunk) {
            return zstd_decompress_shared(chunk, size);
        }
    }
    decompress(chunk, hint).map(|text| std::sync::Arc::from(&*text))
}

/// The content size a zstd frame's header gives, when it gives one no larger than the frame
/// could hold (a larger one is not believed: it would be allocated before decoding).
fn zstd_known_size(chunk: &[u8]) -> Option<usize> {
    zstd::zstd_safe::get_frame_content_size(chunk)
        .ok()
        .flatten()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= max_output(chunk, ZSTD_MAX_RATIO))
}

/// The not yet written bytes of a fresh shared buffer, as zstd writes into them: `filled`
/// says how many it wrote.
struct UninitBuf<'a> {
    buf: &'a mut [std::mem::MaybeUninit<u8>],
    filled: usize,
}

// SAFETY: `as_mut_ptr` points at `buf`, valid for `capacity()` = `buf.len()` bytes of
// writes; `as_slice` covers the first `filled` bytes only, which `filled_until` (zstd's
// promise that it wrote them) alone raises, never past the buffer.
unsafe impl zstd::zstd_safe::WriteBuf for UninitBuf<'_> {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes were written (see `filled_until`).
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.filled) }
    }
    fn capacity(&self) -> usize {
        self.buf.len()
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().cast::<u8>()
    }
    unsafe fn filled_until(&mut self, n: usize) {
        self.filled = n.min(self.buf.len());
    }
}

/// [`zstd_decompress`] of a frame of `size` bytes, into a shared buffer of that size.
fn zstd_decompress_shared(chunk: &[u8], size: usize) -> Result<std::sync::Arc<[u8]>, String> {
    let mut shared = std::sync::Arc::<[u8]>::new_uninit_slice(size);
    let Some(slots) = std::sync::Arc::get_mut(&mut shared) else {
        return Err("zstd output buffer shared".to_owned());
    };
    let mut out = UninitBuf {
        buf: slots,
        filled: 0,
    };
    zstd_decode_sized(chunk, size, &mut out)?;
    if out.filled != size {
        return Err(format!(
            "revlog decompress error: frame says {size} bytes, got {}",
            out.filled
        ));
    }
    // SAFETY: zstd wrote all `size` bytes of the buffer (`filled` == its length).
    Ok(unsafe { shared.assume_init() })
}

thread_local! {
    /// One zstd decompression context per thread: creating a context costs more than
    /// decompressing a typical small chunk.
    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses a zstd frame. hg writes the content size in the frame header, so the
/// output is sized exactly and decoded in one call with a reused context. A size larger
/// than the frame could hold is not believed (it would be allocated before decoding): such
/// a frame goes through the streaming decoder, which fails on the size mismatch.
fn zstd_decompress(chunk: &[u8], hint: usize) -> Result<Vec<u8>, String> {
    match zstd_known_size(chunk) {
        Some(size) => {
            let mut out = Vec::with_capacity(size);
            zstd_decode_sized(chunk, size, &mut out)?;
            Ok(out)
        }
        None => {
            let mut out = Vec::with_capacity(hint.min(max_output(chunk, ZSTD_MAX_RATIO)));
            zstd::stream::read::Decoder::with_buffer(chunk)
                .and_then(|mut d| d.read_to_end(&mut out))
                .map_err(|e| format!("revlog decompress error: {e}"))?;
            Ok(out)
        }
    }
}

/// Decodes a frame whose header says it holds `size` bytes into `out` (room for `size`),
/// in one call with this thread's context; an error unless it wrote exactly `size`.
fn zstd_decode_sized<C: zstd::zstd_safe::WriteBuf + ?Sized>(
    chunk: &[u8],
    size: usize,
    out: &mut C,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("revlog decompress error: {e}");
    let written = ZSTD.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| "zstd context unavailable".to_owned())?;
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(err)?);
        }
        let Some(d) = slot.as_mut() else {
            return Err("zstd context unavailable".to_owned());
        };
        d.decompress_to_buffer(chunk, out).map_err(err)
    })?;
    if written != size {
        return Err(format!(
            "revlog decompress error: frame says {size} bytes, got {written}"
        ));
    }
    Ok(())
}

thread_local! {
    /// The context of prefix peeks, reused like [`ZSTD`]'s: a status of a thousand changed
    /// files peeks at a thousand filelogs, and creating a context was a quarter of it.
    static ZSTD_PEEK: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// The first `n` bytes (fewer when the text is shorter) of a zstd frame.
fn zstd_prefix(chunk: &[u8], n: usize) -> Result<Vec<u8>, String> {
    use zstd::zstd_safe::{get_error_name, DCtx, InBuffer, OutBuffer, ResetDirective};
    let err = |code| format!("revlog decompress error: {}", get_error_name(code));
    ZSTD_PEEK.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| "zstd context unavailable".to_owned())?;
        let dctx = slot.get_or_insert_with(DCtx::create);
        dctx.reset(ResetDirective::SessionOnly).map_err(err)?;
        let mut out: Vec<u8> = Vec::with_capacity(n);
        let mut input = InBuffer::around(chunk);
        loop {
            let (before_in, before_out) = (input.pos(), out.len());
            let mut output = OutBuffer::around_pos(&mut out, before_out);
            let left = dctx
                .decompress_stream(&mut output, &mut input)
                .map_err(err)?;
            // Full, or the frame is done: that is the prefix.
            if out.len() >= n || left == 0 {
                break;
            }
            if input.pos() == before_in && out.len() == before_out {
                return Err("revlog decompress error: truncated zstd frame".to_owned());
            }
        }
        out.truncate(n);
        Ok(out)
    })
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
        b'(' => return zstd_prefix(chunk, n),
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
    fn a_zstd_prefix_is_the_texts_start_whatever_its_length() {
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let zs = zstd::bulk::compress(&text, 3).unwrap();
        for n in [0, 1, 2, 1 << 10, 64 << 10, 800_000, 900_000] {
            assert_eq!(
                decompress_prefix(&zs, n).unwrap(),
                &text[..n.min(text.len())]
            );
        }
        // The reused context is not left in a bad state by a broken frame.
        assert!(decompress_prefix(&zs[..zs.len() / 2], 800_000).is_err());
        assert_eq!(decompress_prefix(&zs, 8).unwrap(), &text[..8]);
    }

    #[test]
    fn a_shared_text_is_the_chunks_text_for_every_kind_and_frame() {
        let text: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let zs = zstd::bulk::compress(&text, 3).unwrap();
        assert_eq!(zstd_known_size(&zs), Some(text.len()));
        assert_eq!(&*decompress_shared(&zs, 0).unwrap(), &text[..]);
        // The same context again, then an empty frame, a broken one, and the good again.
        assert_eq!(&*decompress_shared(&zs, 7).unwrap(), &text[..]);
        let empty = zstd::bulk::compress(b"", 3).unwrap();
        assert_eq!(&*decompress_shared(&empty, 0).unwrap(), b"");
        assert!(decompress_shared(&zs[..zs.len() / 2], 0).is_err());
        assert!(decompress_shared(b"(\xb5\x2f\xfd\x00", 0).is_err());
        assert_eq!(&*decompress_shared(&zs, 0).unwrap(), &text[..]);
        // A frame whose header claims more than its blocks hold: an error, no uninitialized
        // bytes handed out.
        let mut frame = b"(\xb5\x2f\xfd\x20".to_vec(); // single segment, 1-byte size
        frame.push(10);
        frame.extend_from_slice(&[0x19, 0, 0]); // last raw block of 3 bytes
        frame.extend_from_slice(b"abc");
        assert_eq!(zstd_known_size(&frame), Some(10));
        assert!(decompress_shared(&frame, 0).is_err());
        // Other kinds are copied into the shared buffer as they are.
        assert_eq!(&*decompress_shared(b"uabc", 0).unwrap(), b"abc");
        assert_eq!(&*decompress_shared(b"\0abc", 0).unwrap(), b"\0abc");
        assert_eq!(&*decompress_shared(b"", 0).unwrap(), b"");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decompress(b"?abc", 0).is_err());
        assert!(decompress(b"x\x01\x02", 0).is_err());
        assert!(decompress(b"(\xb5\x2f\xfd\x00", 0).is_err());
    }

    #[test]
    fn a_frame_claiming_a_huge_content_size_is_an_error() {
        // Single-segment frame header with an 8-byte content size of 2^62, then one empty
        // last raw block.
        let mut frame = b"(\xb5\x2f\xfd\xe0".to_vec();
        frame.extend_from_slice(&(1u64 << 62).to_le_bytes());
        frame.extend_from_slice(&[1, 0, 0]);
        assert!(decompress(&frame, 0).is_err());
        assert!(decompress(&frame, i32::MAX as usize).is_err());
        // A claim of 1 MiB from a 19-byte frame holding 3 bytes: decoded by the streaming
        // decoder, which checks the content size too.
        let mut frame = b"(\xb5\x2f\xfd\xe0".to_vec();
        frame.extend_from_slice(&(1u64 << 20).to_le_bytes());
        frame.extend_from_slice(&[0x19, 0, 0]); // last raw block of 3 bytes
        frame.extend_from_slice(b"abc");
        assert!(frame.len() * ZSTD_MAX_RATIO < 1 << 20);
        assert!(decompress(&frame, 0).is_err());
        let _ = decompress_prefix(&frame, 2);
    }

    #[test]
    fn fuzz_crash_cdcc32e7_zstd_content_size() {
        // cargo fuzz chunk_decompress, before the fix: an 18-byte frame claiming
        // 0x47f02bfffcaa4e bytes made the bulk decoder allocate them (an abort).
        let input = b"\x00\x04\x00\xa5(\xb5/\xfd\xe0N\xaa\xfc\xff+\xf0G\x006\x1c\x87\x93\xda";
        let (raw_len, chunk) = input.split_at(4);
        let hint = u32::from_be_bytes(raw_len.try_into().unwrap()) as usize;
        assert!(decompress(chunk, hint).is_err());
        let _ = decompress_prefix(chunk, 14);
    }

    #[test]
    fn the_capacity_hint_is_bounded_by_what_the_chunk_can_hold() {
        // The hint is the index's raw_len: 4 untrusted bytes must not reserve 2 GiB.
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"abc").unwrap();
        let z = z.finish().unwrap();
        let out = decompress(&z, i32::MAX as usize).unwrap().into_owned();
        assert_eq!(out, b"abc");
        assert!(out.capacity() <= z.len() * ZLIB_MAX_RATIO);
        let mut zs = b"(\xb5\x2f\xfd\x00\x00".to_vec(); // no content size: streaming path
        zs.extend_from_slice(&[0x19, 0, 0]);
        zs.extend_from_slice(b"abc");
        let out = decompress(&zs, i32::MAX as usize).unwrap().into_owned();
        assert_eq!(out, b"abc");
        assert!(out.capacity() <= zs.len() * ZSTD_MAX_RATIO);
    }
}
