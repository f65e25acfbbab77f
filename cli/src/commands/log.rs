//! `revfs log`: changeset history in hg's default, verbose, quiet and JSON forms.

use crate::ui::{format_date, ignore_broken_pipe, json_string, Out};
use anyhow::{bail, Result};
use clap::Args;
use revfs_store::changelog::Changeset;
use revfs_store::phases::{self, Phase};
use revfs_store::{names, Node, Repo, Rev, NULL_REV};
use std::collections::HashMap;

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Show the specified revision or range
    #[arg(
        short = 'r',
        long = "rev",
        value_name = "REV",
        allow_hyphen_values = true
    )]
    rev: Vec<String>,
    /// Limit number of changes displayed
    #[arg(short = 'l', long = "limit", value_name = "NUM")]
    limit: Option<i64>,
    #[command(flatten)]
    display: DisplayArgs,
}

/// How changesets are shown: shared by `log` and `parents`.
#[derive(Args, Debug)]
pub struct DisplayArgs {
    /// Display with template (`json`, or keywords and filters such as `{rev}:{node|short}\n`)
    #[arg(short = 'T', long = "template", value_name = "TEMPLATE")]
    template: Option<String>,
    /// Show the files changed and the full description
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Show only revision numbers and short nodes
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
}

impl DisplayArgs {
    fn style(&self) -> Result<Style> {
        Ok(match self.template.as_deref() {
            None if self.quiet => Style::Quiet,
            None if self.verbose => Style::Verbose,
            None => Style::Default,
            Some("json") => Style::Json {
                verbose: self.verbose,
                quiet: self.quiet,
            },
            Some(spec) => Style::Template(revfs_hg::template::Template::parse(spec)?),
        })
    }
}

enum Style {
    Default,
    Verbose,
    Quiet,
    Json { verbose: bool, quiet: bool },
    Template(revfs_hg::template::Template),
}

/// Names attached to revisions, loaded once per command.
struct Labels {
    tags: HashMap<Rev, Vec<Vec<u8>>>,
    bookmarks: HashMap<Rev, Vec<Vec<u8>>>,
    phases: Vec<Phase>,
}

impl Labels {
    fn load(repo: &Repo) -> Result<Labels> {
        let invert = |map: std::collections::BTreeMap<Vec<u8>, Rev>| {
            let mut by_rev: HashMap<Rev, Vec<Vec<u8>>> = HashMap::new();
            for (name, rev) in map {
                by_rev.entry(rev).or_default().push(name);
            }
            by_rev
        };
        Ok(Labels {
            tags: invert(names::tags(repo)?),
            bookmarks: invert(names::bookmarks(repo)?),
            phases: phases::compute(repo.store_path(), repo.changelog())?,
        })
    }

    fn of(map: &HashMap<Rev, Vec<Vec<u8>>>, rev: Rev) -> &[Vec<u8>] {
        map.get(&rev).map(Vec::as_slice).unwrap_or(&[])
    }

    fn phase(&self, rev: Rev) -> Phase {
        usize::try_from(rev)
            .ok()
            .and_then(|r| self.phases.get(r).copied())
            .unwrap_or(Phase::Public)
    }
}

/// Everything printed about one changeset.
struct Entry<'a> {
    rev: Rev,
    node: Node,
    parents: Vec<(Rev, Node)>,
    cs: Changeset,
    tags: &'a [Vec<u8>],
    bookmarks: &'a [Vec<u8>],
    phase: Phase,
}

fn entry<'a>(repo: &Repo, labels: &'a Labels, rev: Rev) -> Result<Entry<'a>> {
    let cl = repo.changelog();
    let [p1, p2] = if rev == NULL_REV {
        [NULL_REV, NULL_REV]
    } else {
        cl.parents(rev)?
    };
    let mut parents = vec![(p1, cl.node(p1)?)];
    if p2 != NULL_REV {
        parents.push((p2, cl.node(p2)?));
    }
    Ok(Entry {
        rev,
        node: cl.node(rev)?,
        parents,
        cs: repo.changeset(rev)?,
        tags: Labels::of(&labels.tags, rev),
        bookmarks: Labels::of(&labels.bookmarks, rev),
        phase: labels.phase(rev),
    })
}

