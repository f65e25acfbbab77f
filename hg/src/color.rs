//! Colour as hg 6.3 does it (`mercurial/color.py`): whether to colour (`--color`,
//! `ui.color`, `HGPLAIN`, whether stdout is a terminal), the default styles of the labels
//! `status` and `diff` use (and `[color]` overrides of them), and `colorlabel`, which wraps
//! labelled output in ECMA-48 (ANSI) escapes exactly as hg's `ansi` mode writes them.
//!
//! Divergences: `color.mode=terminfo` gives the same ANSI escapes as `ansi` (hg would ask
//! terminfo for its sequences); `win32` mode never applies (Linux); `[color]` entries are
//! checked only for the labels revfs uses, and a bad one is reported three times as hg does
//! for a setting in a global file (hg says it twice for one in the repository's hgrc).

use crate::config::Config;
use std::collections::BTreeMap;
use std::io::IsTerminal;

/// hg's `_effects`: effect name to SGR parameter.
const EFFECTS: &[(&str, u8)] = &[
    ("none", 0),
    ("black", 30),
    ("red", 31),
    ("green", 32),
    ("yellow", 33),
    ("blue", 34),
    ("magenta", 35),
    ("cyan", 36),
    ("white", 37),
    ("bold", 1),
    ("italic", 3),
    ("underline", 4),
    ("inverse", 7),
    ("dim", 2),
    ("black_background", 40),
    ("red_background", 41),
    ("green_background", 42),
    ("yellow_background", 43),
    ("blue_background", 44),
    ("purple_background", 45),
    ("cyan_background", 46),
    ("white_background", 47),
];

/// hg's `_defaultstyles` for the labels revfs writes.
const DEFAULT_STYLES: &[(&str, &str)] = &[
    ("diff.changed", "white"),
    ("diff.deleted", "red"),
    ("diff.deleted.changed", "red bold underline"),
    ("diff.deleted.unchanged", "red"),
    ("diff.diffline", "bold"),
    ("diff.extended", "cyan bold"),
    ("diff.file_a", "red bold"),
    ("diff.file_b", "green bold"),
    ("diff.hunk", "magenta"),
    ("diff.inserted", "green"),
    ("diff.inserted.changed", "green bold underline"),
    ("diff.inserted.unchanged", "green"),
    ("diff.tab", ""),
    ("diff.trailingwhitespace", "bold red_background"),
    ("status.added", "green bold"),
    ("status.clean", "none"),
    ("status.copied", "none"),
    ("status.deleted", "cyan bold underline"),
    ("status.ignored", "black bold"),
    ("status.modified", "blue bold"),
    ("status.removed", "red bold"),
    ("status.unknown", "magenta bold underline"),
];

fn effect_code(name: &str) -> Option<u8> {
    EFFECTS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// How labelled output is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As is.
    Off,
    /// Wrapped in ECMA-48 escapes.
    Ansi,
    /// `[label|text]`, as `--color=debug`.
    Debug,
}

/// hg's `ui.plain(feature)`: `HGPLAIN` or `HGPLAINEXCEPT` is set and `feature` is not one
/// of `HGPLAINEXCEPT`'s exceptions.
pub fn plain(feature: &str) -> bool {
    let plain = std::env::var_os("HGPLAIN");
    let except = std::env::var_os("HGPLAINEXCEPT");
    if plain.is_none() && except.is_none() {
        return false;
    }
    let except = except.unwrap_or_default();
    !except
        .to_string_lossy()
        .trim()
        .split(',')
        .any(|e| e == feature)
}

/// The colour decision and styles of one command.
#[derive(Debug, Clone)]
pub struct Colors {
    mode: Mode,
    styles: BTreeMap<String, String>,
}

