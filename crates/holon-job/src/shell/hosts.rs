//! Hosts named by a command's arguments, parsed the way the programs that contact them
//! parse them.

use super::{is_flag, kinds};

/// Hosts named by the arguments of a network command the option table does not describe
/// (ssh, scp, rsync, nc, git's remote subcommands), and files it writes; `None` when an
/// option makes it run a local command or read a configuration that can (`ssh -o
/// ProxyCommand=…`, `rsync -e`). curl and wget are in the table.
pub(super) fn network_hosts(head: &str, args: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let base = kinds::base(head);
    let mut hosts = Vec::new();
    let writes = Vec::new();
    let positionals: Vec<&String> = args.iter().filter(|a| !is_flag(a)).collect();
    match base {
        "ssh" | "sftp" => {
            if args.iter().any(|a| a.starts_with("-o") || a.starts_with("-F") || a.starts_with("-J")) {
                return None;
            }
            const SSH_VALUES: &[&str] = &[
                "-p", "-i", "-l", "-L", "-R", "-D", "-b", "-c", "-E", "-e", "-I", "-m", "-O", "-Q", "-S", "-W", "-w",
                "-B",
            ];
            let mut words = args.iter();
            let mut destination = None;
            while let Some(w) = words.next() {
                if SSH_VALUES.contains(&w.as_str()) {
                    words.next();
                } else if !is_flag(w) {
                    destination = Some(w);
                    break;
                }
            }
            let d = destination?;
            match url_hosts(d) {
                h if h.is_empty() => hosts.push(ssh_host(d)),
                h => hosts.extend(h),
            }
            // A remote command is a shell line run elsewhere: not reasoned about.
            if words.next().is_some() {
                return None;
            }
        }
        "scp" | "rsync" => {
            if args.iter().any(|a| a == "-e" || a.starts_with("--rsh") || a.starts_with("-o") || a.starts_with("-F")) {
                return None;
            }
            for p in positionals {
                if p.contains("://") {
                    hosts.extend(url_hosts(p));
                } else if let Some((host, _)) = p.split_once(':')
                    && !host.contains('/')
                {
                    hosts.push(ssh_host(host));
                }
            }
        }
        "nc" | "ncat" | "netcat" | "telnet" | "ftp" | "lftp" => {
            hosts.extend(positionals.first().map(|h| ssh_host(h)));
        }
        "git" => {
            for p in positionals {
                if p.contains("://") {
                    hosts.extend(url_hosts(p));
                } else if let Some((user_host, _)) = p.split_once(':')
                    && !user_host.contains('/')
                    && !user_host.starts_with('.')
                    // `user@host:path`, or `host.domain:path` (scp-style without a user);
                    // a refspec such as `main:prod` names no host.
                    && (user_host.contains('@') || user_host.contains('.'))
                {
                    hosts.push(ssh_host(user_host));
                }
            }
        }
        _ => {}
    }
    Some((hosts, writes))
}

/// `user@host` → `host`, lower-cased.
fn ssh_host(destination: &str) -> String {
    destination.rsplit('@').next().unwrap_or(destination).to_ascii_lowercase()
}

/// The hosts a fetcher (curl, wget) may contact for `arg`: a URL, or a bare
/// `host[:port][/…]` taken as `http://`. What cannot be parsed is kept whole (it matches
/// no host rule).
pub(super) fn fetcher_hosts(arg: &str) -> Vec<String> {
    let with_scheme = if arg.contains("://") || arg.to_ascii_lowercase().starts_with("http:") {
        arg.to_owned()
    } else {
        format!("http://{arg}")
    };
    match url_hosts(&with_scheme) {
        h if h.is_empty() => vec![arg.to_ascii_lowercase()],
        h => h,
    }
}

/// The hosts a URL may reach: as the WHATWG URL Standard parses it (browsers; `\` is `/`
/// in special schemes, `http:host` has host `host`) and as an RFC 3986 reader splits its
/// authority (curl and most tools). Both are judged when they differ.
pub fn url_hosts(text: &str) -> Vec<String> {
    let mut hosts: Vec<String> = url_host(text).into_iter().collect();
    if let Some((_, rest)) = text.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let host = match host_port.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => host_port.split(':').next().unwrap_or_default(),
        };
        if !host.is_empty() {
            hosts.push(host.to_ascii_lowercase());
        }
    }
    hosts.sort();
    hosts.dedup();
    hosts
}

/// The lower-cased host of a URL as the WHATWG URL Standard parses it, IPv6 without
/// brackets.
pub fn url_host(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    let host = url.host_str()?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}
