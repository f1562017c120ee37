//! `holon key new` and `holon mandate sign | verify | digest` (docs/trust.md): the files are
//! read and written here; what a signature covers and how a chain holds is `holon::trust`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use holon::catalog::Catalog;
use holon::doc::{self, DocKind, Limits};
use holon::documents::{self, Document};
use holon::lookup::{AgentLookup, NoAgents};
use holon::mandate::Mandate;
use holon::pattern::Principal;
use holon::trust::keys::{PRIVATE_KEY_VERSION, PrivateKeyFile};
use holon::trust::signature::{self, Purpose};
use holon::trust::{Digest, PrivateKey, TrustedKeys, canonical, verify_chain};
use serde_json::{Value, json};

use super::exit;
use super::out::outln;
use super::style::Style;

#[derive(clap::Subcommand)]
pub(super) enum KeyCommand {
    /// A new ed25519 key pair for ACCOUNT: the private key to --out, the public key added
    /// to the trusted keys file --keys.
    #[command(
        after_help = "EXIT CODES: 0 written, 2 bad input (a bad account, an existing --out file, an invalid or unwritable keys file, a closed output pipe).\n\nEXAMPLES:\n  holon key new --account alice --out alice.key --keys keys.yaml"
    )]
    New {
        /// The account (or agent, `ns/name`) the key signs for.
        #[arg(long)]
        account: String,
        /// Where the private key goes: a new file, mode 0600 (never written over).
        #[arg(long)]
        out: PathBuf,
        /// The trusted keys file to add the public key to (created if missing).
        #[arg(long)]
        keys: PathBuf,
    },
}

/// `holon key new`: a fresh key pair; the private key to `out` (mode 0600, never over an
/// existing file), the public key added to the trusted keys file `keys`.
pub(crate) fn key_new(account: &str, out: &Path, keys_path: &Path) -> anyhow::Result<u8> {
    let account = Principal::parse(account).map_err(|e| anyhow::anyhow!("--account: {e}"))?;
    // Replaced by a rename, a symlink would become a file of its own and the file it points
    // to (the one a server reads) would never see the key: refuse it.
    if keys_path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        bail!("--keys {}: a symbolic link; pass the file it points to", keys_path.display());
    }
    let mut keys = if keys_path.exists() { documents::load_keys(keys_path)? } else { TrustedKeys::default() };
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("the operating system's random source: {e}"))?;
    let key = PrivateKey::from_seed(account.clone(), seed);
    seed.fill(0);
    let file = doc::to_yaml(&key.to_file())?;
    write_private(out, file.as_bytes())?;
    keys.add(account.clone(), key.public_key());
    write_replacing(keys_path, doc::to_yaml(&keys)?.as_bytes())?;
    outln!(
        "key for {account} written to {} (keep it secret); its public key {} is trusted in {}",
        out.display(),
        key.public_key().to_base64(),
        keys_path.display()
    )?;
    Ok(exit::OK)
}

/// Creates `path` with mode 0600, refusing an existing file or a symlink.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let mut f = options.open(path).with_context(|| {
        format!(
            "{}: a private key is never written over a file: choose a new path, or remove the old key first",
            path.display()
        )
    })?;
    f.write_all(bytes).and_then(|()| f.sync_all()).with_context(|| path.display().to_string())
}

/// Replaces `path` atomically, keeping the old file's permissions (`holon::files`).
fn write_replacing(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    holon::files::replace(path, bytes, holon::files::Durability::Synced, holon::files::FileMode::KeepOld)
        .with_context(|| path.display().to_string())
}