/// What decides the mode, gathered from the process and the configuration.
#[derive(Debug, Clone, Default)]
pub struct ModeInputs<'a> {
    /// `--color` (it outranks `ui.color`, and makes "yes"/"on"/... mean always).
    pub flag: Option<&'a str>,
    /// `ui.color` (default `auto`).
    pub config: Option<&'a str>,
    /// `color.mode` (default `auto`).
    pub color_mode: Option<&'a str>,
    /// `ui.formatted`, when set.
    pub formatted: Option<bool>,
    /// `ui.plain("color")`.
    pub plain: bool,
    /// `TERM` is `dumb`.
    pub dumb_terminal: bool,
    /// stdout is a terminal.
    pub stdout_tty: bool,
}

/// hg's `color._modesetup` (for a non-Windows system), and the warning it may print.
pub fn mode_of(i: &ModeInputs) -> (Mode, Option<String>) {
    if i.plain {
        return (Mode::Off, None);
    }
    let (config, from_flag) = match i.flag {
        Some(f) => (f, true),
        None => (i.config.unwrap_or("auto"), false),
    };
    if config == "debug" {
        return (Mode::Debug, None);
    }
    let mut auto = config == "auto";
    let mut always = false;
    if !auto && crate::config::parse_bool(config.as_bytes()) == Some(true) {
        if from_flag || config == "always" {
            always = true;
        } else {
            auto = true;
        }
    }
    if !always && !auto {
        return (Mode::Off, None);
    }
    // ui.formatted(): false in plain mode (handled above), else the setting, else a tty.
    let formatted = always || (!i.dumb_terminal && i.formatted.unwrap_or(i.stdout_tty));
    let mode = i.color_mode.unwrap_or("auto");
    let (ok, warning) = match mode {
        "auto" | "ansi" => (true, None),
        // Terminfo sequences are not reproduced: the ANSI ones are used instead.
        "terminfo" => (true, None),
        "win32" => (
            false,
            formatted.then(|| format!("warning: failed to set color mode to {mode}\n")),
        ),
        _ => (false, None),
    };
    if !ok {
        return (Mode::Off, warning);
    }
    if always || (auto && formatted) {
        (Mode::Ansi, None)
    } else {
        (Mode::Off, None)
    }
}

impl Colors {
    /// No colour.
    pub fn off() -> Colors {
        Colors {
            mode: Mode::Off,
            styles: BTreeMap::new(),
        }
    }

