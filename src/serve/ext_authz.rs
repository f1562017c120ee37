//! Envoy external authorization (`envoy.service.auth.v3.Authorization/Check`) over gRPC,
//! on tonic with Envoy's published protos (the `envoy-types` crate).
//!
//! The call's mandate and agent come from request headers (names configurable; Envoy
//! lower-cases them). An allowed call answers OK and adds the reservation id to the
//! request Envoy forwards (`x-holon-reservation`); the gateway settles it over HTTP, or the
//! reaper reclaims it after the callee's `timeout_s` plus the grace (its worst case stays
//! spent). A held or denied call answers `403` with the decision as the JSON body and its
//! codes in `x-holon-codes`. The gRPC caller (Envoy) must present a gateway token in its
//! `authorization` metadata, as an HTTP client would.

use std::collections::HashMap;
use std::time::Instant;

use envoy_types::ext_authz::v3::pb::{Authorization, AuthorizationServer, CheckRequest, CheckResponse, HttpStatusCode};
use envoy_types::ext_authz::v3::{CheckRequestExt, CheckResponseExt, DeniedHttpResponseBuilder, OkHttpResponseBuilder};
use tonic::{Request, Response, Status};

use super::auth::Role;
use super::service::Service;
use super::wire::{AdmitRequest, DecisionBody};

/// The request headers the call is read from.
#[derive(Debug, Clone)]
pub(crate) struct Headers {
    pub mandate: String,
    pub agent: String,
    pub max_cost: String,
    pub capability: String,
}

impl Headers {
    pub(crate) fn new(mandate: &str, agent: &str) -> Headers {
        Headers {
            mandate: mandate.to_ascii_lowercase(),
            agent: agent.to_ascii_lowercase(),
            max_cost: "x-holon-max-cost".to_owned(),
            capability: "x-holon-capability".to_owned(),
        }
    }
}

/// The header an allowed call's reservation id is added under.
pub(crate) const RESERVATION_HEADER: &str = "x-holon-reservation";

pub(crate) struct ExtAuthz {
    svc: &'static Service,
    headers: Headers,
}

pub(crate) fn server(svc: &'static Service, headers: Headers) -> AuthorizationServer<ExtAuthz> {
    AuthorizationServer::new(ExtAuthz { svc, headers })
}

#[tonic::async_trait]
impl Authorization for ExtAuthz {
    async fn check(&self, request: Request<CheckRequest>) -> Result<Response<CheckResponse>, Status> {
        let started = Instant::now();
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match token.and_then(|t| self.svc.role_of(t)) {
            Some(Role::Gateway) => {}
            Some(Role::Account(_)) => {
                return Err(Status::permission_denied("Check is the gateway's: use a gateway token"));
            }
            None => return Err(Status::unauthenticated("a gateway bearer token is required in `authorization`")),
        }
        let request = request.into_inner();
        let empty = HashMap::new();
        let headers = request.get_client_headers().unwrap_or(&empty);
        let answer = match self.admit_request(headers) {
            Err(message) => {
                denied(HttpStatusCode::BadRequest, "", &serde_json::json!({ "error": message }).to_string())
            }
            Ok(req) => match self.svc.admit(req).await {
                Err(refusal) => {
                    denied(http_code(refusal.status), "", &serde_json::to_string(&refusal.body).unwrap_or_default())
                }
                Ok(decision) => respond(&decision),
            },
        };
        self.svc.metrics.admission_seconds_grpc.observe(started.elapsed().as_secs_f64());
        Ok(Response::new(answer))
    }
}

impl ExtAuthz {
    fn admit_request(&self, headers: &HashMap<String, String>) -> Result<AdmitRequest, String> {
        let need = |name: &str| headers.get(name).cloned().ok_or_else(|| format!("the request has no `{name}` header"));
        Ok(AdmitRequest {
            mandate: need(&self.headers.mandate)?,
            agent: need(&self.headers.agent)?,
            max_cost: headers.get(&self.headers.max_cost).cloned(),
            capability: headers.get(&self.headers.capability).cloned(),
            at: None,
        })
    }
}

fn respond(decision: &DecisionBody) -> CheckResponse {
    match &decision.reservation {
        Some(id) if decision.decision == "allowed" => {
            let mut ok = OkHttpResponseBuilder::new();
            ok.add_header(RESERVATION_HEADER, id.as_str(), None, false);
            let mut response = CheckResponse::with_status(Status::ok("allowed"));
            response.set_http_response(ok);
            response
        }
        _ => denied(
            HttpStatusCode::Forbidden,
            &decision.codes.join(","),
            &serde_json::to_string(decision).unwrap_or_default(),
        ),
    }
}

fn denied(code: HttpStatusCode, codes: &str, body: &str) -> CheckResponse {
    let mut http = DeniedHttpResponseBuilder::new();
    http.set_http_status(code);
    http.add_header("content-type", "application/json", None, false);
    if !codes.is_empty() {
        http.add_header("x-holon-codes", codes, None, false);
    }
    http.set_body(body);
    let mut response = CheckResponse::with_status(Status::permission_denied(codes.to_owned()));
    response.set_http_response(http);
    response
}

fn http_code(status: u16) -> HttpStatusCode {
    match status {
        400 => HttpStatusCode::BadRequest,
        401 => HttpStatusCode::Unauthorized,
        403 => HttpStatusCode::Forbidden,
        404 => HttpStatusCode::NotFound,
        _ => HttpStatusCode::ServiceUnavailable,
    }
}
