//! Envoy ext_authz `Check` against a real `holon serve`, with a client built from the
//! same published protos (envoy-types), over loopback.
#![cfg(feature = "serve")]

mod common;

use std::collections::HashMap;

use common::server::Server;
use envoy_types::pb::envoy::service::auth::v3::attribute_context::{HttpRequest, Request as AttrRequest};
use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
use envoy_types::pb::envoy::service::auth::v3::check_response::HttpResponse;
use envoy_types::pb::envoy::service::auth::v3::{AttributeContext, CheckRequest, CheckResponse};
use serde_json::json;

fn check_request(headers: &[(&str, &str)]) -> CheckRequest {
    let headers: HashMap<String, String> = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
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

async fn check(s: &Server, token: Option<&str>, headers: &[(&str, &str)]) -> Result<CheckResponse, tonic::Status> {
    let mut client = AuthorizationClient::connect(s.grpc.clone()).await.unwrap();
    let mut request = tonic::Request::new(check_request(headers));
    if let Some(t) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    client.check(request).await.map(tonic::Response::into_inner)
}

#[test]
fn ext_authz_allows_with_a_reservation_header_and_denies_with_the_codes() {
    let s = Server::start();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let allowed = [("x-holon-mandate", "alice/m-2026-11"), ("x-holon-agent", "acme/table-extract")];
        // No token, or an account's token: refused, nothing reserved.
        assert_eq!(check(&s, None, &allowed).await.unwrap_err().code(), tonic::Code::Unauthenticated);
        assert_eq!(check(&s, Some(&s.alice), &allowed).await.unwrap_err().code(), tonic::Code::PermissionDenied);
        // Allowed: OK, and the reservation id in a header for the upstream request.
        let ok = check(&s, Some(&s.gateway), &allowed).await.unwrap();
        assert_eq!(ok.status.as_ref().unwrap().code, 0, "{ok:?}");
        let Some(HttpResponse::OkResponse(http)) = ok.http_response else { panic!("{ok:?}") };
        let header = http.headers.iter().filter_map(|h| h.header.as_ref()).find(|h| h.key == "x-holon-reservation");
        let id = header.expect("the reservation header").value.clone();
        // Settled over HTTP.
        let (status, settled) =
            s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0.004" }));
        assert_eq!((status, settled["kept"].as_str()), (200, Some("0.004")), "{settled}");
        // Denied: 403 with the codes, and the decision as the body.
        let denied = check(
            &s,
            Some(&s.gateway),
            &[("x-holon-mandate", "alice/m-2026-11"), ("x-holon-agent", "holon-labs/invoice-pipeline")],
        )
        .await
        .unwrap();
        assert_eq!(denied.status.as_ref().unwrap().code, tonic::Code::PermissionDenied as i32);
        let Some(HttpResponse::DeniedResponse(http)) = denied.http_response else { panic!("{denied:?}") };
        assert_eq!(http.status.as_ref().unwrap().code, 403);
        let codes = http.headers.iter().filter_map(|h| h.header.as_ref()).find(|h| h.key == "x-holon-codes");
        assert_eq!(codes.unwrap().value, "per_call_exceeded");
        let body: serde_json::Value = serde_json::from_str(&http.body).unwrap();
        assert_eq!(body["worst_case"], "3.10");
        // A missing header or bad money: 400, nothing reserved.
        let bad = check(&s, Some(&s.gateway), &[("x-holon-mandate", "alice/m-2026-11")]).await.unwrap();
        let Some(HttpResponse::DeniedResponse(http)) = bad.http_response else { panic!("{bad:?}") };
        assert_eq!(http.status.as_ref().unwrap().code, 400);
        let bad_money = [
            ("x-holon-mandate", "alice/m-2026-11"),
            ("x-holon-agent", "acme/table-extract"),
            ("x-holon-max-cost", "NaN"),
        ];
        let bad = check(&s, Some(&s.gateway), &bad_money).await.unwrap();
        let Some(HttpResponse::DeniedResponse(http)) = bad.http_response else { panic!("{bad:?}") };
        assert_eq!(http.status.as_ref().unwrap().code, 400, "{}", http.body);
    });
    let (_, status) = s.get("/v1/status", Some(&s.gateway));
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["in_flight"], 0, "{status}");
}

fn reservation_of(r: &CheckResponse) -> Option<String> {
    let Some(HttpResponse::OkResponse(http)) = &r.http_response else { return None };
    let header = http.headers.iter().filter_map(|h| h.header.as_ref()).find(|h| h.key == "x-holon-reservation");
    header.map(|h| h.value.clone())
}

