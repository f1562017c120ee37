//! The gRPC load of `.ci/serve-bench`: CONNECTIONS clients, each on its own HTTP/2
//! connection, send Envoy ext_authz `Check`s back to back for SECONDS, and settle each
//! allowed call's reservation over HTTP (`POST /v1/reservations/{id}/settle` on a
//! keep-alive connection of its own), as a gateway behind Envoy does. Prints one JSON line:
//! Checks per second (each with its settle), the Checks that were not OK, and the median
//! and 99th percentile latency of the Check alone in microseconds (exact: every latency is
//! kept and sorted). With `HOLON_BENCH_KEYS=1` every Check carries an `x-request-id` of its
//! own (Envoy sends one on every request; `holon serve` keys the Check by it) and every
//! settle an `Idempotency-Key`, each new (prefixed by `HOLON_BENCH_RUN` and the client).
//!
//!   cargo run --release --example grpc_load --features serve -- \
//!       GRPC_ADDR HTTP_ADDR TOKEN MANDATE AGENT CONNECTIONS SECONDS

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use envoy_types::pb::envoy::service::auth::v3::attribute_context::{HttpRequest, Request as AttrRequest};
use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
use envoy_types::pb::envoy::service::auth::v3::{AttributeContext, CheckRequest};

fn check_request(mandate: &str, agent: &str) -> CheckRequest {
    let headers = HashMap::from([
        ("x-holon-mandate".to_owned(), mandate.to_owned()),
        ("x-holon-agent".to_owned(), agent.to_owned()),
    ]);
    CheckRequest {
        attributes: Some(AttributeContext {
            request: Some(AttrRequest {
                http: Some(HttpRequest { headers, ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Settles reservation `id` over a keep-alive HTTP/1.1 connection, with `key` as its
/// Idempotency-Key if given; true on a 200.
async fn settle(http: &mut BufReader<TcpStream>, token: &str, id: &str, key: Option<&str>) -> Result<bool, Error> {
    let body = r#"{"actual":"0.004"}"#;
    let key = key.map(|k| format!("idempotency-key: {k}\r\n")).unwrap_or_default();
    let request = format!(
        "POST /v1/reservations/{id}/settle HTTP/1.1\r\nhost: holon\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\n{key}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    http.get_mut().write_all(request.as_bytes()).await?;
    let (mut line, mut length, mut status_ok) = (String::new(), 0_usize, false);
    loop {
        line.clear();
        if http.read_line(&mut line).await? == 0 {
            return Err("the HTTP connection closed".into());
        }
        if line.starts_with("HTTP/1.1 ") {
            status_ok = line.starts_with("HTTP/1.1 200");
        } else if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse()?;
        } else if line == "\r\n" {
            break;
        }
    }
    let mut answer = vec![0; length];
    http.read_exact(&mut answer).await?;
    Ok(status_ok)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, http_addr, token, mandate, agent, connections, seconds] = args.as_slice() else {
        return Err("usage: grpc_load GRPC_ADDR HTTP_ADDR TOKEN MANDATE AGENT CONNECTIONS SECONDS".into());
    };
    let connections: usize = connections.parse()?;
    let duration = Duration::from_secs(seconds.parse()?);
    let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {token}").parse()?;
    let keys = std::env::var("HOLON_BENCH_KEYS").is_ok_and(|v| v == "1");
    let run = std::env::var("HOLON_BENCH_RUN").unwrap_or_else(|_| "run".to_owned());
    // One thread for the load, so that the server keeps the other core as with wrk -t1.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (latencies_us, refused) = runtime.block_on(async move {
        let mut tasks = Vec::new();
        for client_ix in 0..connections {
            let mut client = AuthorizationClient::connect(format!("http://{addr}")).await?;
            let http = TcpStream::connect(http_addr.as_str()).await?;
            http.set_nodelay(true)?;
            let mut http = BufReader::new(http);
            let (request, bearer, token) = (check_request(mandate, agent), bearer.clone(), token.clone());
            let prefix = format!("{run}-{client_ix}-");
            tasks.push(tokio::spawn(async move {
                let (mut latencies_us, mut refused) = (Vec::new(), 0_u64);
                let started = Instant::now();
                let mut call_ix = 0_u64;
                while started.elapsed() < duration {
                    call_ix += 1;
                    let mut check = request.clone();
                    if keys {
                        let http =
                            check.attributes.as_mut().and_then(|a| a.request.as_mut()).and_then(|r| r.http.as_mut());
                        if let Some(http) = http {
                            http.headers.insert("x-request-id".to_owned(), format!("{prefix}check-{call_ix}"));
                        }
                    }
                    let mut call = tonic::Request::new(check);
                    call.metadata_mut().insert("authorization", bearer.clone());
                    let sent = Instant::now();
                    let answer = client.check(call).await;
                    latencies_us.push(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX));
                    let reservation = answer.ok().and_then(|r| {
                        use envoy_types::pb::envoy::service::auth::v3::check_response::HttpResponse;
                        let r = r.into_inner();
                        let Some(HttpResponse::OkResponse(ok)) = r.http_response else { return None };
                        let header =
                            ok.headers.into_iter().filter_map(|h| h.header).find(|h| h.key == "x-holon-reservation");
                        header.map(|h| h.value).filter(|_| r.status.is_some_and(|s| s.code == 0))
                    });
                    match reservation {
                        Some(id) => {
                            let key = keys.then(|| format!("{prefix}settle-{call_ix}"));
                            refused += u64::from(!settle(&mut http, &token, &id, key.as_deref()).await?);
                        }
                        None => refused += 1,
                    }
                }
                Ok::<_, Error>((latencies_us, refused))
            }));
        }
        let (mut all, mut refused) = (Vec::new(), 0);
        for task in tasks {
            let (latencies_us, r) = task.await??;
            all.extend(latencies_us);
            refused += r;
        }
        Ok::<_, Error>((all, refused))
    })?;
    let mut sorted = latencies_us;
    sorted.sort_unstable();
    // The nearest rank: the value at (len - 1) × percent / 100.
    let at = |percent: usize| sorted.get(sorted.len().saturating_sub(1) * percent / 100).copied().unwrap_or(0);
    println!(
        "{{\"requests\":{},\"per_s\":{:.0},\"not_ok\":{},\"p50_us\":{},\"p99_us\":{}}}",
        sorted.len(),
        sorted.len() as f64 / duration.as_secs_f64(),
        refused,
        at(50),
        at(99)
    );
    Ok(())
}