pub(super) fn load_private(path: &Path) -> anyhow::Result<PrivateKey> {
    let text = doc::read_text(path, &Limits::default()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let file: PrivateKeyFile = doc::parse_typed(&text, &path.display().to_string())?;
    if file.holon_private_key != PRIVATE_KEY_VERSION {
        bail!("{}: a private key file of version {PRIVATE_KEY_VERSION} was expected", path.display());
    }
    PrivateKey::from_file(&file).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A mandate file's text, JSON value and typed, valid mandate.
fn read_mandate(path: &Path) -> anyhow::Result<(String, Value, Mandate)> {
    let limits = Limits::default();
    let text = doc::read_text(path, &limits).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let value = doc::yaml::parse(&text, &limits).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mandate = match documents::load_str(&text, &path.display().to_string(), DocKind::Mandate, &limits)? {
        Document::Mandate(m) => *m,
        _ => bail!("{}: not a caller mandate", path.display()),
    };
    Ok((text, value, mandate))
}

/// `holon mandate sign`: the mandate with its issuer's signature, on standard output or in
/// `out`. The document's own text is kept (comments too) and the block appended, unless
/// it was signed before: then it is written out again from its value.
pub(crate) fn sign(mandate_path: &Path, key_path: &Path, out: Option<&Path>) -> anyhow::Result<u8> {
    let (text, mut value, mandate) = read_mandate(mandate_path)?;
    let key = load_private(key_path)?;
    if key.account != mandate.issuer {
        bail!(
            "{}: the key is {}'s, and the mandate is issued by {}: only the issuer signs a mandate",
            key_path.display(),
            key.account,
            mandate.issuer
        );
    }
    let digest = canonical::digest(&value).map_err(|e| anyhow::anyhow!("{}: {e}", mandate_path.display()))?;
    let block = signature::sign(&key, Purpose::Mandate, &digest);
    let mut trusted = TrustedKeys::default();
    trusted.add(key.account.clone(), key.public_key());
    let appended = (value.get(canonical::SIGNATURE_KEY).is_none()).then(|| {
        let mut t = text.clone();
        if !t.ends_with('\n') {
            t.push('\n');
        }
        t + &format!("signature:\n  alg: ed25519\n  key: \"{}\"\n  value: \"{}\"\n", block.key.to_base64(), block.value)
    });
    if let Value::Object(map) = &mut value {
        map.insert(canonical::SIGNATURE_KEY.to_owned(), serde_json::to_value(&block)?);
    }
    let rewritten = doc::to_yaml(&value)?;
    // The output must read back as this mandate with this signature: appending to text in
    // flow style (`{...}`) would not, and then the value is written out instead.
    let signed = appended
        .into_iter()
        .chain(std::iter::once(rewritten))
        .find(|candidate| reads_back_signed(candidate, &digest, &trusted))
        .context("the signed mandate does not read back as signed; this is a bug, please report it")?;
    match out {
        Some(path) => write_replacing(path, signed.as_bytes())?,
        None => super::out::text(format_args!("{signed}"))?,
    }
    Ok(exit::OK)
}

fn reads_back_signed(text: &str, digest: &Digest, keys: &TrustedKeys) -> bool {
    match documents::load_str(text, "<signed>", DocKind::Mandate, &Limits::default()) {
        Ok(Document::Mandate(m)) => {
            m.digest().as_ref() == Some(digest)
                && m.signature
                    .as_ref()
                    .is_some_and(|b| signature::verify(b, Purpose::Mandate, digest, &m.issuer, keys).is_ok())
        }
        _ => false,
    }
}

/// `holon mandate digest`: the `sha256:` a sub-mandate names this mandate by.
pub(crate) fn digest(mandate_path: &Path) -> anyhow::Result<u8> {
    let (_, value, _) = read_mandate(mandate_path)?;
    let digest = canonical::digest(&value).map_err(|e| anyhow::anyhow!("{}: {e}", mandate_path.display()))?;
    outln!("{digest}")?;
    Ok(exit::OK)
}

pub(crate) struct VerifyArgs {
    pub mandate: PathBuf,
    pub keys: PathBuf,
    pub parents: Vec<PathBuf>,
    pub agents: Vec<PathBuf>,
    pub json: bool,
}

/// `holon mandate verify`: 0 when the signature and the whole chain hold, 1 when they do
/// not, 2 on unreadable input.
pub(crate) fn verify(args: &VerifyArgs, style: &Style) -> anyhow::Result<u8> {
    let (_, _, mandate) = read_mandate(&args.mandate)?;
    let keys = documents::load_keys(&args.keys)?;
    let default_dir = args.mandate.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let search: Vec<PathBuf> =
        if args.parents.is_empty() { vec![default_dir.to_path_buf()] } else { args.parents.clone() };
    let pool = parent_pool(&search)?;
    let catalog = if args.agents.is_empty() { None } else { Some(Catalog::load(&args.agents, None)?) };
    let agents: &dyn AgentLookup = match &catalog {
        Some(c) => c,
        None => &NoAgents,
    };
    let result = verify_chain(&mandate, &|d| pool.iter().find(|m| m.digest().as_ref() == Some(d)), &keys, agents);
    if args.json {
        let body = match &result {
            Ok(links) => json!({"verified": true, "mandate": mandate.id, "links": links}),
            Err(e) => json!({"verified": false, "mandate": mandate.id, "reason": e.to_string()}),
        };
        outln!("{}", serde_json::to_string_pretty(&body)?)?;
    } else {
        match &result {
            Ok(links) => {
                outln!("{} {}: signed, and its chain of {links} link(s) holds", style.good("verified"), mandate.id)?
            }
            Err(e) => outln!("{} {e}", style.bad("not verified"))?,
        }
    }
    Ok(if result.is_ok() { exit::OK } else { exit::FAILED })
}

/// The mandates among `paths` (files or directories) that a chain may name by digest.
/// Files that are not mandates, or not valid ones, cannot be parents and are passed over.
pub(super) fn parent_pool(paths: &[PathBuf]) -> anyhow::Result<Vec<Mandate>> {
    let limits = Limits::default();
    let mut pool = Vec::new();
    for path in paths {
        for file in doc::yaml_files(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))? {
            if let Ok(checked) = documents::check_file(&file, &limits)
                && let Ok(Document::Mandate(m)) = checked.result
            {
                pool.push(*m);
            }
        }
    }
    Ok(pool)
}

/// Whether the revocation list at `list` (if any) revokes `mandate` (read from
/// `mandate_path`), itself or through its chain: its parents are looked for among the
/// mandates beside it, as `mandate verify` looks for them. A parent named by digest that
/// is not there leaves the question open, and an open question is an error, not a pass.
pub(crate) fn revoked(
    mandate: &holon::mandate::Mandate,
    mandate_path: &Path,
    list: Option<&Path>,
) -> anyhow::Result<bool> {
    let Some(list) = list else { return Ok(false) };
    let list = holon::documents::load_revocations(list)?;
    let dir = mandate_path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut pool = parent_pool(&[dir.to_path_buf()])?;
    pool.retain(|m| m.id != mandate.id);
    let mut chain: Vec<&holon::mandate::Mandate> = vec![mandate];
    // Up the chain through the mandates beside it, at most a chain's length. Whatever
    // leaves the chain unknown (a parent not there, two that could be it, a loop, too many
    // links) leaves the question open: an error, not a pass.
    let open = |why: String| anyhow::anyhow!("cannot tell whether {} is revoked: {why}", mandate.id);
    while let Some(parent) = chain.last().and_then(|m| m.parent_ref()) {
        let mut found = pool.iter().filter(|p| match parent {
            holon::mandate::ParentRef::Id(id) => p.id == id,
            holon::mandate::ParentRef::Digest(d) => p.digest() == Some(d),
        });
        let (first, second) = (found.next(), found.next());
        let name = match parent {
            holon::mandate::ParentRef::Id(id) => id.to_owned(),
            holon::mandate::ParentRef::Digest(d) => d.to_string(),
        };
        match (first, second) {
            (Some(_), Some(_)) => {
                return Err(open(format!("two mandates in {} could be its parent {name}", dir.display())));
            }
            (None, _) => {
                return Err(open(format!(
                    "its chain names a parent {name} that is not among the mandates in {}; put the parent's file there",
                    dir.display()
                )));
            }
            (Some(p), None) => {
                if chain.len() >= holon::trust::chain::CHAIN_LINKS_MAX || chain.iter().any(|c| c.id == p.id) {
                    return Err(open("its chain loops or is longer than a chain may be".into()));
                }
                chain.push(p);
            }
        }
    }
    Ok(list.apply(&chain).contains_key(mandate.id.as_str()))
}
