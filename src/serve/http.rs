//! The HTTP/JSON API (schema/openapi.yaml) on axum: authentication, limits, and the
//! mapping of the service's answers to status codes. A decision is always a 200; errors
//! are 4xx/5xx with a JSON body `{"error", "field"?}`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;

use super::auth::Role;
use super::conn::{Answers, routed};
use super::service::idempotency::{self, Answer, Answered, Keyed};
use super::service::{Refusal, Service};
use super::wire::{self, ErrorBody};

/// Limits on the HTTP side.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpLimits {
    /// Longest a request may take, in ms (then 408).
    pub request_ms: u64,
    /// Requests handled at once (more wait their turn).
    pub concurrent_max: usize,
}

type Svc = &'static Service;

/// The HTTP API as one service over the routes: the request's time limit (408), the
/// server's one bound on requests at once, and a JSON body on every error, applied once
/// around the router. (As `Router::layer` layers, they wrapped every route apart: each
/// request paid a boxed clone and a boxed future per layer, 6.5% of the server's
/// instructions per request; docs/PERFORMANCE.md, "The sidecar's layers, applied once".)
#[derive(Clone)]
pub(crate) struct Api {
    router: Router,
    /// [`HttpLimits::concurrent_max`] permits, one held while a request is handled.
    permits: Arc<tokio::sync::Semaphore>,
    timeout: Duration,
}

pub(crate) fn api(svc: Svc, limits: HttpLimits) -> Api {
    Api {
        router: router(svc),
        permits: Arc::new(tokio::sync::Semaphore::new(limits.concurrent_max)),
        timeout: Duration::from_millis(limits.request_ms),
    }
}

impl Answers for Api {
    fn answer(&self, request: Request) -> impl std::future::Future<Output = Response> + Send + use<> {
        // One copy of each part for the request's future (the router's taken by `routed`).
        let Api { router, permits, timeout } = self.clone();
        async move {
            // The wait for a permit counts against the request's time, as its handling does.
            let handled = async move {
                let Ok(_permit) = permits.acquire().await else {
                    return json(StatusCode::SERVICE_UNAVAILABLE, &ErrorBody::new("the server is shutting down"));
                };
                routed(router, request).await
            };
            let response = match tokio::time::timeout(timeout, handled).await {
                Ok(response) => response,
                Err(_) => json(StatusCode::REQUEST_TIMEOUT, &ErrorBody::new("the request took too long")),
            };
            json_errors(response)
        }
    }
}

fn router(svc: Svc) -> Router {
    Router::new()
        .route("/v1/admit", post(admit))
        .route("/v1/reservations/{id}/settle", post(settle))
        .route("/v1/reservations/{id}/release", post(release))
        .route("/v1/reservations/{id}/calls", post(sub_call))
        .route("/v1/pending/{id}/approve", post(approve))
        .route("/v1/pending/{id}/refuse", post(refuse))
        .route("/v1/mandates/{id}", get(mandate))
        .route("/v1/status", get(status))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(svc)
}

fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], serde_json::to_string(body).unwrap_or_default())
        .into_response()
}

fn refused(r: Refusal) -> Response {
    let mut response = json(StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &r.body);
    if r.status == 401 {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
    }
    response
}

fn answer<T: Serialize>(result: Result<T, Refusal>) -> Response {
    match result {
        Ok(body) => json(StatusCode::OK, &body),
        Err(r) => refused(r),
    }
}

/// The bearer token's role, or the 401 to send.
fn authenticate(svc: Svc, headers: &HeaderMap) -> Result<Role, Refusal> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.get(..7).filter(|p| p.eq_ignore_ascii_case("bearer ")).and_then(|_| v.get(7..)))
        .map(str::trim);
    let unauthorized = |why: &str| Refusal::new(401, why);
    match token {
        None => Err(unauthorized("a bearer token is required: `Authorization: Bearer <token>`")),
        Some(t) => svc.role_of(t).ok_or_else(|| unauthorized("the bearer token is not one this server accepts")),
    }
}

