//! The kernel sandbox of `holon job exec` (docs/job.md "What the kernel enforces"): an
//! approved job mandate compiled into the hierarchies and ports Landlock can hold a
//! process to ([`Plan::compile`], pure: paths are looked up, nothing is changed), and
//! the ruleset applied to the running process ([`kernel`]).
//!
//! Landlock rules are hierarchies, not globs: each path rule becomes the smallest
//! existing directory that contains everything the glob can match (the literal
//! components before its first wildcard; a literal path's parent for writes). The kernel
//! rule is therefore coarser than the glob, never wider than the directory the glob lives
//! in; the check still judges the glob itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::mandate::JobMandate;

// The steps of `holon job exec` (the binary and its helper use them; not promised).
#[doc(hidden)]
pub mod handoff;
pub mod kernel;
#[doc(hidden)]
pub mod reap;
#[doc(hidden)]
pub mod temp;

/// Directories outside the workdir a command may read and run programs from, when the
/// mandate's `sandbox.system_read` does not say otherwise.
/// `/dev` is not in it: reading every device would let a job read other people's
/// terminals (`/dev/pts/*`) and the disks; the devices a command needs are
/// [`DEVICES_READ_WRITE`] and [`DEVICES_READ`].
pub const SYSTEM_READ_DEFAULT: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys", "/run"];

/// Device files every command may read and write, without device ioctls (no `TIOCSTI`
/// into a terminal): the null device and its kin, and the command's own terminal.
pub const DEVICES_READ_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];
/// Device files every command may read.
pub const DEVICES_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// TCP ports a job with hosts may connect to: HTTP, HTTPS and DNS over TCP (Landlock
/// tells ports apart, never host names), plus the explicit ports of the URLs its command
/// rules name and 22 when a rule runs ssh, scp, sftp or rsync.
pub const PORTS_WITH_HOSTS: &[u16] = &[53, 80, 443];

/// Most directories a plan grants (each is an open descriptor while the ruleset is built).
pub const PLAN_PATHS_MAX: usize = 4_096;

/// Why a mandate cannot be compiled into a sandbox that keeps its promises.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error(
        "paths.write rule `{rule}` makes {dir} writable, and it holds the job's state directory {state}: the kernel cannot exempt a directory beneath a writable one. Keep the state outside the workdir (HOLON_STATE=/var/lib/holon or --state), or narrow the rule"
    )]
    StateWritable { rule: String, dir: String, state: String },
    #[error("the mandate's workdir `{0}` cannot be found: the sandbox's directories are resolved against it")]
    NoWorkdir(String),
    #[error("the sandbox would grant more than {PLAN_PATHS_MAX} paths; merge rules into fewer directories")]
    TooManyPaths,
    #[error(
        "paths.write rule `{rule}` makes {dir} writable, and it holds holon's own program {exe}: a command could replace the program the next run is confined by. Install holon outside the job's write directories"
    )]
    HolonWritable { rule: String, dir: String, exe: String },
    #[error(
        "holon's own program {exe} has {links} hard links and lies on the file system of the write directory {dir} (`{rule}`): a link beneath it would let a command replace the program. Install holon as a file of its own (cargo install --locked --path .)"
    )]
    HolonLinked { rule: String, dir: String, exe: String, links: u64 },
}

/// One hierarchy the kernel grants, and the rule it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub path: PathBuf,
    /// `paths.read[3]`, `system`, `device`, `workdir`.
    pub why: String,
}

/// A rule the kernel cannot grant, and why (the access stays denied).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub rule: String,
    pub reason: String,
}

/// What the kernel is asked to allow; everything else is denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Read, list and execute beneath these.
    pub read: Vec<Grant>,
    /// Every file access beneath these (create, write, truncate, remove, rename, link).
    pub write: Vec<Grant>,
    /// Device files, each read and written (true) or only read, never with device ioctls.
    pub devices: Vec<(Grant, bool)>,
    /// `None`: no TCP connect at all (`hosts: []`); else only these ports.
    pub tcp_connect: Option<Vec<u16>>,
    pub skipped: Vec<Skipped>,
    /// The job's state directory, resolved: never granted for writing.
    pub state: PathBuf,
}

/// The smallest existing directory (or file) that holds every path `rule` can match, for
/// a rule relative to `workdir` or absolute: the literal components before the first
/// wildcard; for a literal path, the path itself when `literal_self` (reads) or its
/// parent (writes: creating or replacing a file is an access to its directory).
fn hierarchy_of(rule: &str, workdir: &Path, literal_self: bool) -> PathBuf {
    let base = if rule.starts_with('/') { PathBuf::from("/") } else { workdir.to_path_buf() };
    let parts: Vec<&str> = rule.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let wild = parts.iter().position(|p| p.contains(['*', '?', '[', ']', '{', '}', '\\']));
    let keep = match wild {
        Some(i) => i,
        None if literal_self => parts.len(),
        None => parts.len().saturating_sub(1),
    };
    let literal = parts.get(..keep).unwrap_or_default();
    let mut path = base;
    for p in literal {
        if *p == ".." {
            path.pop();
        } else {
            path.push(p);
        }
    }
    path
}

