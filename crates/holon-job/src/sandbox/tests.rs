//! The plan a mandate compiles to: globs to hierarchies, the state directory, ports.
use super::*;
use crate::mandate::{JobLimits, PathRules};

fn mandate(workdir: &Path, read: &[&str], write: &[&str], hosts: &[&str], commands: &[&str]) -> JobMandate {
    JobMandate {
        mandate: 1,
        job: "j".into(),
        workdir: workdir.display().to_string(),
        observed_runs: 1,
        tools: vec!["terminal".into()],
        paths: PathRules {
            read: read.iter().map(|s| (*s).to_owned()).collect(),
            write: write.iter().map(|s| (*s).to_owned()).collect(),
        },
        commands: commands.iter().map(|s| (*s).to_owned()).collect(),
        hosts: hosts.iter().map(|s| (*s).to_owned()).collect(),
        limits: JobLimits::default(),
        sandbox: None,
    }
}

/// A test's directory, removed when the test ends.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("holon-sandbox-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("w/reports/2026")).unwrap();
    std::fs::create_dir_all(d.join("state")).unwrap();
    std::fs::write(d.join("w/notes.txt"), "n").unwrap();
    Scratch(std::fs::canonicalize(d).unwrap())
}

#[test]
fn a_glob_becomes_the_directory_before_its_first_wildcard() {
    let w = Path::new("/w");
    assert_eq!(hierarchy_of("reports/*.md", w, false), PathBuf::from("/w/reports"));
    assert_eq!(hierarchy_of("reports/2026/**", w, false), PathBuf::from("/w/reports/2026"));
    assert_eq!(hierarchy_of("**", w, true), PathBuf::from("/w"));
    assert_eq!(hierarchy_of("src/main.rs", w, true), PathBuf::from("/w/src/main.rs"));
    assert_eq!(hierarchy_of("out.txt", w, false), PathBuf::from("/w"), "a literal write is its directory's");
    assert_eq!(hierarchy_of("/tmp/holon-*.log", w, false), PathBuf::from("/tmp"));
    assert_eq!(hierarchy_of("../shared/*.csv", w, true), PathBuf::from("/shared"));
    assert_eq!(hierarchy_of("a/b?/c", w, false), PathBuf::from("/w/a"));
}

#[test]
fn rules_become_existing_hierarchies_and_missing_ones_are_said() {
    let d = scratch("plan");
    let m = mandate(&d.join("w"), &["**"], &["reports/*.md", "drafts/*.md"], &[], &[]);
    let plan = Plan::compile(&m, &d.join("state")).unwrap();
    assert_eq!(plan.write.iter().map(|g| g.path.clone()).collect::<Vec<_>>(), vec![d.join("w/reports")]);
    assert!(plan.devices.iter().any(|(g, write)| g.path == Path::new("/dev/null") && *write));
    assert!(!plan.read.iter().any(|g| g.path == Path::new("/dev")), "no device is read but the listed ones");
    assert!(plan.read.iter().any(|g| g.path == d.join("w") && g.why == "paths.read[0]"));
    assert!(plan.read.iter().any(|g| g.path == Path::new("/usr")));
    assert_eq!(plan.skipped.len(), 1, "{:?}", plan.skipped);
    assert_eq!(plan.skipped[0].rule, "drafts/*.md");
    assert_eq!(plan.tcp_connect, None, "hosts: [] is no TCP at all");
    let text = plan.describe();
    assert!(text.contains("no TCP connection"), "{text}");
    assert!(text.contains("drafts/*.md"), "{text}");
}

#[test]
fn a_write_grant_holding_the_state_directory_refuses_the_plan() {
    let d = scratch("state");
    std::fs::create_dir_all(d.join("w/.holon")).unwrap();
    let m = mandate(&d.join("w"), &["**"], &["notes.txt"], &[], &[]);
    let err = Plan::compile(&m, &d.join("w/.holon")).unwrap_err();
    assert!(matches!(err, PlanError::StateWritable { .. }), "{err}");
    assert!(err.to_string().contains("HOLON_STATE"), "{err}");
    // Reached through a symbolic link, the state is the same directory.
    std::os::unix::fs::symlink(d.join("w"), d.join("link")).unwrap();
    let err = Plan::compile(&m, &d.join("link/.holon")).unwrap_err();
    assert!(matches!(err, PlanError::StateWritable { .. }), "{err}");
    // A write rule inside the state directory is never granted.
    let m = mandate(&d.join("w"), &[], &[".holon/jobs/*"], &[], &[]);
    std::fs::create_dir_all(d.join("w/.holon/jobs")).unwrap();
    let plan = Plan::compile(&m, &d.join("w/.holon")).unwrap();
    assert!(plan.write.is_empty(), "{:?}", plan.write);
    assert!(plan.skipped[0].reason.contains("never writable"));
}

#[test]
fn hosts_open_the_ports_their_rules_imply() {
    let d = scratch("ports");
    let m = mandate(&d.join("w"), &[], &[], &["pypi.org"], &["curl -s https://pypi.org:8443/simple", "ssh"]);
    let plan = Plan::compile(&m, &d.join("state")).unwrap();
    assert_eq!(plan.tcp_connect, Some(vec![22, 53, 80, 443, 8443]));
}

#[test]
fn the_mandate_may_name_its_own_system_list() {
    let d = scratch("system");
    let mut m = mandate(&d.join("w"), &[], &[], &[], &[]);
    m.sandbox = Some(crate::mandate::SandboxRules { system_read: vec!["/usr".into(), "/nowhere".into()] });
    let plan = Plan::compile(&m, &d.join("state")).unwrap();
    assert!(plan.read.iter().any(|g| g.path == Path::new("/usr") && g.why == "sandbox.system_read[0]"));
    assert!(!plan.read.iter().any(|g| g.path == Path::new("/etc")), "only the mandate's list");
    assert!(plan.skipped.iter().any(|s| s.rule == "/nowhere"), "a missing path the mandate names is said");
}

#[test]
fn a_rule_reached_through_a_link_is_not_granted() {
    let d = scratch("link");
    std::fs::create_dir_all(d.join("outside")).unwrap();
    std::fs::remove_dir_all(d.join("w/reports")).unwrap();
    std::os::unix::fs::symlink(d.join("outside"), d.join("w/reports")).unwrap();
    let m = mandate(&d.join("w"), &["reports/**"], &["reports/*.md"], &[], &[]);
    let plan = Plan::compile(&m, &d.join("state")).unwrap();
    assert!(plan.write.is_empty() && !plan.read.iter().any(|g| g.path == d.join("outside")), "{plan:?}");
    assert_eq!(plan.skipped.len(), 2, "{:?}", plan.skipped);
    assert!(plan.skipped[0].reason.contains("symbolic link"), "{:?}", plan.skipped);
}

#[test]
fn a_write_grant_holding_holon_refuses_the_plan() {
    let d = scratch("exe");
    std::fs::write(d.join("w/reports/holon"), "").unwrap();
    let m = mandate(&d.join("w"), &[], &["reports/*.md"], &[], &[]);
    let plan = Plan::compile(&m, &d.join("state")).unwrap();
    let err = plan.refuse_writable_program(&d.join("w/reports/holon")).unwrap_err();
    assert!(matches!(err, PlanError::HolonWritable { .. }), "{err}");
    assert!(plan.refuse_writable_program(Path::new("/usr/bin/true")).is_ok());
}
