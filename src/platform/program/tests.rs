//! Tests of how the agent program is found before a run.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;

fn sandbox() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    fs::create_dir_all(root.join("bin")).unwrap();
    fs::create_dir_all(root.join("other")).unwrap();
    (dir, root)
}

fn file(path: &Path, mode: u32) {
    fs::write(path, "#!/bin/sh\n").unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn paths_resolve_against_the_working_directory() {
    let (_dir, root) = sandbox();
    file(&root.join("bin/agent"), 0o755);
    assert_eq!(
        resolve_with("./bin/agent", &root, None).unwrap(),
        root.join("bin/agent")
    );
    let absolute = root.join("bin/agent");
    assert_eq!(
        resolve_with(absolute.to_str().unwrap(), Path::new("/"), None).unwrap(),
        absolute
    );
    let missing = resolve_with("bin/nope", &root, None).unwrap_err();
    assert!(matches!(missing, ProgramProblem::PathMissing { .. }));
    assert_eq!(
        missing.to_string(),
        format!(
            "agent program 'bin/nope' not found: no file at {}/bin/nope (a relative program path is resolved against the phase's execution workspace)",
            root.display()
        )
    );
    assert!(matches!(
        resolve_with("./bin", &root, None).unwrap_err(),
        ProgramProblem::Directory { .. }
    ));
}

#[test]
fn a_file_without_execute_permission_is_refused() {
    // Mode 0644 has no execute bit at all, so access(2) refuses even for root.
    let (_dir, root) = sandbox();
    file(&root.join("bin/agent"), 0o644);
    let problem = resolve_with("./bin/agent", &root, None).unwrap_err();
    assert_eq!(
        problem.to_string(),
        format!(
            "agent program './bin/agent' at {}/bin/agent is not executable; make it executable (chmod +x) or name another program",
            root.display()
        )
    );
}

#[test]
fn a_bare_name_takes_the_first_executable_in_path_order() {
    let (_dir, root) = sandbox();
    file(&root.join("bin/agent"), 0o644);
    file(&root.join("other/agent"), 0o755);
    let path = format!("{0}/bin:{0}/other", root.display());
    assert_eq!(
        resolve_with("agent", Path::new("/"), Some(OsStr::new(&path))).unwrap(),
        root.join("other/agent")
    );
    // Only a non-executable one: that is what is reported.
    let path = format!("{0}/bin:{0}/missing", root.display());
    assert!(matches!(
        resolve_with("agent", Path::new("/"), Some(OsStr::new(&path))).unwrap_err(),
        ProgramProblem::NotExecutable { path, .. } if path == root.join("bin/agent")
    ));
}

#[test]
fn a_missing_name_lists_the_directories_searched() {
    let (_dir, root) = sandbox();
    let path = format!("{0}/bin:{0}/other", root.display());
    let problem = resolve_with("agent", Path::new("/"), Some(OsStr::new(&path))).unwrap_err();
    assert_eq!(
        problem.to_string(),
        format!(
            "agent program 'agent' not found in PATH (searched {0}/bin, {0}/other)",
            root.display()
        )
    );
    assert_eq!(
        resolve_with("agent", Path::new("/"), Some(OsStr::new("")))
            .unwrap_err()
            .to_string(),
        "agent program 'agent' is not in PATH: PATH is empty"
    );
    // Unset: execvp's default list.
    assert!(
        resolve_with("sh", Path::new("/"), None).is_ok(),
        "sh is in /bin or /usr/bin"
    );
}

#[test]
fn relative_and_empty_path_entries_are_the_working_directory_s() {
    let (_dir, root) = sandbox();
    file(&root.join("agent"), 0o755);
    file(&root.join("bin/tool"), 0o755);
    assert_eq!(
        resolve_with("agent", &root, Some(OsStr::new("/nonexistent:"))).unwrap(),
        root.join("agent")
    );
    assert_eq!(
        resolve_with("tool", &root, Some(OsStr::new("bin"))).unwrap(),
        root.join("bin/tool")
    );
    assert!(depends_on_cwd_with(
        "tool",
        Some(OsStr::new("/usr/bin:bin"))
    ));
    assert!(depends_on_cwd_with("tool", Some(OsStr::new("/usr/bin:"))));
    assert!(!depends_on_cwd_with(
        "tool",
        Some(OsStr::new("/usr/bin:/bin"))
    ));
    assert!(depends_on_cwd_with("./tool", None));
    assert!(!depends_on_cwd_with(
        "/usr/bin/tool",
        Some(OsStr::new("bin"))
    ));
}