/// What `-T TEMPLATE` can show about an entry.
fn fields<'a>(e: &'a Entry) -> revfs_hg::template::Fields<'a> {
    let parent = |i: usize| match e.parents.get(i) {
        Some((rev, node)) => (*rev, node.to_hex()),
        None => (NULL_REV, Node::NULL.to_hex()),
    };
    revfs_hg::template::Fields {
        rev: e.rev,
        node: e.node.to_hex(),
        desc: &e.cs.description,
        author: &e.cs.user,
        branch: e.cs.branch(),
        tags: e.tags.iter().map(Vec::as_slice).collect(),
        bookmarks: e.bookmarks.iter().map(Vec::as_slice).collect(),
        phase: e.phase.name(),
        phase_index: e.phase as i32,
        files: e.cs.files.iter().map(Vec::as_slice).collect(),
        time: e.cs.time,
        tz: e.cs.tz,
        parents: [parent(0), parent(1)],
        extras: Some(&e.cs.extra),
        ..Default::default()
    }
}

/// The template fields that cost a manifest or a filelog, for a template that uses them:
/// the files added, removed and modified (hg's `computechangesetfiles*`), the copies
/// (`getrenamedfn`), the manifest's revision, the graph node symbol.
fn costly_fields(
    ws: &super::Workspace,
    t: &revfs_hg::template::Template,
    e: &Entry,
    working_parent: Rev,
    f: &mut revfs_hg::template::Fields,
) -> Result<()> {
    let repo = ws.repo()?;
    f.repo_len = repo.changelog().len() as i32;
    if t.uses("manifest") {
        let mrev = if e.cs.manifest.is_null() {
            -1
        } else {
            repo.manifestlog()
                .rev_of(&e.cs.manifest)
                .map_or(-1, |r| r as i64)
        };
        f.manifest = (mrev, e.cs.manifest.to_hex());
    }
    if t.uses("graphnode") {
        f.graphnode = if e.rev == working_parent {
            "@"
        } else if e.cs.closes_branch() {
            "_"
        } else {
            "o"
        };
    }
    let by_status = ["file_adds", "file_dels", "file_mods"]
        .iter()
        .any(|k| t.uses(k));
    if !(by_status || t.uses("file_copies")) || e.rev < 0 {
        return Ok(());
    }
    let mf = repo.manifest_of(e.rev)?;
    let parents: Vec<_> = e
        .parents
        .iter()
        .filter(|(r, _)| *r >= 0)
        .map(|(r, _)| repo.manifest_of(*r))
        .collect::<std::result::Result<_, _>>()?;
    for file in &e.cs.files {
        let entry = mf.find(file)?;
        let mut in_parents = false;
        for p in &parents {
            in_parents |= p.find(file)?.is_some();
        }
        if !in_parents {
            f.file_adds.push(file.clone());
        }
        match &entry {
            None if parents
                .first()
                .is_some_and(|p| matches!(p.find(file), Ok(Some(_)))) =>
            {
                f.file_dels.push(file.clone())
            }
            Some(_) if in_parents => f.file_mods.push(file.clone()),
            _ => {}
        }
        if let (Some(entry), true) = (entry, t.uses("file_copies")) {
            let fl = repo.filelog(file)?;
            let frev = fl.rev_of(&entry.node)?;
            if let Some(src) = fl.copy_source(frev)? {
                let mut copied = true;
                if fl.linkrev(frev, repo.changelog())? != e.rev {
                    for p in &parents {
                        if p.find(file)?.is_some_and(|pe| pe.node == entry.node) {
                            copied = false;
                        }
                    }
                }
                if copied {
                    f.file_copies.push((file.clone(), src.path));
                }
            }
        }
    }
    Ok(())
}

fn first_line(desc: &[u8]) -> &[u8] {
    desc.split(|&b| b == b'\n').next().unwrap_or_default()
}

fn line(out: &mut Vec<u8>, label: &str, value: &[u8]) {
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(value);
    out.push(b'\n');
}