    /// The colours of a command run with `--color` = `flag` under configuration `cfg`
    /// (styles from `[color]` override the defaults, as hg's `configstyles`). Warnings
    /// (unknown effects) go to stderr, as hg prints them.
    pub fn new(flag: Option<&str>, cfg: Option<&Config>) -> Colors {
        let get = |section: &str, key: &str| {
            cfg.and_then(|c| c.get(section, key))
                .map(|v| String::from_utf8_lossy(v).trim().to_owned())
        };
        let config = get("ui", "color");
        let color_mode = get("color", "mode");
        let formatted = cfg
            .and_then(|c| c.get("ui", "formatted"))
            .and_then(crate::config::parse_bool);
        let inputs = ModeInputs {
            flag,
            config: config.as_deref(),
            color_mode: color_mode.as_deref(),
            formatted,
            plain: plain("color"),
            dumb_terminal: std::env::var_os("TERM").is_some_and(|t| t == "dumb"),
            stdout_tty: std::io::stdout().is_terminal(),
        };
        let (mode, warning) = mode_of(&inputs);
        if let Some(w) = warning {
            // Once per ui object hg sets colour up on (see below).
            eprint!("{w}{w}{w}");
        }
        let mut styles: BTreeMap<String, String> = DEFAULT_STYLES
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if mode == Mode::Ansi {
            for (label, _) in DEFAULT_STYLES {
                let Some(value) = cfg.and_then(|c| c.get("color", label)) else {
                    continue;
                };
                let value = String::from_utf8_lossy(value);
                let listed: Vec<&str> = value
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|e| !e.is_empty())
                    .collect();
                if listed.is_empty() {
                    continue;
                }
                let mut good = Vec::new();
                for e in listed {
                    if effect_code(e).is_some() {
                        good.push(e);
                    } else {
                        // hg sets colour up on three ui objects in a repository (the
                        // global one, the local one, the repository's): three warnings.
                        for _ in 0..3 {
                            eprintln!(
                                "ignoring unknown color/effect '{e}' (configured in color.{label})"
                            );
                        }
                    }
                }
                styles.insert(label.to_string(), good.join(" "));
            }
        }
        Colors { mode, styles }
    }

    /// Labels change the output.
    pub fn enabled(&self) -> bool {
        self.mode != Mode::Off
    }

    /// hg's `colorlabel`: appends `msg` to `out` with the effects of `label` (labels
    /// separated by spaces), each line wrapped on its own.
    pub fn label(&self, msg: &[u8], label: &str, out: &mut Vec<u8>) {
        match self.mode {
            Mode::Off => out.extend_from_slice(msg),
            Mode::Debug => {
                if label.is_empty() || msg.is_empty() {
                    out.extend_from_slice(msg);
                } else if let Some(body) = msg.strip_suffix(b"\n") {
                    out.extend_from_slice(format!("[{label}|").as_bytes());
                    out.extend_from_slice(body);
                    out.extend_from_slice(b"]\n");
                } else {
                    out.extend_from_slice(format!("[{label}|").as_bytes());
                    out.extend_from_slice(msg);
                    out.push(b']');
                }
            }
            Mode::Ansi => {
                let mut effects: Vec<&str> = Vec::new();
                for l in label.split_ascii_whitespace() {
                    match self.styles.get(l).filter(|s| !s.is_empty()) {
                        Some(s) => effects.push(s),
                        None if effect_code(l).is_some() => effects.push(l),
                        None => {}
                    }
                }
                if effects.is_empty() {
                    out.extend_from_slice(msg);
                    return;
                }
                let mut start = b"\x1b[0".to_vec();
                for e in effects.iter().flat_map(|s| s.split_ascii_whitespace()) {
                    if let Some(code) = effect_code(e) {
                        start.extend_from_slice(format!(";{code}").as_bytes());
                    }
                }
                start.push(b'm');
                for (i, line) in msg.split(|&b| b == b'\n').enumerate() {
                    if i > 0 {
                        out.push(b'\n');
                    }
                    render(line, &start, out);
                }
            }
        }
    }
}

const STOP: &[u8] = b"\x1b[0m";

