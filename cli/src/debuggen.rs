//! `revfs debuggen --out DIR` (hidden): writes the shell completions and man pages that the
//! Debian package installs, generated from the clap definitions of [`crate::Cli`] so that
//! they never drift from the real options. `packaging/build-deb.sh` runs it on the release
//! binary.
//!
//! Layout of `DIR`:
//!
//! ```text
//! completions/revfs.bash   bash (function _revfs)
//! completions/_revfs       zsh
//! completions/revfs.fish   fish
//! man/revfs.1              the command, plus one page per visible subcommand:
//! man/revfs-status.1 ...   revfs-log.1, revfs-mount.1, ...
//! ```

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::{Generator, Shell};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct DebuggenArgs {
    /// Directory to write completions/ and man/ into (created if missing)
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

const BIN_NAME: &str = "revfs";

pub fn run(args: &DebuggenArgs) -> Result<u8> {
    let completions = args.out.join("completions");
    let man = args.out.join("man");
    for dir in [&completions, &man] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for path in write_completions(&completions)? {
        println!("{}", path.display());
    }
    for path in write_man_pages(&man)? {
        println!("{}", path.display());
    }
    Ok(0)
}

/// Writes the bash, zsh and fish completion scripts into `dir`; returns their paths.
fn write_completions(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut cmd = without_hidden_subcommands(crate::Cli::command());
    cmd.set_bin_name(BIN_NAME);
    cmd.build();
    let mut written = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut text = Vec::new();
        shell
            .try_generate(&cmd, &mut text)
            .with_context(|| format!("generating the {shell} completions"))?;
        let path = dir.join(shell.file_name(BIN_NAME));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// `cmd` without its hidden subcommands (`debugidentity`, `debuggen`): clap_complete offers
/// every subcommand, hidden or not (clap-rs/clap#1335), and clap has no way to remove one,
/// so the root is assembled again from `cmd`'s own arguments and visible subcommands.
fn without_hidden_subcommands(cmd: clap::Command) -> clap::Command {
    let mut visible = clap::Command::new(BIN_NAME)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(cmd.is_subcommand_required_set())
        .arg_required_else_help(cmd.is_arg_required_else_help_set());
    if let Some(about) = cmd.get_about() {
        visible = visible.about(about.clone());
    }
    for arg in cmd.get_arguments() {
        visible = visible.arg(arg.clone());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        visible = visible.subcommand(sub.clone());
    }
    visible
}

/// Writes `revfs.1` and one `revfs-<subcommand>.1` per subcommand not hidden into `dir`
/// (what `clap_mangen::generate_to` does, with the version in every page's footer);
/// returns their paths, sorted.
fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut cmd = crate::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    write_man_page(&cmd, dir, &mut pages)?;
    pages.sort();
    Ok(pages)
}

/// The date in the pages' footer: `SOURCE_DATE_EPOCH` (reproducible builds; build-deb.sh sets
/// it to the last commit's date) or now, as YYYY-MM-DD. (A page needs one: clap_mangen
/// writes an empty date as nothing, which shifts the footer's other fields.)
fn man_date() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn write_man_page(cmd: &clap::Command, dir: &Path, pages: &mut Vec<PathBuf>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_man_page(sub, dir, pages)?;
    }
    let man = clap_mangen::Man::new(cmd.clone())
        .date(man_date())
        .source(format!("{BIN_NAME} {}", env!("CARGO_PKG_VERSION")))
        .manual("revfs manual");
    let path = man.generate_to(dir).with_context(|| {
        format!(
            "writing the man page of {} into {}",
            cmd.get_name(),
            dir.display()
        )
    })?;
    pages.push(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_completions_and_a_page_per_visible_subcommand() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let completions = write_completions(dir.path())?;
        let names: Vec<_> = completions
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .collect();
        assert_eq!(names, ["revfs.bash", "_revfs", "revfs.fish"]);
        for path in &completions {
            let text = std::fs::read_to_string(path)?;
            assert!(text.contains("status"), "{}", path.display());
            assert!(!text.contains("debuggen"), "{}", path.display());
            assert!(!text.contains("debugidentity"), "{}", path.display());
        }

        let pages = write_man_pages(dir.path())?;
        // A page for every visible subcommand, and for theirs (`revfs-redirect-add.1`).
        fn visible_pages(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                let name = format!("{prefix}-{}", sub.get_name());
                out.push(format!("{name}.1"));
                visible_pages(sub, &name, out);
            }
        }
        let cmd = crate::Cli::command().disable_help_subcommand(true);
        let mut visible = Vec::new();
        visible_pages(&cmd, "revfs", &mut visible);
        assert!(visible.contains(&"revfs-redirect-add.1".to_owned()));
        assert_eq!(pages.len(), visible.len() + 1);
        assert!(dir.path().join("revfs.1").is_file());
        for name in &visible {
            assert!(dir.path().join(name).is_file(), "{name}");
        }
        let status = std::fs::read_to_string(dir.path().join("revfs-status.1"))?;
        assert!(status.contains(".TH revfs-status 1 "));
        assert!(status.contains("\"revfs manual\""));
        assert!(!dir.path().join("revfs-debuggen.1").exists());
        Ok(())
    }
}
