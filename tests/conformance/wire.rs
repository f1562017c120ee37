//! The `http` and `grpc` surfaces of the conformance suite: a real `holon serve` (on a copy
//! of the examples with the scenario's edits, its SQLite store, `--check-key-header
//! x-request-id`), its answers normalized. The `grpc` surface admits with Envoy's `Check`
//! and does the rest over HTTP, as a gateway behind Envoy would.

use std::collections::HashMap;

use envoy_types::pb::envoy::service::auth::v3::attribute_context::{HttpRequest, Request as AttrRequest};
use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
use envoy_types::pb::envoy::service::auth::v3::check_response::HttpResponse;
use envoy_types::pb::envoy::service::auth::v3::{AttributeContext, CheckRequest};
use holon::money::Amount;
use serde_json::{Map, Value, json};

use super::{Answer, Names, Scenario, Step, Surface};
use crate::common::server::Server;

pub(crate) struct Wire {
    server: Server,
}

pub(crate) struct Http {
    server: Server,
}

pub(crate) struct Grpc {
    http: Http,
    runtime: tokio::runtime::Runtime,
}

impl Wire {
    pub(crate) fn start(scenario: &Scenario) -> Wire {
        Wire { server: Server::start_with_args(|docs| scenario.edit(docs), &["--check-key-header", "x-request-id"]) }
    }

    pub(crate) fn http(self) -> Http {
        Http { server: self.server }
    }

    pub(crate) fn grpc(self) -> Grpc {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        Grpc { http: self.http(), runtime }
    }
}

fn error_kind(status: u16) -> &'static str {
    match status {
        400 => "bad_request",
        403 => "forbidden",
        404 => "not_found",
        409 => "conflict",
        422 => "unprocessable",
        _ => "unexpected",
    }
}