/// Whether `inner` is `outer` or lies beneath it (both resolved).
fn beneath(inner: &Path, outer: &Path) -> bool {
    inner.starts_with(outer)
}

/// Ports implied by the command rules: explicit `scheme://host:PORT` ports, and 22 for the
/// ssh family.
fn rule_ports(commands: &[String]) -> Vec<u16> {
    let mut ports = Vec::new();
    for rule in commands {
        let words: Vec<&str> = rule.trim_start_matches('=').split_whitespace().collect();
        let head = words.iter().find(|w| !w.contains('=') || w.starts_with('-')).copied().unwrap_or_default();
        if matches!(head.rsplit('/').next(), Some("ssh" | "scp" | "sftp" | "rsync")) {
            ports.push(22);
        }
        for w in &words {
            let Some((_, rest)) = w.split_once("://") else { continue };
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let authority = authority.rsplit('@').next().unwrap_or_default();
            if let Some((_, port)) = authority.rsplit_once(':')
                && let Ok(p) = port.parse::<u16>()
            {
                ports.push(p);
            }
        }
    }
    ports
}

impl Plan {
    /// Compiles `m` for a job whose state lives in `state_dir`. Paths that do not exist are
    /// skipped (the kernel denies them) and said so; a write grant that would hold the state
    /// directory refuses the plan.
    pub fn compile(m: &JobMandate, state_dir: &Path) -> Result<Plan, PlanError> {
        let workdir = std::fs::canonicalize(&m.workdir).map_err(|_| PlanError::NoWorkdir(m.workdir.clone()))?;
        let state = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
        let mut plan = Plan {
            read: Vec::new(),
            write: Vec::new(),
            devices: Vec::new(),
            tcp_connect: None,
            skipped: Vec::new(),
            state,
        };
        for (i, rule) in m.paths.write.iter().enumerate() {
            plan.grant_write(rule, &format!("paths.write[{i}]"), &workdir)?;
        }
        for (i, rule) in m.paths.read.iter().enumerate() {
            if let Some(dir) = plan.resolve_rule(rule, hierarchy_of(rule, &workdir, true)) {
                plan.push(dir, &format!("paths.read[{i}]"), false);
            }
        }
        match &m.sandbox {
            Some(s) => {
                for (i, dir) in s.system_read.iter().enumerate() {
                    // Beneath a write grant, a command could replace it by a link for the
                    // next run: not granted.
                    if let Some(g) = plan.write.iter().find(|g| beneath(Path::new(dir), &g.path)) {
                        let reason = format!("it lies beneath the write directory {}", g.path.display());
                        plan.skipped.push(Skipped { rule: dir.clone(), reason });
                        continue;
                    }
                    plan.grant(dir, &format!("sandbox.system_read[{i}]"), PathBuf::from(dir), false);
                }
            }
            // The default list names directories a distribution may lack (/lib32): those
            // are left out without a word.
            None => {
                for dir in SYSTEM_READ_DEFAULT.iter().filter(|d| Path::new(d).exists()) {
                    plan.grant(dir, "system", PathBuf::from(dir), false);
                }
            }
        }
        let devices = DEVICES_READ_WRITE.iter().map(|d| (d, true)).chain(DEVICES_READ.iter().map(|d| (d, false)));
        for (dev, write) in devices {
            if let Some(path) = plan.resolve(dev, PathBuf::from(dev)) {
                plan.devices.push((Grant { path, why: "device".to_owned() }, write));
            }
        }
        if !m.hosts.is_empty() {
            let mut ports: Vec<u16> = PORTS_WITH_HOSTS.iter().copied().chain(rule_ports(&m.commands)).collect();
            ports.sort_unstable();
            ports.dedup();
            plan.tcp_connect = Some(ports);
        }
        if plan.read.len() + plan.write.len() + plan.devices.len() > PLAN_PATHS_MAX {
            return Err(PlanError::TooManyPaths);
        }
        Ok(plan)
    }

