//! The floor of `.ci/serve-bench`: the cheapest answers tokio, axum and tonic give on this
//! machine, with the runtime `holon serve` uses (multi-threaded, a worker per core).
//! `POST /v1/admit` gets a constant allowed decision and any other path a constant receipt,
//! so the load script makes exactly the requests it makes against `holon serve` (an admit,
//! then a settle of the reservation in the answer); every gRPC `Check` gets OK with a
//! reservation header. What `holon serve` costs is its figure against this one, measured in
//! the same run.
//!
//! With `--json`, the HTTP side is a second floor: the least a JSON API does for the same
//! requests, without holon: read the body, parse it strictly into a struct (as
//! `holon serve` does, unknown keys refused), take the reservation id from the path, and
//! serialize a struct answer. No authentication, no engine, no metrics.
//!
//!   cargo run --release --example serve_floor --features serve -- HTTP_ADDR GRPC_ADDR [--json]

/// The allocator `holon serve` has (Cargo.toml, `mimalloc`): the floor is the same stack.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write;

use axum::http::header;
use envoy_types::ext_authz::v3::pb::{Authorization, AuthorizationServer, CheckRequest, CheckResponse};
use envoy_types::ext_authz::v3::{CheckResponseExt, OkHttpResponseBuilder};
use tonic::{Request, Response, Status};

const DECISION: &str =
    r#"{"decision":"allowed","reservation":"1","worst_case":"0.004","currency":"EUR","codes":[],"reasons":[]}"#;
const SETTLED: &str = r#"{"receipt":"1","worst_case":"0.004","kept":"0.004","billed":"0.004","passthrough":"0.00","late":false,"outcome":"success"}"#;

async fn decision() -> ([(header::HeaderName, &'static str); 1], &'static str) {
    ([(header::CONTENT_TYPE, "application/json")], DECISION)
}

async fn settled() -> ([(header::HeaderName, &'static str); 1], &'static str) {
    ([(header::CONTENT_TYPE, "application/json")], SETTLED)
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "parsed as holon serve parses it, then unused")]
struct AdmitBody {
    mandate: String,
    agent: String,
    max_cost: Option<String>,
    capability: Option<String>,
    at: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "parsed as holon serve parses it, then unused")]
struct SettleBody {
    actual: String,
    outcome: Option<String>,
    latency_ms: Option<u64>,
}

#[derive(serde::Serialize)]
struct DecisionBody {
    decision: &'static str,
    reservation: String,
    agent: String,
    worst_case: &'static str,
    currency: &'static str,
    codes: Vec<&'static str>,
    reasons: Vec<&'static str>,
}

#[derive(serde::Serialize)]
struct SettledBody {
    receipt: String,
    worst_case: &'static str,
    kept: String,
    billed: String,
    passthrough: &'static str,
    late: bool,
    outcome: &'static str,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn json_answer<T: serde::Serialize>(body: &T) -> axum::response::Response {
    use axum::response::IntoResponse;
    let text = serde_json::to_string(body).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

fn bad_request(e: &serde_json::Error) -> axum::response::Response {
    use axum::response::IntoResponse;
    (axum::http::StatusCode::BAD_REQUEST, format!("{{\"error\":\"{e}\"}}")).into_response()
}

async fn json_admit(body: axum::body::Bytes) -> axum::response::Response {
    match serde_json::from_slice::<AdmitBody>(&body) {
        Ok(admit) => json_answer(&DecisionBody {
            decision: "allowed",
            // Relaxed: a counter for distinct ids, ordering nothing.
            reservation: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_string(),
            agent: admit.agent,
            worst_case: "0.004",
            currency: "EUR",
            codes: Vec::new(),
            reasons: Vec::new(),
        }),
        Err(e) => bad_request(&e),
    }
}

async fn json_settle(
    axum::extract::Path(id): axum::extract::Path<String>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    match serde_json::from_slice::<SettleBody>(&body) {
        Ok(settle) => json_answer(&SettledBody {
            receipt: id,
            worst_case: "0.004",
            kept: settle.actual.clone(),
            billed: settle.actual,
            passthrough: "0.00",
            late: false,
            outcome: "success",
        }),
        Err(e) => bad_request(&e),
    }
}

struct Floor;

#[tonic::async_trait]
impl Authorization for Floor {
    async fn check(&self, _: Request<CheckRequest>) -> Result<Response<CheckResponse>, Status> {
        let mut ok = OkHttpResponseBuilder::new();
        ok.add_header("x-holon-reservation", "1", None, false);
        let mut response = CheckResponse::with_status(Status::ok("allowed"));
        response.set_http_response(ok);
        Ok(Response::new(response))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(http), Some(grpc)) = (args.next(), args.next()) else {
        return Err("usage: serve_floor HTTP_ADDR GRPC_ADDR [--json]".into());
    };
    let json = match args.next().as_deref() {
        None => false,
        Some("--json") => true,
        Some(other) => {
            return Err(format!("unknown argument {other}; usage: serve_floor HTTP_ADDR GRPC_ADDR [--json]").into());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let http = tokio::net::TcpListener::bind(&http).await?;
        let grpc = tokio::net::TcpListener::bind(&grpc).await?;
        println!("serve_floor: listening on http://{}", http.local_addr()?);
        println!("serve_floor: ext_authz gRPC on {}", grpc.local_addr()?);
        std::io::stdout().flush()?;
        // TCP_NODELAY on both, as `holon serve` sets it.
        let incoming = tonic::transport::server::TcpIncoming::from(grpc).with_nodelay(Some(true));
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(AuthorizationServer::new(Floor))
                .serve_with_incoming(incoming),
        );
        let http = axum::serve::ListenerExt::tap_io(http, |tcp: &mut tokio::net::TcpStream| {
            let _ = tcp.set_nodelay(true);
        });
        let router = if json {
            axum::Router::new()
                .route("/v1/admit", axum::routing::post(json_admit))
                .route("/v1/reservations/{id}/settle", axum::routing::post(json_settle))
        } else {
            axum::Router::new().route("/v1/admit", axum::routing::post(decision)).fallback(settled)
        };
        axum::serve(http, router).await?;
        Ok(())
    })
}