/// A decision's body (or an error's) normalized.
fn decision(status: u16, body: &Value, step: &Step, names: &mut Names) -> Map<String, Value> {
    let mut map = Map::new();
    if status != 200 {
        // A replay refused: a 409 whose body carries the protocol's code and sentence.
        if let Some(code) = body.get("code").and_then(Value::as_str) {
            map.insert("decision".to_owned(), json!("denied"));
            map.insert("codes".to_owned(), json!([code]));
            map.insert("reasons".to_owned(), json!([names.in_text(body["error"].as_str().unwrap_or_default())]));
            return map;
        }
        map.insert("error".to_owned(), json!(error_kind(status)));
        return map;
    }
    map.insert("decision".to_owned(), body["decision"].clone());
    map.insert("codes".to_owned(), body["codes"].clone());
    let reasons: Vec<String> = body["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| names.in_text(r["message"].as_str().unwrap_or_default()))
        .collect();
    map.insert("reasons".to_owned(), json!(reasons));
    map.insert("worst_case".to_owned(), body["worst_case"].clone());
    if let Some(c) = body.get("currency") {
        map.insert("currency".to_owned(), c.clone());
    }
    if let Some(id) = body.get("reservation").and_then(Value::as_str) {
        map.insert("reservation".to_owned(), names.name_of(id, step.name.as_deref()));
    }
    if let Some(id) = body.get("pending").and_then(Value::as_str) {
        map.insert("pending".to_owned(), names.name_of(id, step.name.as_deref()));
    }
    map
}

fn one(key: &str, value: Value) -> Answer {
    let mut map = Map::new();
    map.insert(key.to_owned(), value);
    Some(map)
}

impl Http {
    fn post(&self, path: &str, token: &str, body: Value, key: Option<&str>) -> (u16, Value) {
        match key {
            Some(key) => {
                let (status, _, body) =
                    self.server.post_keyed(path, token, &body, key, std::time::Duration::from_secs(60)).unwrap();
                (status, body)
            }
            None => self.server.post(path, token, body),
        }
    }

    fn token(&self, by: &str) -> &str {
        match by {
            "alice" => &self.server.alice,
            "bob" => &self.server.bob,
            other => panic!("no token for `{other}`"),
        }
    }

    fn admit(&self, step: &Step, names: &mut Names) -> Answer {
        let mut body = Map::new();
        for field in ["mandate", "agent", "max_cost", "capability"] {
            if let Some(v) = step.arg(field) {
                body.insert(field.to_owned(), json!(v));
            }
        }
        let (status, answer) = self.post("/v1/admit", &self.server.gateway, Value::Object(body), step.arg("key"));
        Some(decision(status, &answer, step, names))
    }

    fn spend(&self, mandate: &str) -> Answer {
        let (status, body) =
            self.server.get(&format!("/v1/mandates/{}", mandate.replace('/', "%2F")), Some(&self.server.gateway));
        if status != 200 {
            return one("error", json!(error_kind(status)));
        }
        let body: Value = serde_json::from_str(&body).unwrap();
        let figure = |k: &str| Amount::parse(body["this_node"][k].as_str().unwrap()).unwrap().micros();
        let mut map = Map::new();
        map.insert("spent".to_owned(), json!(Amount::from_micros(figure("reserved") + figure("settled")).to_string()));
        map.insert(
            "today".to_owned(),
            json!(Amount::parse(body["this_node"]["today"].as_str().unwrap()).unwrap().to_string()),
        );
        Some(map)
    }

    fn settle(&self, step: &Step, names: &Names) -> Answer {
        let id = names.id(step.arg("reservation").unwrap());
        let mut body = Map::new();
        body.insert("actual".to_owned(), json!(step.arg("actual").unwrap()));
        if let Some(o) = step.arg("outcome") {
            body.insert("outcome".to_owned(), json!(o));
        }
        if let Some(l) = step.args.get("latency_ms") {
            body.insert("latency_ms".to_owned(), l.clone());
        }
        let (status, answer) =
            self.post(&format!("/v1/reservations/{id}/settle"), &self.server.gateway, Value::Object(body), None);
        if status != 200 {
            return one("error", json!(error_kind(status)));
        }
        let mut map = Map::new();
        for field in ["kept", "billed", "worst_case", "clamped"] {
            map.insert(field.to_owned(), answer[field].clone());
        }
        Some(map)
    }

    fn held_step(&self, step: &Step, names: &mut Names, verb: &str) -> Answer {
        if step.arg("form") == Some("name") {
            // A token carries the account: the wire has no second form to try.
            return None;
        }
        let id = names.id(step.arg("pending").unwrap());
        let token = self.token(step.arg("by").unwrap()).to_owned();
        let (status, answer) = self.post(&format!("/v1/pending/{id}/{verb}"), &token, json!({}), None);
        if verb == "refuse" {
            return match status {
                200 => one("refused", answer["refused"].clone()),
                // Not held (any more): the README's table, `refused: false`.
                404 => one("refused", json!(false)),
                other => one("error", json!(error_kind(other))),
            };
        }
        Some(decision(status, &answer, step, names))
    }
}

impl Surface for Http {
    fn step(&mut self, step: &Step, names: &mut Names) -> Answer {
        match step.op.as_str() {
            "admit" => self.admit(step, names),
            "approve" => self.held_step(step, names, "approve"),
            "refuse" => self.held_step(step, names, "refuse"),
            "settle" => self.settle(step, names),
            "release" => {
                let id = names.id(step.arg("reservation").unwrap());
                let (status, answer) =
                    self.post(&format!("/v1/reservations/{id}/release"), &self.server.gateway, json!({}), None);
                if status == 200 {
                    one("released", answer["released"].clone())
                } else {
                    one("error", json!(error_kind(status)))
                }
            }
            "sub_call" => {
                let id = names.id(step.arg("reservation").unwrap());
                let mut body = Map::new();
                for field in ["agent", "capability", "max_cost"] {
                    if let Some(v) = step.arg(field) {
                        body.insert(field.to_owned(), json!(v));
                    }
                }
                let (status, answer) =
                    self.post(&format!("/v1/reservations/{id}/calls"), &self.server.gateway, Value::Object(body), None);
                Some(decision(status, &answer, step, names))
            }
            "spend" => self.spend(step.args.as_str().unwrap()),
            // The server flushes on its own schedule: no word for it on the wire.
            "flush" => None,
            other => panic!("no step `{other}`"),
        }
    }
}

impl Grpc {
    fn check(&mut self, step: &Step, names: &mut Names) -> Answer {
        let mut headers: HashMap<String, String> = HashMap::new();
        for (field, header) in [
            ("mandate", "x-holon-mandate"),
            ("agent", "x-holon-agent"),
            ("max_cost", "x-holon-max-cost"),
            ("capability", "x-holon-capability"),
            ("key", "x-request-id"),
        ] {
            if let Some(v) = step.arg(field) {
                headers.insert(header.to_owned(), v.to_owned());
            }
        }
        let server = &self.http.server;
        let request = CheckRequest {
            attributes: Some(AttributeContext {
                request: Some(AttrRequest {
                    http: Some(HttpRequest { headers, ..Default::default() }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        let mut request = tonic::Request::new(request);
        request.metadata_mut().insert("authorization", format!("Bearer {}", server.gateway).parse().unwrap());
        let url = server.grpc.clone();
        let response = self.runtime.block_on(async move {
            let mut client = AuthorizationClient::connect(url).await.unwrap();
            client.check(request).await.unwrap().into_inner()
        });
        match response.http_response {
            Some(HttpResponse::OkResponse(ok)) => {
                let header =
                    ok.headers.iter().filter_map(|h| h.header.as_ref()).find(|h| h.key == "x-holon-reservation");
                let id = header.expect("an allowed Check names its reservation").value.clone();
                let mut map = Map::new();
                map.insert("decision".to_owned(), json!("allowed"));
                map.insert("reservation".to_owned(), names.name_of(&id, step.name.as_deref()));
                Some(map)
            }
            Some(HttpResponse::DeniedResponse(denied)) => {
                let status = denied.status.as_ref().map_or(0, |s| u16::try_from(s.code).unwrap_or(0));
                let body: Value = serde_json::from_str(&denied.body).unwrap_or_default();
                // A held or denied decision comes as the client's 403 with the decision body.
                let status = if status == 403 && body.get("decision").is_some() { 200 } else { status };
                Some(decision(status, &body, step, names))
            }
            other => panic!("a Check answered {other:?}"),
        }
    }
}

impl Surface for Grpc {
    fn step(&mut self, step: &Step, names: &mut Names) -> Answer {
        match step.op.as_str() {
            "admit" => self.check(step, names),
            _ => self.http.step(step, names),
        }
    }
}