/// With `--check-key-header x-request-id` (the operator trusts Envoy to generate it),
/// `Check` is keyed by it: the retry is answered with the first reservation while it is
/// open, says it was replayed, and nothing more is reserved.
#[test]
fn a_retried_check_with_the_same_request_id_reserves_once() {
    let s = Server::start_with_args(|_| {}, &["--check-key-header", "x-request-id"]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let call = |id: &str| {
            [("x-holon-mandate", "alice/m-2026-11"), ("x-holon-agent", "acme/table-extract"), ("x-request-id", id)]
                .map(|(k, v)| (k, v.to_owned()))
        };
        // The node may still be leasing (lease_pending is not kept): the same id asks again.
        let mut first = None;
        for _ in 0..3_000 {
            let headers = call("envoy-1");
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let r = check(&s, Some(&s.gateway), &pairs).await.unwrap();
            if r.status.as_ref().is_some_and(|st| st.code == 0) {
                first = Some(r);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let first = first.expect("the check was allowed");
        let headers = call("envoy-1");
        let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let again = check(&s, Some(&s.gateway), &pairs).await.unwrap();
        assert_eq!(again.status.as_ref().map(|st| st.code), Some(0), "{again:?}");
        assert_eq!(reservation_of(&again), reservation_of(&first), "the same reservation");
        let Some(HttpResponse::OkResponse(http)) = &again.http_response else { panic!("{again:?}") };
        assert!(http.headers.iter().filter_map(|h| h.header.as_ref()).any(|h| h.key == "idempotent-replayed"));
        // Another call under the same id: refused (422 to the client), nothing reserved.
        let other = [
            ("x-holon-mandate", "alice/m-2026-11"),
            ("x-holon-agent", "holon-labs/fx-convert"),
            ("x-request-id", "envoy-1"),
        ];
        let clash = check(&s, Some(&s.gateway), &other).await.unwrap();
        let Some(HttpResponse::DeniedResponse(http)) = clash.http_response else { panic!("{clash:?}") };
        assert_eq!(http.status.as_ref().unwrap().code, 422, "{}", http.body);
    });
    let (_, status) = s.get("/v1/status", Some(&s.gateway));
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["in_flight"], 1, "reserved once: {status}");
}

/// Headers of a `Check` of acme/table-extract under alice's mandate, with an `x-request-id`.
fn table_extract(id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-holon-mandate", "alice/m-2026-11".to_owned()),
        ("x-holon-agent", "acme/table-extract".to_owned()),
        ("x-request-id", id.to_owned()),
    ]
}

async fn check_owned(s: &Server, headers: &[(&'static str, String)]) -> CheckResponse {
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    check(s, Some(&s.gateway), &pairs).await.unwrap()
}

/// The first allowed answer of `id`, asking again while the node is still leasing.
async fn first_allowed(s: &Server, id: &str) -> CheckResponse {
    for _ in 0..3_000 {
        let r = check_owned(s, &table_extract(id)).await;
        if r.status.as_ref().is_some_and(|st| st.code == 0) {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the check of {id} was never allowed");
}

/// alice's budget fits one call of acme/table-extract (0.004 EUR): 0.005 in all.
fn one_call_budget(docs: &std::path::Path) {
    let path = docs.join("mandates/alice-root.yaml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (a, b) in [
        ("total: \"100.00\"", "total: \"0.005\""),
        ("per_day: \"20.00\"", "per_day: \"0.005\""),
        ("per_call: \"2.00\"", "per_call: \"0.005\""),
    ] {
        assert!(text.contains(a), "{a}");
        text = text.replace(a, b);
    }
    std::fs::write(&path, text).unwrap();
    // The sub-mandates no longer fit their shrunken parent: out of this test.
    std::fs::remove_file(docs.join("mandates/alice-invoices.yaml")).unwrap();
    std::fs::remove_file(docs.join("mandates/alice-research.yaml")).unwrap();
}

/// The critical finding of issue #50: a `Check` replayed with the `x-request-id` of an
/// allowed call after that call was settled was allowed again (20 of 20, each a paid call
/// the proxy forwards). Now a replay of an ended reservation is a denial with its code.
#[test]
fn a_check_replayed_after_its_reservation_was_settled_lets_nothing_through() {
    let s = Server::start_with_args(one_call_budget, &["--check-key-header", "x-request-id"]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let first = first_allowed(&s, "envoy-first").await;
        let id = reservation_of(&first).expect("a reservation");
        let (status, settled) =
            s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0.004" }));
        assert_eq!(status, 200, "{settled}");
        // A new call: the budget is spent.
        let new = check_owned(&s, &table_extract("envoy-second")).await;
        assert_ne!(new.status.as_ref().map(|st| st.code), Some(0), "{new:?}");
        let mut allowed = 0;
        for _ in 0..20 {
            let replay = check_owned(&s, &table_extract("envoy-first")).await;
            if replay.status.as_ref().is_some_and(|st| st.code == 0) || reservation_of(&replay).is_some() {
                allowed += 1;
                continue;
            }
            let Some(HttpResponse::DeniedResponse(http)) = &replay.http_response else { panic!("{replay:?}") };
            assert_eq!(http.status.as_ref().unwrap().code, 409, "{}", http.body);
            let codes = http.headers.iter().filter_map(|h| h.header.as_ref()).find(|h| h.key == "x-holon-codes");
            assert_eq!(codes.map(|c| c.value.as_str()), Some("replay_reservation_ended"), "{}", http.body);
        }
        assert_eq!(allowed, 0, "a replay after the settle was allowed");
    });
    let (_, status) = s.get("/v1/status", Some(&s.gateway));
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["in_flight"], 0, "nothing reserved by the replays: {status}");
}

/// By default no header of the checked request keys a `Check` (the budgeted caller could
/// set it): two `Check`s with one `x-request-id` are two calls, each reserved.
#[test]
fn by_default_a_check_is_not_keyed_by_a_header_of_the_checked_request() {
    let s = Server::start();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let first = first_allowed(&s, "client-chosen").await;
        let second = first_allowed(&s, "client-chosen").await;
        assert_ne!(reservation_of(&first), reservation_of(&second), "two reservations");
    });
    let (_, status) = s.get("/v1/status", Some(&s.gateway));
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["in_flight"], 2, "{status}");
}