fn render_text(e: &Entry, style: &Style, out: &mut Vec<u8>) {
    if matches!(style, Style::Quiet) {
        out.extend_from_slice(format!("{}:{}\n", e.rev, e.node.short()).as_bytes());
        return;
    }
    line(
        out,
        "changeset:   ",
        format!("{}:{}", e.rev, e.node.short()).as_bytes(),
    );
    if e.cs.branch() != b"default" {
        line(out, "branch:      ", e.cs.branch());
    }
    for b in e.bookmarks {
        line(out, "bookmark:    ", b);
    }
    for t in e.tags {
        line(out, "tag:         ", t);
    }
    // hg shows parents only when they are not simply the previous revision.
    let meaningful = e.parents.len() > 1 || e.parents[0].0 < e.rev - 1;
    if meaningful {
        for (rev, node) in &e.parents {
            line(
                out,
                "parent:      ",
                format!("{rev}:{}", node.short()).as_bytes(),
            );
        }
    }
    line(out, "user:        ", &e.cs.user);
    line(
        out,
        "date:        ",
        format_date(e.cs.time, e.cs.tz).as_bytes(),
    );
    let desc = e.cs.description.trim_ascii();
    if matches!(style, Style::Verbose) {
        if !e.cs.files.is_empty() {
            line(out, "files:       ", &e.cs.files.join(&b' '));
        }
        if !desc.is_empty() {
            out.extend_from_slice(b"description:\n");
            out.extend_from_slice(desc);
            out.extend_from_slice(b"\n\n");
        }
    } else if !desc.is_empty() {
        line(out, "summary:     ", first_line(&e.cs.description));
    }
    out.push(b'\n');
}

fn json_list<'a>(items: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let parts: Vec<Vec<u8>> = items.map(json_string).collect();
    let mut out = b"[".to_vec();
    out.extend_from_slice(&parts.join(&b", "[..]));
    out.push(b']');
    out
}

fn render_json(e: &Entry, verbose: bool, quiet: bool) -> Vec<u8> {
    let mut fields: Vec<(&str, Vec<u8>)> = Vec::new();
    let node_hex = e.node.to_hex();
    if !quiet {
        fields.push((
            "bookmarks",
            json_list(e.bookmarks.iter().map(Vec::as_slice)),
        ));
        fields.push(("branch", json_string(e.cs.branch())));
        fields.push(("date", format!("[{}, {}]", e.cs.time, e.cs.tz).into_bytes()));
        fields.push(("desc", json_string(&e.cs.description)));
        if verbose {
            fields.push(("files", json_list(e.cs.files.iter().map(Vec::as_slice))));
        }
    }
    fields.push(("node", json_string(node_hex.as_bytes())));
    if !quiet {
        let parents: Vec<String> = e.parents.iter().map(|(_, n)| n.to_hex()).collect();
        fields.push(("parents", json_list(parents.iter().map(|p| p.as_bytes()))));
        fields.push(("phase", json_string(e.phase.name().as_bytes())));
    }
    fields.push(("rev", e.rev.to_string().into_bytes()));
    if !quiet {
        fields.push(("tags", json_list(e.tags.iter().map(Vec::as_slice))));
        fields.push(("user", json_string(&e.cs.user)));
    }
    let mut out = b" {\n".to_vec();
    let body: Vec<Vec<u8>> = fields
        .into_iter()
        .map(|(k, v)| {
            let mut l = format!("  \"{k}\": ").into_bytes();
            l.extend_from_slice(&v);
            l
        })
        .collect();
    out.extend_from_slice(&body.join(&b",\n"[..]));
    out.extend_from_slice(b"\n }");
    out
}

pub fn run(cli: &crate::Cli, args: &LogArgs) -> Result<u8> {
    let style = args.display.style()?;
    if matches!(args.limit, Some(n) if n <= 0) {
        bail!("limit must be positive");
    }
    let ws = super::open_workspace(cli)?;
    let mut revs = if args.rev.is_empty() {
        (0..ws.repo()?.changelog().len() as Rev).rev().collect()
    } else {
        ws.resolve_revs(&args.rev)?
    };
    if let Some(limit) = args.limit {
        revs.truncate(limit as usize);
    }
    show(&ws, &revs, &style)
}