/// hg's `_render_effects` + `_mergeeffects`: `start` before every run of `text` between
/// stop sequences, a stop sequence after it.
fn render(text: &[u8], start: &[u8], out: &mut Vec<u8>) {
    let mut rest = text;
    loop {
        let (part, next) = match find(rest, STOP) {
            Some(i) => (&rest[..i], Some(&rest[i + STOP.len()..])),
            None => (rest, None),
        };
        if !part.is_empty() {
            out.extend_from_slice(start);
            out.extend_from_slice(part);
            out.extend_from_slice(STOP);
        }
        match next {
            Some(n) => rest = n,
            None => break,
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The colours of a command run in the repository at `repo_root` with `--color` = `flag`:
/// hg's configuration is read unless the flag turns colour off.
pub fn for_command(
    flag: Option<&str>,
    repo_root: &std::path::Path,
) -> Result<Colors, crate::config::ConfigError> {
    if color_off(flag) {
        return Ok(Colors::off());
    }
    let cfg = Config::load(Some(repo_root))?;
    Ok(Colors::new(flag, Some(&cfg)))
}

/// [`for_command`] with the configuration already loaded.
pub fn for_command_with(flag: Option<&str>, cfg: &Config) -> Colors {
    if color_off(flag) {
        return Colors::off();
    }
    Colors::new(flag, Some(cfg))
}

/// `--color` says no, or `HGPLAIN` does.
fn color_off(flag: Option<&str>) -> bool {
    flag.is_some_and(|f| {
        f != "debug" && crate::config::parse_bool(f.as_bytes()) != Some(true) && f != "auto"
    }) || plain("color")
}

/// The label of a status letter (`status.modified` for `M`, ...).
pub fn status_label(letter: char) -> &'static str {
    match letter {
        'M' => "status.modified",
        'A' => "status.added",
        'R' => "status.removed",
        '!' => "status.deleted",
        '?' => "status.unknown",
        'I' => "status.ignored",
        'C' => "status.clean",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ansi() -> Colors {
        Colors {
            mode: Mode::Ansi,
            styles: DEFAULT_STYLES
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn label(c: &Colors, msg: &[u8], l: &str) -> Vec<u8> {
        let mut out = Vec::new();
        c.label(msg, l, &mut out);
        out
    }

    #[test]
    fn labels_render_as_hg_ansi_mode() {
        let c = ansi();
        assert_eq!(
            label(&c, b"M ", "status.modified"),
            b"\x1b[0;34;1mM \x1b[0m".to_vec()
        );
        assert_eq!(
            label(&c, b"a.txt\n", "status.modified"),
            b"\x1b[0;34;1ma.txt\x1b[0m\n".to_vec()
        );
        assert_eq!(
            label(&c, b"  src\n", "status.copied"),
            b"\x1b[0;0m  src\x1b[0m\n".to_vec()
        );
        assert_eq!(label(&c, b"\t", "diff.tab"), b"\t".to_vec());
        assert_eq!(label(&c, b"x\n", ""), b"x\n".to_vec());
        // A stop sequence in the text restarts the effects after it.
        assert_eq!(
            label(&c, b"a\x1b[0mb", "diff.hunk"),
            b"\x1b[0;35ma\x1b[0m\x1b[0;35mb\x1b[0m".to_vec()
        );
        let d = Colors {
            mode: Mode::Debug,
            ..ansi()
        };
        assert_eq!(
            label(&d, b"a.txt\n", "status.added"),
            b"[status.added|a.txt]\n".to_vec()
        );
        assert_eq!(
            label(&d, b"A ", "status.added"),
            b"[status.added|A ]".to_vec()
        );
    }

    #[test]
    fn the_mode_follows_hg_rules() {
        let base = ModeInputs::default();
        let m = |i: ModeInputs| mode_of(&i).0;
        assert_eq!(m(base.clone()), Mode::Off);
        assert_eq!(
            m(ModeInputs {
                stdout_tty: true,
                ..base.clone()
            }),
            Mode::Ansi
        );
        assert_eq!(
            m(ModeInputs {
                stdout_tty: true,
                dumb_terminal: true,
                ..base.clone()
            }),
            Mode::Off
        );
        for yes in ["always", "yes", "on", "true", "1"] {
            assert_eq!(
                m(ModeInputs {
                    flag: Some(yes),
                    ..base.clone()
                }),
                Mode::Ansi,
                "{yes}"
            );
        }
        // From the configuration, "yes" means auto; only "always" forces.
        assert_eq!(
            m(ModeInputs {
                config: Some("yes"),
                ..base.clone()
            }),
            Mode::Off
        );
        assert_eq!(
            m(ModeInputs {
                config: Some("always"),
                ..base.clone()
            }),
            Mode::Ansi
        );
        assert_eq!(
            m(ModeInputs {
                flag: Some("never"),
                config: Some("always"),
                stdout_tty: true,
                ..base.clone()
            }),
            Mode::Off
        );
        assert_eq!(
            m(ModeInputs {
                flag: Some("always"),
                plain: true,
                ..base.clone()
            }),
            Mode::Off
        );
        assert_eq!(
            m(ModeInputs {
                flag: Some("debug"),
                ..base.clone()
            }),
            Mode::Debug
        );
        assert_eq!(
            m(ModeInputs {
                flag: Some("bogus"),
                stdout_tty: true,
                ..base
            }),
            Mode::Off
        );
    }
}