    /// Refuses the plan if a write grant holds `exe` (holon's own program): a command
    /// could replace what confines the next one.
    /// A hard link of it can be anywhere on its file system: a program with more than one
    /// link is refused beside a write grant on the same file system.
    pub fn refuse_writable_program(&self, exe: &Path) -> Result<(), PlanError> {
        use std::os::unix::fs::MetadataExt;
        let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
        let shown = exe.display().to_string();
        if let Some(g) = self.write.iter().find(|g| beneath(&exe, &g.path)) {
            return Err(PlanError::HolonWritable {
                rule: g.why.clone(),
                dir: g.path.display().to_string(),
                exe: shown,
            });
        }
        // Unreadable metadata is taken as the worst case: linked, on every file system.
        let program = std::fs::metadata(&exe).map(|m| (m.nlink(), Some(m.dev()))).unwrap_or((u64::MAX, None));
        if program.0 > 1 {
            let same_fs =
                |g: &&Grant| std::fs::metadata(&g.path).map_or(true, |m| program.1.is_none_or(|d| d == m.dev()));
            if let Some(g) = self.write.iter().find(same_fs) {
                return Err(PlanError::HolonLinked {
                    rule: g.why.clone(),
                    dir: g.path.display().to_string(),
                    exe: shown,
                    links: program.0,
                });
            }
        }
        Ok(())
    }

    fn grant_write(&mut self, rule: &str, why: &str, workdir: &Path) -> Result<(), PlanError> {
        let Some(dir) = self.resolve_rule(rule, hierarchy_of(rule, workdir, false)) else { return Ok(()) };
        if beneath(&self.state, &dir) {
            return Err(PlanError::StateWritable {
                rule: rule.to_owned(),
                dir: dir.display().to_string(),
                state: self.state.display().to_string(),
            });
        }
        if beneath(&dir, &self.state) {
            self.skipped.push(Skipped {
                rule: rule.to_owned(),
                reason: "it lies in the job's state directory, which is never writable".to_owned(),
            });
            return Ok(());
        }
        self.push(dir, why, true);
        Ok(())
    }

    /// Resolves a rule's hierarchy, which must be where the rule says: a symbolic link on
    /// the way (one a confined command may have made: `mv reports x; ln -s /etc reports`)
    /// would carry the grant beyond the rule's directory, so it is skipped and said.
    fn resolve_rule(&mut self, rule: &str, path: PathBuf) -> Option<PathBuf> {
        let resolved = self.resolve(rule, path.clone())?;
        if resolved != path {
            self.skipped.push(Skipped {
                rule: rule.to_owned(),
                reason: format!(
                    "{} leads through a symbolic link to {}: access beneath it is denied (name the real directory in the rule)",
                    path.display(),
                    resolved.display()
                ),
            });
            return None;
        }
        Some(resolved)
    }

    /// Resolves `path` (links followed, as the kernel sees it); a missing one is skipped.
    fn resolve(&mut self, rule: &str, path: PathBuf) -> Option<PathBuf> {
        match std::fs::canonicalize(&path) {
            Ok(p) => Some(p),
            Err(e) => {
                self.skipped.push(Skipped {
                    rule: rule.to_owned(),
                    reason: format!("{} cannot be opened ({e}): access beneath it is denied", path.display()),
                });
                None
            }
        }
    }

    fn grant(&mut self, rule: &str, why: &str, path: PathBuf, write: bool) {
        if let Some(p) = self.resolve(rule, path) {
            self.push(p, why, write);
        }
    }

    fn push(&mut self, path: PathBuf, why: &str, write: bool) {
        let list = if write { &mut self.write } else { &mut self.read };
        if !list.iter().any(|g| g.path == path) {
            list.push(Grant { path, why: why.to_owned() });
        }
    }

    /// The plan in words, one grant a line (`holon job exec --explain`).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for g in &self.write {
            out.push_str(&format!("  write beneath {}  ({})\n", g.path.display(), g.why));
        }
        for g in &self.read {
            out.push_str(&format!("  read beneath  {}  ({})\n", g.path.display(), g.why));
        }
        for (g, write) in &self.devices {
            let how = if *write { "read and write" } else { "read" };
            out.push_str(&format!("  {how} the device {} (no device ioctls)\n", g.path.display()));
        }
        out.push_str("  write beneath a private temporary directory made for the command in the state's tmp/ (TMPDIR), removed after it\n");
        match &self.tcp_connect {
            None => out.push_str("  network: no TCP connection and no bind to a TCP port (hosts: [])\n"),
            Some(ports) => {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                out.push_str(&format!(
                    "  network: TCP connections to ports {} only, to any host (Landlock cannot tell host names apart; the check judges them); no bind to a TCP port\n",
                    ports.join(", ")
                ));
            }
        }
        out.push_str(&format!("  never writable: the job's state directory {}\n", self.state.display()));
        for s in &self.skipped {
            out.push_str(&format!("  not granted: `{}`: {}\n", s.rule, s.reason));
        }
        out
    }
}

#[cfg(test)]
mod tests;
