//! The floor of `.ci/serve-bench`: the cheapest answers tokio, axum and tonic give on this
//! machine, with the runtime `holon serve` uses (multi-threaded, a worker per core).
//! `POST /v1/admit` gets a constant allowed decision and any other path a constant receipt,
//! so the load script makes exactly the requests it makes against `holon serve` (an admit,
//! then a settle of the reservation in the answer); every gRPC `Check` gets OK with a
//! reservation header. What `holon serve` costs is its figure against this one, measured in the same run.
//!
//!   cargo run --release --example serve_floor --features serve -- HTTP_ADDR GRPC_ADDR

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
        return Err("usage: serve_floor HTTP_ADDR GRPC_ADDR".into());
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
        axum::serve(http, axum::Router::new().route("/v1/admit", axum::routing::post(decision)).fallback(settled))
            .await?;
        Ok(())
    })
}
