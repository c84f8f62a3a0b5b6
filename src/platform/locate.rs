//! Finding things on disk: the canonical plan path, its plan workspace (the nearest ancestor
//! holding `.ai-session-handler`, `.git` or `AGENTS.md`), the keyed state directory, and each
//! phase's execution workspace. Canonical paths are UTF-8 strings (they go into JSON records,
//! prompts and argv); a non-UTF-8 path is an input error naming it.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::domain::plan_key::plan_key;
use crate::domain::state::StateLayout;

/// Directory (under the plan workspace) that holds config and per-plan state.
pub(crate) const HANDLER_DIR: &str = ".ai-session-handler";
const WORKSPACE_MARKERS: [&str; 3] = [HANDLER_DIR, ".git", "AGENTS.md"];

/// Where a plan and everything derived from its identity lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlanLocation {
    /// Canonical absolute plan path.
    pub plan_path: String,
    /// Canonical plan workspace.
    pub workspace: String,
    /// The plan path relative to the workspace, `/`-separated.
    pub relative_plan_path: String,
    /// SHA-256 of `relative_plan_path`.
    pub key: String,
    /// `<workspace>/.ai-session-handler/config.json`.
    pub config_path: String,
    /// `<workspace>/.ai-session-handler/plans/<key>/…`.
    pub layout: StateLayout,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LocateError {
    #[error("--plan {}: cannot open plan: {}", .plan.display(), os_message(.source))]
    CannotOpen { plan: PathBuf, source: io::Error },
    #[error("--plan {}: is a directory; expected a Markdown plan file", .0.display())]
    IsADirectory(PathBuf),
    #[error("{0}: plan has no parent directory")]
    NoParent(String),
    #[error("{plan}: no plan workspace found: neither {} nor any parent directory contains {HANDLER_DIR}, .git or AGENTS.md", .plan_dir.display())]
    NoWorkspace { plan: String, plan_dir: PathBuf },
    #[error("{plan}: plan is outside workspace {workspace}")]
    OutsideWorkspace { plan: String, workspace: String },
    #[error("{}: path is not valid UTF-8", .0.display())]
    NotUtf8(PathBuf),
}

/// Resolves `--plan` (relative to the current directory) and discovers its workspace.
pub(crate) fn locate_plan(plan_arg: &Path) -> Result<PlanLocation, LocateError> {
    let canonical =
        std::fs::canonicalize(plan_arg).map_err(|error| cannot_open(plan_arg, error))?;
    locate_canonical(canonical)
}

/// Like [`locate_plan`], but a plan file that no longer exists in an existing directory is
/// located where it was (its directory canonical, its name as given), so that `status` can
/// still report the state recorded for it. A dangling symlink is located as the link itself.
pub(crate) fn locate_plan_even_if_gone(plan_arg: &Path) -> Result<PlanLocation, LocateError> {
    match std::fs::canonicalize(plan_arg) {
        Ok(canonical) => locate_canonical(canonical),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            let (Some(name), Some(dir)) = (
                plan_arg.file_name(),
                match plan_arg.parent() {
                    Some(dir) if !dir.as_os_str().is_empty() => std::fs::canonicalize(dir).ok(),
                    _ => std::fs::canonicalize(".").ok(),
                },
            ) else {
                return Err(cannot_open(plan_arg, error));
            };
            locate_canonical(dir.join(name))
        }
        Err(error) => Err(cannot_open(plan_arg, error)),
    }
}

fn cannot_open(plan_arg: &Path, source: io::Error) -> LocateError {
    LocateError::CannotOpen {
        plan: plan_arg.to_path_buf(),
        source,
    }
}