/// Prints changesets in one of log's styles.
fn show(ws: &super::Workspace, revs: &[Rev], style: &Style) -> Result<u8> {
    let repo = ws.repo()?;
    let labels = Labels::load(repo)?;
    let mut out = Out::new();
    let mut result = Ok(());
    let is_json = matches!(style, Style::Json { .. });
    let working_parent = ws.resolve_single(Some(".")).unwrap_or(NULL_REV);
    if let Style::Template(t) = style {
        // A merge's removed files need its common ancestors, which revfs does not
        // compute; and a repository with obsolescence markers has graph symbols revfs
        // does not know. Both are left to hg, before anything is printed.
        if t.uses("file_dels") {
            for &rev in revs {
                if rev >= 0 && repo.changelog().parents(rev)?[1] != NULL_REV {
                    bail!("template keyword 'file_dels' of a merge is not supported by revfs (use hg instead)");
                }
            }
        }
        if t.uses("graphnode") {
            ws.refuse_merge("log")?;
        }
        if t.uses("graphnode")
            && std::fs::metadata(repo.store_path().join("obsstore")).is_ok_and(|m| m.len() > 0)
        {
            bail!("template keyword 'graphnode' with obsolescence markers is not supported by revfs (use hg instead)");
        }
    }
    if is_json {
        result = out.write(if revs.is_empty() { b"[" } else { b"[\n" });
    }
    for (i, &rev) in revs.iter().enumerate() {
        if result.is_err() {
            break;
        }
        let e = entry(repo, &labels, rev)?;
        let mut buf = Vec::with_capacity(512);
        match style {
            Style::Json { verbose, quiet } => {
                if i > 0 {
                    buf.extend_from_slice(b",\n");
                }
                buf.extend_from_slice(&render_json(&e, *verbose, *quiet));
            }
            Style::Template(t) => {
                let mut f = fields(&e);
                costly_fields(ws, t, &e, working_parent, &mut f)?;
                t.render(&f, &mut buf)
            }
            _ => render_text(&e, style, &mut buf),
        }
        result = out.write(&buf);
    }
    if is_json && result.is_ok() {
        result = out.write(b"\n]\n");
    }
    ignore_broken_pipe(result.and_then(|_| out.finish()))?;
    Ok(0)
}

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Show the parents of the specified revision")))]
pub struct ParentsArgs {
    #[command(flatten)]
    rev: super::RevArg,
    #[command(flatten)]
    display: DisplayArgs,
}

/// `hg parents`: the working copy's parent (a mount's, or the dirstate's), or a revision's.
pub fn parents(cli: &crate::Cli, args: &ParentsArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    if args.rev.rev.is_none() {
        ws.refuse_merge("parents")?;
    }
    let cl = ws.repo()?.changelog();
    let mut revs = Vec::new();
    match &args.rev.rev {
        Some(spec) => {
            let rev = ws.resolve_single(Some(spec))?;
            if rev != NULL_REV {
                revs.extend(cl.parents(rev)?.into_iter().filter(|&p| p != NULL_REV));
            }
        }
        None => {
            revs.push(ws.resolve_single(Some("."))?);
            if ws.mount.is_none() {
                if let Some([_, p2]) = revfs_store::dirstate::parents(ws.repo()?)? {
                    if let Some(r) = cl.rev_of(&p2).filter(|&r| r != NULL_REV) {
                        revs.push(r);
                    }
                }
            }
            revs.retain(|&r| r != NULL_REV);
        }
    }
    show(&ws, &revs, &args.display.style()?)
}

#[derive(Args, Debug)]
#[command(mut_arg("rev", |a| a.help("Identify the specified revision")))]
pub struct IdArgs {
    #[command(flatten)]
    rev: super::RevArg,
}

/// `hg id`: short node (`+` when the working copy has changes), branch, tags, bookmarks.
pub fn id(cli: &crate::Cli, args: &IdArgs) -> Result<u8> {
    let ws = super::open_workspace(cli)?;
    if args.rev.rev.is_none() {
        ws.refuse_merge("id")?;
    }
    let repo = ws.repo()?;
    let rev = ws.resolve_single(Some(args.rev.rev.as_deref().unwrap_or(".")))?;
    let dirty = match (&args.rev.rev, &ws.mount) {
        (Some(_), _) => false,
        (None, Some(_)) => revfs_vfs::client::status::fetch_status(&ws, false, false, false)?
            .iter()
            .any(|(l, _)| matches!(l, 'M' | 'A' | 'R' | '!')),
        (None, None) => {
            bail!("revfs id without -r needs a revfs mount (it reads the mount's journal)")
        }
    };
    let labels = Labels::load(repo)?;
    let cs = repo.changeset(rev)?;
    let mut line = repo.changelog().node(rev)?.short().into_bytes();
    if dirty {
        line.push(b'+');
    }
    if cs.branch() != b"default" {
        line.extend_from_slice(b" (");
        line.extend_from_slice(cs.branch());
        line.push(b')');
    }
    for name in Labels::of(&labels.tags, rev)
        .iter()
        .chain(Labels::of(&labels.bookmarks, rev))
    {
        line.push(b' ');
        line.extend_from_slice(name);
    }
    line.push(b'\n');
    let mut out = Out::new();
    ignore_broken_pipe(out.write(&line).and_then(|_| out.finish()))?;
    Ok(0)
}
