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
use super::service::idempotency::{self, Answer, Answered, Keyed};
use super::wire::AdmitRequest;

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
        let answered = self.keyed_check(headers).await;
        self.svc.metrics.admission_seconds_grpc.observe(started.elapsed().as_secs_f64());
        if answered.replayed {
            self.svc.metrics.idempotent_replays.inc();
        }
        Ok(Response::new(respond(&answered)))
    }
}

impl ExtAuthz {
    /// The check as an admit. Every `Check` reserves, unless the operator named a header
    /// it trusts Envoy to generate (`--check-key-header`): then a `Check` with that header's
    /// value answered before gets the first answer, and an allowed one only while its
    /// reservation is open (`holon::gateway::replay_of_allowed`).
    async fn keyed_check(&self, headers: &HashMap<String, String>) -> Answered {
        let svc = self.svc;
        let key = match &svc.keys.check_header {
            None => Ok(None),
            Some(header) => idempotency::key_in(header, headers.get(header).map(String::as_bytes)),
        };
        let key = match key {
            Ok(key) => key,
            Err(refusal) => return Answered { answer: Answer::refusal(refusal), replayed: false },
        };
        let asked = self.admit_request(headers);
        let field = |h: &str| headers.get(h).map_or(&b""[..], |v| v.as_bytes());
        let keyed = key.map(|key| {
            let request = [
                &b"CHECK"[..],
                field(&self.headers.mandate),
                field(&self.headers.agent),
                field(&self.headers.max_cost),
                field(&self.headers.capability),
            ];
            Keyed::new(&Role::Gateway, key, &request)
        });
        svc.keyed(keyed, async move {
            match asked {
                Err(message) => Answer::refusal(super::service::Refusal::new(400, message)),
                Ok(req) => idempotency::decision_answer(svc.admit(req).await),
            }
        })
        .await
    }

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

/// The check's answer from the admit's (fresh or kept): an allowed call OK, with its
/// reservation in a header; anything else the client's `403` (or the refusal's status) with
/// the answer as its body and the codes in `x-holon-codes`. A replayed answer says so.
fn respond(answered: &Answered) -> CheckResponse {
    let answer = &answered.answer;
    let decision: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_default();
    let reservation =
        decision["reservation"].as_str().filter(|_| answer.status == 200 && decision["decision"] == "allowed");
    if let Some(id) = reservation {
        let mut ok = OkHttpResponseBuilder::new();
        ok.add_header(RESERVATION_HEADER, id, None, false);
        if answered.replayed {
            ok.add_header(idempotency::REPLAYED_HEADER, "true", None, false);
        }
        let mut response = CheckResponse::with_status(Status::ok("allowed"));
        response.set_http_response(ok);
        return response;
    }
    // A decision's codes, or the protocol's code of an error that has one (a replay refused).
    let mut codes: Vec<&str> = decision["codes"].as_array().into_iter().flatten().filter_map(|c| c.as_str()).collect();
    codes.extend(decision["code"].as_str());
    let code = if answer.status == 200 { HttpStatusCode::Forbidden } else { http_code(answer.status) };
    denied(code, &codes.join(","), &answer.body, answered.replayed)
}

fn denied(code: HttpStatusCode, codes: &str, body: &str, replayed: bool) -> CheckResponse {
    let mut http = DeniedHttpResponseBuilder::new();
    http.set_http_status(code);
    http.add_header("content-type", "application/json", None, false);
    if replayed {
        http.add_header(idempotency::REPLAYED_HEADER, "true", None, false);
    }
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
        409 => HttpStatusCode::Conflict,
        422 => HttpStatusCode::UnprocessableEntity,
        _ => HttpStatusCode::ServiceUnavailable,
    }
}