/// A response sent before the request's body was read to its end: the connection closes
/// after it, and says so (`Connection: close`), so that a client does not send its next
/// request on a connection the server is closing (seen: a pooled connection reused after a
/// 401 failed with "peer disconnected").
fn body_unread(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// Who is asking (from the headers, borrowed: no copy of the header map), then the body,
/// read only for an authenticated caller and at most [`wire::BODY_BYTES_MAX`] bytes.
async fn caller(svc: Svc, request: Request, gateway_only: bool) -> Result<(Role, Bytes), Response> {
    let (parts, body) = request.into_parts();
    let role = authenticate(svc, &parts.headers).map_err(|r| body_unread(refused(r)))?;
    if gateway_only && role != Role::Gateway {
        return Err(body_unread(refused(Refusal::new(
            403,
            "this endpoint is the gateway's; an account token may only approve, refuse and read",
        ))));
    }
    match axum::body::to_bytes(body, wire::BODY_BYTES_MAX).await {
        Ok(bytes) => Ok((role, bytes)),
        Err(_) => Err(body_unread(json(
            StatusCode::PAYLOAD_TOO_LARGE,
            &ErrorBody::new(format!("the body is larger than {} bytes, or was cut short", wire::BODY_BYTES_MAX)),
        ))),
    }
}

/// A state-changing endpoint: who is asking, its body, then `run` under the request's
/// `Idempotency-Key` when it has one (`idempotency`); the answer, replayed or not.
async fn keyed<F, Fut>(svc: Svc, request: Request, gateway_only: bool, run: F) -> Response
where
    F: FnOnce(Role, Bytes) -> Fut,
    Fut: std::future::Future<Output = Answer> + Send + 'static,
{
    // The key, and the path its digest covers (copied only for a keyed request).
    let key = match idempotency::key_of(request.headers(), &idempotency::KEY_HEADER) {
        Ok(key) => key.map(|key| (key, request.uri().path().to_owned())),
        Err(r) => return body_unread(refused(r)),
    };
    let (role, body) = match caller(svc, request, gateway_only).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    // Hashed only for a keyed request (SHA-256 of every body was 1% of the server's time).
    let keyed = key.map(|(key, path)| Keyed::new(&role, key, &[b"POST", path.as_bytes(), &body]));
    let answered = svc.keyed(keyed, run(role, body)).await;
    if answered.replayed {
        svc.metrics.idempotent_replays.inc();
    }
    answered_response(answered)
}

/// An answer (kept or fresh) as a response; a replayed one says so.
fn answered_response(answered: Answered) -> Response {
    let status = StatusCode::from_u16(answered.answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], answered.answer.body).into_response();
    if answered.replayed {
        response.headers_mut().insert(idempotency::REPLAYED_HEADER, axum::http::HeaderValue::from_static("true"));
    }
    response
}

async fn admit(State(svc): State<Svc>, request: Request) -> Response {
    let started = Instant::now();
    let response = keyed(svc, request, true, move |_, body| async move {
        match wire::parse::<wire::AdmitRequest>(&body) {
            Ok(req) => idempotency::decision_answer(svc.admit(req).await),
            Err(e) => Answer::refusal(e.into()),
        }
    })
    .await;
    svc.metrics.admission_seconds_http.observe(started.elapsed().as_secs_f64());
    response
}

async fn sub_call(State(svc): State<Svc>, Path(id): Path<String>, request: Request) -> Response {
    keyed(svc, request, true, move |_, body| async move {
        match wire::parse::<wire::SubCallRequest>(&body) {
            Ok(req) => idempotency::decision_answer(svc.sub_call(&id, req).await),
            Err(e) => Answer::refusal(e.into()),
        }
    })
    .await
}

async fn settle(State(svc): State<Svc>, Path(id): Path<String>, request: Request) -> Response {
    keyed(svc, request, true, move |_, body| async move {
        match wire::parse::<wire::SettleRequest>(&body) {
            Ok(req) => Answer::of(svc.settle(&id, req)),
            Err(e) => Answer::refusal(e.into()),
        }
    })
    .await
}

async fn release(State(svc): State<Svc>, Path(id): Path<String>, request: Request) -> Response {
    keyed(svc, request, true, move |_, body| async move {
        match wire::optional_at(&body) {
            Ok(_) => Answer::of(svc.release(&id)),
            Err(e) => Answer::refusal(e.into()),
        }
    })
    .await
}