fn locate_canonical(canonical: PathBuf) -> Result<PlanLocation, LocateError> {
    if canonical.is_dir() {
        return Err(LocateError::IsADirectory(canonical));
    }
    let plan_path = utf8(&canonical)?;
    let plan_dir = canonical
        .parent()
        .ok_or_else(|| LocateError::NoParent(plan_path.clone()))?;
    let workspace_dir = plan_dir
        .ancestors()
        .find(|dir| {
            WORKSPACE_MARKERS
                .iter()
                .any(|marker| dir.join(marker).exists())
        })
        .ok_or_else(|| LocateError::NoWorkspace {
            plan: plan_path.clone(),
            plan_dir: plan_dir.to_path_buf(),
        })?;
    let workspace = utf8(workspace_dir)?;
    let relative =
        canonical
            .strip_prefix(workspace_dir)
            .map_err(|_| LocateError::OutsideWorkspace {
                plan: plan_path.clone(),
                workspace: workspace.clone(),
            })?;
    let components: Vec<&str> = relative
        .components()
        .map(|component| component.as_os_str().to_str().unwrap_or_default())
        .collect();
    let key = plan_key(components.iter().copied());
    let handler_dir = format!("{}/{HANDLER_DIR}", trim_root(&workspace));
    Ok(PlanLocation {
        relative_plan_path: components.join("/"),
        key: key.clone(),
        config_path: format!("{handler_dir}/config.json"),
        layout: StateLayout {
            dir: format!("{handler_dir}/plans/{key}"),
        },
        plan_path,
        workspace,
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WorkspaceProblem {
    NotADirectory { resolved: String },
    NoAgentsFile { resolved: String },
    NotUtf8 { resolved: String },
}

impl WorkspaceProblem {
    /// The message tail after `phase <id> workspace '<value>' `.
    pub(crate) fn describe(&self) -> String {
        let (resolved, what) = match self {
            Self::NotADirectory { resolved } => (resolved, "is not an existing directory"),
            Self::NoAgentsFile { resolved } => (resolved, "does not contain AGENTS.md at its root"),
            Self::NotUtf8 { resolved } => (resolved, "is not valid UTF-8"),
        };
        format!("resolves to {resolved}, which {what}")
    }
}

/// Resolves a phase's declared (relative) workspace against the plan workspace and checks it
/// is an existing directory with `AGENTS.md` at its root. Returns the canonical path.
pub(crate) fn resolve_execution_workspace(
    plan_workspace: &str,
    declared: &str,
) -> Result<String, WorkspaceProblem> {
    let joined = Path::new(plan_workspace).join(declared);
    let lexical = normalize_lexically(&joined);
    let shown = lexical.display().to_string();
    let canonical = match std::fs::canonicalize(&joined) {
        Ok(path) if path.is_dir() => path,
        _ => return Err(WorkspaceProblem::NotADirectory { resolved: shown }),
    };
    let resolved = canonical
        .to_str()
        .map(str::to_owned)
        .ok_or(WorkspaceProblem::NotUtf8 { resolved: shown })?;
    if !canonical.join("AGENTS.md").is_file() {
        return Err(WorkspaceProblem::NoAgentsFile { resolved });
    }
    Ok(resolved)
}

/// Removes `.` and folds `..` without touching the filesystem (for messages).
fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn trim_root(workspace: &str) -> &str {
    if workspace == "/" { "" } else { workspace }
}

fn utf8(path: &Path) -> Result<String, LocateError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| LocateError::NotUtf8(path.to_path_buf()))
}

/// An OS error's message without Rust's `(os error N)` suffix.
pub(crate) fn os_message(error: &io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(index) => text[..index].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn finds_nearest_marker_and_keys_by_relative_path() {
        let root = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(root.path()).unwrap();
        fs::write(ws.join("AGENTS.md"), "").unwrap();
        fs::create_dir_all(ws.join("docs/plans")).unwrap();
        fs::write(ws.join("docs/plans/p.md"), "").unwrap();
        let location = locate_plan(&ws.join("docs/plans/../plans/p.md")).unwrap();
        assert_eq!(location.workspace, ws.to_str().unwrap());
        assert_eq!(location.relative_plan_path, "docs/plans/p.md");
        assert_eq!(location.key, plan_key(["docs", "plans", "p.md"]));
        assert_eq!(
            location.layout.state_path(),
            format!(
                "{}/.ai-session-handler/plans/{}/state.json",
                ws.display(),
                location.key
            )
        );
    }

    #[test]
    fn a_gone_plan_is_located_where_it_was_for_reports() {
        let root = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(root.path()).unwrap();
        fs::write(ws.join("AGENTS.md"), "").unwrap();
        fs::create_dir_all(ws.join("docs/plans")).unwrap();
        let gone = ws.join("docs/plans/../plans/gone.md");
        assert!(locate_plan(&gone).is_err());
        let location = locate_plan_even_if_gone(&gone).unwrap();
        assert_eq!(location.relative_plan_path, "docs/plans/gone.md");
        assert_eq!(location.key, plan_key(["docs", "plans", "gone.md"]));
        // A missing directory is still an error naming the flag.
        let error = locate_plan_even_if_gone(&ws.join("nowhere/p.md"))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("--plan "), "{error}");
    }

    #[test]
    fn missing_plan_names_the_flag() {
        let error = locate_plan(Path::new("/definitely/not/here.md"))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("--plan /definitely/not/here.md: cannot open plan"),
            "{error}"
        );
    }

    #[test]
    fn execution_workspace_checks() {
        let root = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(root.path()).unwrap();
        let ws_str = ws.to_str().unwrap();
        fs::create_dir(ws.join("svc")).unwrap();
        let problem = resolve_execution_workspace(ws_str, "svc").unwrap_err();
        assert!(matches!(problem, WorkspaceProblem::NoAgentsFile { .. }));
        fs::write(ws.join("svc/AGENTS.md"), "").unwrap();
        assert_eq!(
            resolve_execution_workspace(ws_str, "./svc").unwrap(),
            ws.join("svc").to_str().unwrap()
        );
        let missing = resolve_execution_workspace(ws_str, "../nope-xyz").unwrap_err();
        assert_eq!(
            missing.describe(),
            format!(
                "resolves to {}, which is not an existing directory",
                ws.parent().unwrap().join("nope-xyz").display()
            )
        );
    }
}
