//! The format of a repository hg creates (`localrepo.newreporequirements`, Mercurial 6.3):
//! the engine that compresses its revlogs' new chunks, the first of
//! `format.revlog-compression` (alias `experimental.format.compression`; `zstd, zlib` by
//! default) that is available. Available means known to hg as a revlog engine and usable
//! by whoever must read the repository: revfs reads zstd, zlib and none, an hg without
//! its C extensions (a pure-Python build) only zlib and none.

use crate::config::Config;
use thiserror::Error;

/// The engines hg can store revlog chunks with (those with a `revlogheader`).
const REVLOG_ENGINES: [&str; 3] = ["zstd", "zlib", "none"];

/// hg's abort when no engine of the setting is available.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("compression engines {list} defined by format.revlog-compression not available")]
pub struct NoCompressionEngine {
    /// The setting's engines, each in double quotes, as hg lists them.
    pub list: String,
}

impl NoCompressionEngine {
    /// hg's hint line.
    pub fn hint(&self) -> &'static str {
        "run \"hg debuginstall\" to list available compression engines"
    }
}

/// The engine of a new repository's revlogs (`"zstd"`, `"zlib"` or `"none"`), given which
/// engines are `available`.
pub fn revlog_compression(
    config: &Config,
    available: impl Fn(&str) -> bool,
) -> Result<&'static str, NoCompressionEngine> {
    let configured = config
        .get_list("format", "revlog-compression")
        .or_else(|| config.get_list("experimental", "format.compression"))
        .unwrap_or_else(|| vec![b"zstd".to_vec(), b"zlib".to_vec()]);
    for name in &configured {
        if let Some(engine) = REVLOG_ENGINES
            .iter()
            .find(|e| e.as_bytes() == name.as_slice())
        {
            if available(engine) {
                return Ok(engine);
            }
        }
    }
    Err(NoCompressionEngine {
        list: configured
            .iter()
            .map(|e| format!("\"{}\"", String::from_utf8_lossy(e)))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        crate::config::from_text(text).0
    }

    /// The engine `hg init` gives a repository under the configuration `text`.
    fn hg_init_engine(text: &str) -> &'static str {
        let dir = tempfile::tempdir().unwrap();
        let rc = dir.path().join("hgrc");
        std::fs::write(&rc, text).unwrap();
        let out = std::process::Command::new("hg")
            .args(["init", "r"])
            .current_dir(dir.path())
            .env("HGRCPATH", &rc)
            .output()
            .expect("hg");
        assert!(out.status.success(), "{out:?}");
        let reqs = std::fs::read_to_string(dir.path().join("r/.hg/store/requires")).unwrap();
        if reqs.contains("revlog-compression-zstd\n") {
            "zstd"
        } else if reqs.contains("exp-compression-none\n") {
            "none"
        } else {
            "zlib"
        }
    }

    #[test]
    fn the_first_available_engine_of_the_setting_wins_zstd_by_default() {
        let all = |_: &str| true;
        let no_zstd = |e: &str| e != "zstd";
        assert_eq!(revlog_compression(&config(""), all), Ok("zstd"));
        assert_eq!(revlog_compression(&config(""), no_zstd), Ok("zlib"));
        let c = config("[format]\nrevlog-compression = zlib\n");
        assert_eq!(revlog_compression(&c, all), Ok("zlib"));
        let c = config("[format]\nrevlog-compression = bz2, \"none\" zstd\n");
        assert_eq!(revlog_compression(&c, all), Ok("none"));
        let c = config("[experimental]\nformat.compression = zlib\n");
        assert_eq!(revlog_compression(&c, all), Ok("zlib"));
        // hg itself (all engines available) chooses the same.
        for text in [
            "",
            "[format]\nrevlog-compression = zlib\n",
            "[format]\nrevlog-compression = bz2, \"none\" zstd\n",
            "[experimental]\nformat.compression = zlib\n",
        ] {
            assert_eq!(
                revlog_compression(&config(text), all).unwrap(),
                hg_init_engine(text),
                "{text:?}"
            );
        }
        let c = config("[format]\nrevlog-compression = zstd,bz2\n");
        let err = revlog_compression(&c, no_zstd).unwrap_err();
        assert_eq!(
            err.to_string(),
            "compression engines \"zstd\", \"bz2\" defined by format.revlog-compression not \
             available"
        );
    }
}