async fn approve(State(svc): State<Svc>, Path(id): Path<String>, request: Request) -> Response {
    keyed(svc, request, false, move |role, body| async move {
        match wire::optional_at(&body) {
            Ok(at) => idempotency::decision_answer(svc.approve(&id, &role, at).await),
            Err(e) => Answer::refusal(e.into()),
        }
    })
    .await
}

async fn refuse(State(svc): State<Svc>, Path(id): Path<String>, request: Request) -> Response {
    keyed(svc, request, false, move |role, body| async move {
        match wire::optional_at(&body) {
            Ok(_) => Answer::of(svc.refuse(&id, &role).await),
            Err(e) => Answer::refusal(e.into()),
        }
    })
    .await
}

async fn mandate(State(svc): State<Svc>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    match authenticate(svc, &headers) {
        Ok(role) => answer(svc.mandate(&id, &role).await),
        Err(r) => refused(r),
    }
}

async fn status(State(svc): State<Svc>, headers: HeaderMap) -> Response {
    match authenticate(svc, &headers) {
        Ok(_) => json(StatusCode::OK, &svc.status_json()),
        Err(r) => refused(r),
    }
}

async fn healthz() -> Response {
    json(StatusCode::OK, &serde_json::json!({ "status": "ok" }))
}

async fn readyz(State(svc): State<Svc>, headers: HeaderMap) -> Response {
    if let Err(r) = authenticate(svc, &headers) {
        return refused(r);
    }
    // Acquire: pairs with the Release of the shutdown that cleared it (a flag, read alone).
    if svc.ready.load(std::sync::atomic::Ordering::Acquire) {
        json(StatusCode::OK, &serde_json::json!({ "ready": true }))
    } else {
        json(StatusCode::SERVICE_UNAVAILABLE, &serde_json::json!({ "ready": false, "error": "shutting down" }))
    }
}

async fn metrics(State(svc): State<Svc>, headers: HeaderMap) -> Response {
    if let Err(r) = authenticate(svc, &headers) {
        return refused(r);
    }
    // The format the scraper asks for, as Prometheus negotiates it: OpenMetrics when the
    // Accept header prefers it, else the text format 0.0.4 (counters named with `_total`).
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let openmetrics = super::metrics::wants_openmetrics(accept);
    let body = svc.metrics_text();
    let (content_type, body) = if openmetrics {
        (super::metrics::OPENMETRICS_TYPE, body)
    } else {
        (super::metrics::TEXT_TYPE, super::metrics::text_format(&body))
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Gives every error response that is not already JSON an `Error` body, keeping its status
/// and headers (a 405's `Allow`): axum's rejections (405, 413, a path that is not UTF-8)
/// are plain text, and the API promises a JSON `Error` body on every 4xx.
fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let error = match status {
        StatusCode::METHOD_NOT_ALLOWED => "this path does not take that method; see schema/openapi.yaml".to_owned(),
        StatusCode::PAYLOAD_TOO_LARGE => format!("the body is larger than {} bytes", wire::BODY_BYTES_MAX),
        StatusCode::BAD_REQUEST => "the request's path or headers cannot be read".to_owned(),
        other => format!("the request failed: {other}"),
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.insert(header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = serde_json::to_string(&ErrorBody::new(error)).unwrap_or_default();
    Response::from_parts(parts, axum::body::Body::from(body))
}

async fn not_found(uri: axum::http::Uri) -> Response {
    // `/v1/mandates/alice/m-2026-11`: an id with its `/` not percent-encoded.
    let error = match uri.path().strip_prefix("/v1/mandates/").filter(|rest| rest.contains('/')) {
        Some(id) => format!(
            "no such endpoint: a mandate id in a path is percent-encoded, its `/` as %2F: GET /v1/mandates/{}",
            id.replace('/', "%2F")
        ),
        None => "no such endpoint; see schema/openapi.yaml".to_owned(),
    };
    json(StatusCode::NOT_FOUND, &ErrorBody::new(error))
}
