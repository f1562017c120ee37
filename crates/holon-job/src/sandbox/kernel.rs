//! A [`Plan`] applied by the kernel: the Landlock ruleset (the `landlock` crate of the
//! Landlock authors; no hand-written system calls), the level of Landlock the kernel
//! enforces, and the parts of the plan each level holds.
//!
//! Levels are Landlock ABI versions as far as holon uses them: 1 file system access, 2
//! renames and links across directories, 3 truncation, 4 TCP connect and bind, 5 device
//! ioctls, 6 signal and abstract-unix-socket scoping. A job needs [`LEVEL_REQUIRED`]; the
//! plan is enforced in full from [`LEVEL_FULL`].

use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
};

use super::Plan;

/// The least Landlock level `holon job exec` confines a job with: below it truncation
/// (3) or the network (4) would be left open.
pub const LEVEL_REQUIRED: u8 = 4;
/// The level from which every part of a plan is enforced (signal and abstract-socket
/// scoping came with 6).
pub const LEVEL_FULL: u8 = 6;
/// Makes holon see a level below [`LEVEL_REQUIRED`] (tests of the refusal): it can only
/// make `exec` refuse, never weaken a ruleset (a value at or above the required level is
/// ignored; an unreadable one reads as no Landlock at all).
pub const TEST_LEVEL_ENV: &str = "HOLON_TEST_LANDLOCK_ABI";

fn abi(level: u8) -> ABI {
    ABI::from(i32::from(level))
}

/// The ruleset of `level`, required in full (an error if the kernel lacks any of it).
fn ruleset(level: u8) -> Result<RulesetCreated, RulesetError> {
    let a = abi(level);
    let mut r =
        Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(AccessFs::from_all(a))?;
    if level >= 4 {
        r = r.handle_access(AccessNet::from_all(a))?;
    }
    if level >= 6 {
        r = r.scope(Scope::from_all(a))?;
    }
    r.create()
}

/// The highest level (0 to [`LEVEL_FULL`]) this kernel enforces, 0 without Landlock:
/// found by creating (never applying) the ruleset of each level.
pub fn kernel_level() -> u8 {
    let probed = (1..=LEVEL_FULL).rev().find(|&n| ruleset(n).is_ok()).unwrap_or(0);
    match std::env::var(TEST_LEVEL_ENV) {
        Ok(v) => match v.trim().parse::<u8>() {
            Ok(t) if t >= LEVEL_REQUIRED => probed,
            Ok(t) => t.min(probed),
            Err(_) => 0,
        },
        Err(_) => probed,
    }
}

/// What the kernel holds at `level`, in words; the second list what it does not.
pub fn coverage(level: u8) -> (Vec<&'static str>, Vec<&'static str>) {
    let all: [(u8, &str); 6] = [
        (1, "file reads, writes, creation, removal and execution"),
        (2, "renames and hard links across directories"),
        (3, "truncation"),
        (4, "TCP connect and listen"),
        (5, "ioctls on devices"),
        (6, "signals and abstract unix sockets outside the job"),
    ];
    let held = all.iter().filter(|(l, _)| *l <= level).map(|(_, w)| *w).collect();
    let open = all.iter().filter(|(l, _)| *l > level).map(|(_, w)| *w).collect();
    (held, open)
}

/// Why the ruleset could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("the kernel refused the Landlock ruleset: {0}")]
    Ruleset(#[from] RulesetError),
    #[error("the kernel enforced the Landlock ruleset only partly ({0:?})")]
    Partial(RulesetStatus),
    #[error("{0} is not where the plan found it ({1}): it was moved or replaced by a link since")]
    Moved(String, String),
    #[error(
        "the capabilities cannot be taken from the command ({0}): with one it could reach past its grants (a device node, a raw socket) or make its temporary files unremovable"
    )]
    Capability(String),
}

/// Restricts this process, and every process it starts, to `plan` plus `temp` (a private
/// directory made for the command), at `level`. `no_new_privs` is set: a set-user-id
/// program gains nothing. Irreversible: call it right before starting the command.
pub fn restrict(plan: &Plan, temp: &Path, level: u8) -> Result<(), KernelError> {
    let a = abi(level);
    let read = plan.read.iter().map(|g| (g.path.as_path(), AccessFs::from_read(a)));
    let write =
        plan.write.iter().map(|g| g.path.as_path()).chain(std::iter::once(temp)).map(|p| (p, AccessFs::from_all(a)));
    let device = |w: bool| if w { AccessFs::from_all(a) } else { AccessFs::from_read(a) } & !AccessFs::IoctlDev;
    let devices = plan.devices.iter().map(|(g, w)| (g.path.as_path(), device(*w)));
    let mut created = ruleset(level)?;
    for (path, access) in read.chain(write).chain(devices) {
        created = created.add_rule(verified(path, access, a)?)?;
    }
    if let Some(ports) = &plan.tcp_connect {
        for port in ports {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    // The capabilities go once every rule's path is open (a confined root command may
    // have taken its own directories' permissions away; the refusal would then be
    // `holon job exec`'s, not the kernel's), and before the ruleset holds.
    drop_capabilities()?;
    let status = created.restrict_self()?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(()),
        other => Err(KernelError::Partial(other)),
    }
}

/// Takes every capability away from this process and every program it starts (the
/// bounding set too, so that not even root gets one back at exec). Landlock holds paths,
/// not what a capability opens beside them: an attack round (2026-12-03) found a confined
/// root command making a block device node in its temporary directory with `CAP_MKNOD`
/// and writing the disk beneath every grant through it, and sending ICMP with `hosts: []`
/// through a raw socket (`CAP_NET_RAW`); `CAP_LINUX_IMMUTABLE` would make its temporary
/// files unremovable. A process that holds none and is not root has nothing to drop
/// (no_new_privs keeps file capabilities from granting any); one that cannot drop them is
/// refused.
pub fn drop_capabilities() -> Result<(), KernelError> {
    use rustix::thread::{self, CapabilitySet, CapabilitySets};
    let refuse = |e: rustix::io::Errno| KernelError::Capability(std::io::Error::from(e).to_string());
    let sets = thread::capabilities(None).map_err(refuse)?;
    let held = !(sets.permitted | sets.effective | sets.inheritable).is_empty();
    if !held && !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    for cap in CapabilitySet::all().iter() {
        // EINVAL: a capability this kernel does not know, so none to hold.
        if thread::capability_is_in_bounding_set(cap).unwrap_or(false) {
            thread::remove_capability_from_bounding_set(cap).map_err(refuse)?;
        }
    }
    thread::clear_ambient_capability_set().map_err(refuse)?;
    let none = CapabilitySet::empty();
    thread::set_capabilities(None, CapabilitySets { effective: none, permitted: none, inheritable: none })
        .map_err(refuse)
}

/// The rule for `path`, opened once and held to be that very path (its descriptor's own
/// name is read back): a rename or a link swapped in since the plan was compiled would
/// otherwise move the grant somewhere the plan never checked (the state directory). A
/// file gets a file's rights only.
fn verified(path: &Path, access: BitFlags<AccessFs>, a: ABI) -> Result<PathBeneath<PathFd>, KernelError> {
    let moved = |e: String| KernelError::Moved(path.display().to_string(), e);
    let fd = PathFd::new(path).map_err(|e| moved(e.to_string()))?;
    let own = PathBuf::from(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()));
    let real = std::fs::read_link(&own).map_err(|e| moved(e.to_string()))?;
    if real != path {
        return Err(moved(format!("it is now {}", real.display())));
    }
    let dir = std::fs::metadata(&own).map_err(|e| moved(e.to_string()))?.is_dir();
    Ok(PathBeneath::new(fd, if dir { access } else { access & AccessFs::from_file(a) }))
}
