//! Signed mandates and provenance (docs/trust.md): what a signature covers (every value,
//! not the formatting), chains by digest that must also attenuate, hostile signature
//! blocks, and an engine that requires signatures refusing at publish and keeping the old
//! snapshot.

use std::sync::Arc;

use holon::admission::Code;
use holon::catalog::Catalog;
use holon::doc::{self, DocKind, Limits};
use holon::documents::{self, Document};
use holon::engine::{Admission, Call, Engine, EngineConfig, SnapshotInput};
use holon::lookup::NoAgents;
use holon::mandate::Mandate;
use holon::pattern::Principal;
use holon::time::Timestamp;
use holon::trust::chain::ChainError;
use holon::trust::signature::{self, Purpose, SignatureError};
use holon::trust::{PrivateKey, TrustedKeys, canonical, provenance, verify_chain};
use proptest::prelude::*;
use serde_json::{Value, json};

fn key(account: &str, seed: u8) -> PrivateKey {
    PrivateKey::from_seed(Principal::parse(account).unwrap(), [seed; 32])
}

fn trusted(keys: &[&PrivateKey]) -> TrustedKeys {
    let mut t = TrustedKeys::default();
    for k in keys {
        t.add(k.account.clone(), k.public_key());
    }
    t
}

fn value_of(path: &str) -> Value {
    doc::yaml::parse(&std::fs::read_to_string(path).unwrap(), &Limits::default()).unwrap()
}

/// `value` signed by `key`, as the text `holon mandate sign` would write from a value.
fn signed_text(value: &Value, key: &PrivateKey) -> String {
    let digest = canonical::digest(value).unwrap();
    let block = signature::sign(key, Purpose::Mandate, &digest);
    let mut v = value.clone();
    v.as_object_mut().unwrap().insert("signature".into(), serde_json::to_value(&block).unwrap());
    doc::to_yaml(&v).unwrap()
}

fn load(text: &str) -> Mandate {
    match documents::load_str(text, "<test>", DocKind::Mandate, &Limits::default()).unwrap() {
        Document::Mandate(m) => *m,
        _ => unreachable!(),
    }
}

/// Alice's root mandate signed by alice, and the research sub-mandate naming it by digest,
/// signed by its issuer, the assistant.
fn chain() -> (PrivateKey, PrivateKey, Value, Value) {
    let (alice, assistant) = (key("alice", 1), key("alice/assistant", 2));
    let root = value_of("examples/mandates/alice-root.yaml");
    let mut child = value_of("examples/mandates/alice-research.yaml");
    child["parent"] = json!(canonical::digest(&root).unwrap().to_string());
    (alice, assistant, root, child)
}

#[test]
fn reformatting_a_signed_mandate_keeps_it_verified() {
    let alice = key("alice", 1);
    let keys = trusted(&[&alice]);
    let text = signed_text(&value_of("examples/mandates/alice-root.yaml"), &alice);
    let m = load(&text);
    assert_eq!(verify_chain(&m, &|_| None, &keys, &NoAgents), Ok(1));
    // Flow style, another key order, other quoting, comments: the same value.
    let value: Value = doc::yaml::parse(&text, &Limits::default()).unwrap();
    let mut keys_reversed: Vec<(&String, &Value)> = value.as_object().unwrap().iter().collect();
    keys_reversed.reverse();
    let flow = format!(
        "# reformatted\n{{{}}}\n",
        keys_reversed
            .iter()
            .map(|(k, v)| format!("{k}: {}", serde_json::to_string(v).unwrap()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let reformatted = load(&flow);
    assert_eq!(reformatted.digest(), m.digest());
    assert_eq!(verify_chain(&reformatted, &|_| None, &keys, &NoAgents), Ok(1));
}

/// Every leaf of the document, as a JSON Pointer.
fn leaves(v: &Value, path: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => map.iter().for_each(|(k, x)| leaves(x, format!("{path}/{k}"), out)),
        Value::Array(items) => items.iter().enumerate().for_each(|(i, x)| leaves(x, format!("{path}/{i}"), out)),
        _ => out.push(path),
    }
}

#[test]
fn changing_any_value_of_a_signed_mandate_fails_verification() {
    let alice = key("alice", 1);
    let keys = trusted(&[&alice]);
    let original = value_of("examples/mandates/alice-root.yaml");
    let text = signed_text(&original, &alice);
    let signed: Value = doc::yaml::parse(&text, &Limits::default()).unwrap();
    let mut pointers = Vec::new();
    leaves(&original, String::new(), &mut pointers);
    assert!(pointers.len() >= 30, "{pointers:?}");
    let mut checked = 0;
    let mut unchanged = Vec::new();
    for pointer in pointers {
        let before = signed.pointer(&pointer).unwrap().clone();
        // Changes of meaning, tried in turn until one keeps the document valid (a change
        // that makes it invalid is refused before the signature is even read).
        let candidates: Vec<Value> = match &before {
            Value::String(s) => {
                let mut c = Vec::new();
                if let Some(stem) = s.strip_suffix('0') {
                    c.push(json!(format!("{stem}1")));
                }
                c.push(json!(s.replace("00Z", "01Z").replace("59Z", "58Z")));
                c.push(json!(format!("{s}x")));
                for other in ["GBP", "mcp", "finance.fx", "P1D", "acme/*", "bob", "0.1"] {
                    c.push(json!(other));
                }
                c
            }
            Value::Bool(b) => vec![json!(!b)],
            Value::Number(n) => match n.as_u64() {
                Some(u) => vec![json!(u + 1), json!(u - 1)],
                None => vec![json!(n.as_f64().unwrap() + 1.0)],
            },
            Value::Null => vec![json!("alice/m-2026-10")],
            other => vec![other.clone()],
        };
        let Some(m) = candidates.into_iter().filter(|c| *c != before).find_map(|c| {
            let mut tampered = signed.clone();
            *tampered.pointer_mut(&pointer).unwrap() = c;
            match documents::load_str(&doc::to_yaml(&tampered).unwrap(), "<t>", DocKind::Mandate, &Limits::default()) {
                Ok(Document::Mandate(m)) => Some(m),
                _ => None,
            }
        }) else {
            unchanged.push(pointer);
            continue;
        };
        let result = verify_chain(&m, &|_| None, &keys, &NoAgents);
        assert!(result.is_err(), "{pointer} changed and still verified");
        checked += 1;
    }
    // The version is a constant, and the three runtimes are all the kinds there are, so
    // changing one would list another twice.
    assert!(checked >= 26, "only {checked} values could be changed into another valid document; not {unchanged:?}");
}

#[test]
fn a_chain_holds_link_by_link_and_every_broken_link_is_named() {
    let (alice, assistant, root, child) = chain();
    let keys = trusted(&[&alice, &assistant]);
    let root_m = load(&signed_text(&root, &alice));
    let child_m = load(&signed_text(&child, &assistant));
    let pool = [root_m.clone()];
    let parent = |d: &holon::trust::Digest| pool.iter().find(|m| m.digest().as_ref() == Some(d));
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    assert_eq!(verify_chain(&child_m, &parent, &keys, &catalog), Ok(2));
    // The parent is not at hand.
    assert!(matches!(verify_chain(&child_m, &|_| None, &keys, &catalog), Err(ChainError::ParentMissing { .. })));
    // Named by id: a signed chain names its parent by digest.
    let mut by_id = child.clone();
    by_id["parent"] = json!("alice/m-2026-11");
    let by_id = load(&signed_text(&by_id, &assistant));
    assert!(matches!(verify_chain(&by_id, &parent, &keys, &catalog), Err(ChainError::ParentById { .. })));
    // Signed by alice's key: not trusted for the child's issuer, the assistant.
    let wrong_signer = load(&signed_text(&child, &alice));
    let err = verify_chain(&wrong_signer, &parent, &keys, &catalog).unwrap_err();
    assert!(matches!(err, ChainError::Signature { error: SignatureError::KeyNotTrusted { .. }, .. }), "{err}");
    // A child that widens its parent is refused although correctly signed.
    let mut wide = child.clone();
    wide["budget"]["total"] = json!("1000.00");
    let wide = load(&signed_text(&wide, &assistant));
    let err = verify_chain(&wide, &parent, &keys, &catalog).unwrap_err();
    assert!(matches!(&err, ChainError::Widens { reasons, .. } if reasons.contains("total")), "{err}");
    // An unsigned parent breaks the chain above a signed child.
    let unsigned_root = load(&doc::to_yaml(&root).unwrap());
    let pool = [unsigned_root];
    let parent = |d: &holon::trust::Digest| pool.iter().find(|m| m.digest().as_ref() == Some(d));
    let err = verify_chain(&child_m, &parent, &keys, &catalog).unwrap_err();
    assert!(
        matches!(&err, ChainError::Signature { mandate, error: SignatureError::Unsigned } if mandate == "alice/m-2026-11"),
        "{err}"
    );
}

#[test]
fn hostile_signature_blocks_are_clear_errors() {
    let alice = key("alice", 1);
    let keys = trusted(&[&alice]);
    let text = signed_text(&value_of("examples/mandates/alice-root.yaml"), &alice);
    let signed: Value = doc::yaml::parse(&text, &Limits::default()).unwrap();
    for (field, bad, says) in [
        ("key", json!("not base64!"), "/signature/key"),
        ("key", json!("AAAA"), "/signature/key"),
        ("value", json!("%%%"), "/signature/value"),
        ("alg", json!("rsa"), "/signature/alg"),
    ] {
        let mut v = signed.clone();
        v["signature"][field] = bad;
        let err = documents::load_str(&doc::to_yaml(&v).unwrap(), "<t>", DocKind::Mandate, &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{field}: {err}");
    }
    // A point that is not on the curve has the right length and alphabet.
    let off_curve = (2u8..=255)
        .map(|y| {
            let mut bytes = [0u8; 32];
            bytes[0] = y;
            base64_of(&bytes)
        })
        .find(|text| holon::trust::PublicKey::parse(text).is_err())
        .unwrap();
    let mut v = signed.clone();
    v["signature"]["key"] = json!(off_curve);
    let err = documents::load_str(&doc::to_yaml(&v).unwrap(), "<t>", DocKind::Mandate, &Limits::default());
    assert!(err.unwrap_err().to_string().contains("not an ed25519 public key"));
    // A signature over another document.
    let other = signed_text(&value_of("examples/mandates/alice-research.yaml"), &key("alice/assistant", 2));
    let other: Value = doc::yaml::parse(&other, &Limits::default()).unwrap();
    let mut v = signed.clone();
    v["signature"]["value"] = other["signature"]["value"].clone();
    let m = load(&doc::to_yaml(&v).unwrap());
    let err = verify_chain(&m, &|_| None, &keys, &NoAgents).unwrap_err();
    assert!(matches!(err, ChainError::Signature { error: SignatureError::Mismatch, .. }), "{err}");
    // A number a double cannot hold cannot be signed: the document with one is refused.
    let mut v = signed.clone();
    v["require"]["min_runs_30d"] = json!((1u64 << 53) + 1);
    let err = documents::load_str(&doc::to_yaml(&v).unwrap(), "<t>", DocKind::Mandate, &Limits::default());
    assert!(err.unwrap_err().to_string().contains("cannot be signed"));
}

fn fixed_clock() -> Timestamp {
    Timestamp::parse("2026-11-20T10:00:00Z").unwrap()
}

fn catalog_input(mandates: Vec<Mandate>, keys: TrustedKeys) -> SnapshotInput {
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    SnapshotInput {
        mandates: mandates.into_iter().map(Arc::new).collect(),
        agents: catalog.entries.into_iter().map(|e| (Arc::new(e.manifest), e.record.map(Arc::new))).collect(),
        keys,
        ..SnapshotInput::default()
    }
}

/// The example input with fx-convert's record signed by its publisher, whose key (seed 3)
/// the keys trust.
fn with_fx_provenance(mut input: SnapshotInput) -> SnapshotInput {
    let labs = key("holon-labs", 3);
    input.keys.add(labs.account.clone(), labs.public_key());
    for (manifest, record) in &mut input.agents {
        if manifest.id.as_str() == "holon-labs/fx-convert" {
            let mut r = (**record.as_ref().unwrap()).clone();
            r.provenance = Some(provenance::sign(manifest, &labs).unwrap());
            *record = Some(Arc::new(r));
        }
    }
    input
}

#[test]
fn an_engine_that_requires_signatures_bars_a_bad_chain_and_still_applies_the_rest_of_the_publish() {
    let (alice, assistant, root, child) = chain();
    let keys = trusted(&[&alice, &assistant]);
    let engine = Engine::new(EngineConfig { clock: fixed_clock, require_signatures: true, ..EngineConfig::default() });
    let root_m = load(&signed_text(&root, &alice));
    let child_m = load(&signed_text(&child, &assistant));
    assert_eq!(
        engine.publish(&with_fx_provenance(catalog_input(vec![root_m.clone(), child_m.clone()], keys.clone()))),
        Ok(1)
    );
    assert!(engine.snapshot().untrusted().is_empty(), "{:?}", engine.snapshot().untrusted());
    let fx = |engine: &Engine, id: &str| {
        let call =
            Call::new(engine.mandate_ix(id).unwrap(), engine.agent_ix("holon-labs/fx-convert").unwrap(), fixed_clock());
        match engine.admit(&call) {
            Admission::Denied(d) => d.codes.iter().collect::<Vec<_>>(),
            other => {
                assert_eq!(other.verdict(), holon::admission::Verdict::Allowed);
                Vec::new()
            }
        }
    };
    assert_eq!(fx(&engine, "alice/m-2026-11"), vec![]);
    // The signed research sub-mandate's chain holds: a call under it is judged by its own
    // rules (it allows no `finance.fx`, and containers only), not barred.
    assert_eq!(fx(&engine, "alice/m-2026-11/research"), vec![Code::NotAllowed, Code::RuntimeNotAllowed]);
    // Unsigned; a key not trusted for the issuer; a widening child; a missing parent: each
    // is barred with the reason, and the publish itself goes through.
    let unsigned = load(&doc::to_yaml(&root).unwrap());
    let mut wide = child.clone();
    wide["budget"]["per_call"] = json!("5.00");
    for (mandates, barred, says) in [
        (vec![unsigned], "alice/m-2026-11", "not signed"),
        (vec![load(&signed_text(&root, &key("alice", 9)))], "alice/m-2026-11", "not trusted"),
        (vec![root_m.clone(), load(&signed_text(&wide, &assistant))], "alice/m-2026-11/research", "widens"),
        (vec![child_m.clone()], "alice/m-2026-11/research", "not among the mandates"),
    ] {
        engine.publish(&with_fx_provenance(catalog_input(mandates, keys.clone()))).unwrap();
        let snap = engine.snapshot();
        let reason = snap.untrusted().iter().find(|(id, _)| id == barred).map(|(_, r)| r.clone());
        assert!(reason.as_deref().is_some_and(|r| r.contains(says)), "{barred}: {:?}", snap.untrusted());
        assert!(fx(&engine, barred).contains(&Code::MandateUntrusted), "{barred}: {:?}", fx(&engine, barred));
    }
    // A revocation published beside an untrusted mandate still takes effect.
    let mut input = catalog_input(
        vec![root_m.clone(), load(&doc::to_yaml(&root).unwrap().replace("m-2026-11", "m-other"))],
        keys.clone(),
    );
    input.revocations = holon::trust::Revocations {
        revoked: vec![holon::trust::revocation::Revoked {
            mandate: "alice/m-2026-11".into(),
            at: fixed_clock(),
            reason: "key compromised".into(),
        }],
        ..holon::trust::Revocations::default()
    };
    engine.publish(&with_fx_provenance(input)).unwrap();
    assert_eq!(fx(&engine, "alice/m-2026-11"), vec![Code::MandateRevoked]);
    assert_eq!(fx(&engine, "alice/m-other"), vec![Code::MandateUntrusted]);
    // Without the requirement the same unsigned mandate is admitted.
    let lax = Engine::new(EngineConfig { clock: fixed_clock, ..EngineConfig::default() });
    lax.publish(&catalog_input(vec![load(&doc::to_yaml(&root).unwrap())], TrustedKeys::default())).unwrap();
    assert_eq!(fx(&lax, "alice/m-2026-11"), vec![]);
}

#[test]
fn a_signed_mandate_edited_in_code_after_reading_no_longer_verifies() {
    let alice = key("alice", 1);
    let keys = trusted(&[&alice]);
    let mut m = load(&signed_text(&value_of("examples/mandates/alice-root.yaml"), &alice));
    assert_eq!(verify_chain(&m, &|_| None, &keys, &NoAgents), Ok(1));
    m.budget.total = holon::money::Amount::parse("1000000").unwrap();
    let err = verify_chain(&m, &|_| None, &keys, &NoAgents).unwrap_err();
    assert!(matches!(err, ChainError::NoDigest { .. }), "{err}");
    // The engine bars it, though its digest is the signed one.
    let engine = Engine::new(EngineConfig { clock: fixed_clock, require_signatures: true, ..EngineConfig::default() });
    engine.publish(&catalog_input(vec![m], keys)).unwrap();
    assert_eq!(engine.snapshot().untrusted().len(), 1);
}

#[test]
fn with_signatures_required_an_agent_needs_its_publishers_provenance() {
    let alice = key("alice", 1);
    let labs = key("holon-labs", 3);
    let keys = trusted(&[&alice, &labs]);
    let root_m = load(&signed_text(&value_of("examples/mandates/alice-root.yaml"), &alice));
    let mut input = catalog_input(vec![root_m], keys.clone());
    // fx-convert's record gets its publisher's signature; the others have none.
    for (manifest, record) in &mut input.agents {
        if manifest.id.as_str() == "holon-labs/fx-convert" {
            let mut r = (**record.as_ref().unwrap()).clone();
            r.provenance = Some(provenance::sign(manifest, &labs).unwrap());
            *record = Some(Arc::new(r));
        }
    }
    let engine = Engine::new(EngineConfig { clock: fixed_clock, require_signatures: true, ..EngineConfig::default() });
    engine.publish(&input).unwrap();
    let m = engine.mandate_ix("alice/m-2026-11").unwrap();
    let fx = Call::new(m, engine.agent_ix("holon-labs/fx-convert").unwrap(), fixed_clock());
    assert!(matches!(engine.admit(&fx), Admission::Allowed(_)));
    let table = Call::new(m, engine.agent_ix("acme/table-extract").unwrap(), fixed_clock());
    let Admission::Denied(d) = engine.admit(&table) else { panic!("an agent without provenance was admitted") };
    assert!(d.codes.contains(Code::ProvenanceUnverified), "{:?}", d.codes.iter().collect::<Vec<_>>());
    // A record signed for another version, or by another namespace's key, does not count.
    let manifest = &input.agents.iter().find(|(m, _)| m.id.as_str() == "holon-labs/fx-convert").unwrap().0;
    let record = input.agents.iter().find(|(m, _)| m.id.as_str() == "holon-labs/fx-convert").unwrap().1.clone();
    let mut edited = (**manifest).clone();
    edited.runtime.image = Some("registry.example/evil:latest".into());
    assert!(provenance::verify(&edited, record.as_deref(), &keys).is_err(), "another image");
    let mut by_alice = (*record.unwrap()).clone();
    by_alice.provenance = Some(provenance::sign(manifest, &key("alice", 1)).unwrap());
    let err = provenance::verify(manifest, Some(&by_alice), &keys).unwrap_err();
    assert!(err.to_string().contains("only the account `holon-labs`"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random mandates (budgets, ids, validity, depth) sign and verify, alone and as a
    /// narrowing chain; one changed figure breaks the signature.
    #[test]
    fn random_mandates_sign_verify_and_chain(
        total_cents in 2_000u64..10_000_000,
        share in 1u64..100,
        depth in 1u32..16,
        name in "[a-z][a-z0-9-]{0,20}",
        seed in any::<u8>(),
    ) {
        let alice = key("alice", seed);
        let assistant = key("alice/assistant", seed.wrapping_add(1));
        let keys = trusted(&[&alice, &assistant]);
        let mut root = value_of("examples/mandates/alice-root.yaml");
        root["id"] = json!(format!("alice/{name}"));
        root["budget"]["total"] = json!(format!("{}.{:02}", total_cents / 100, total_cents % 100));
        root["delegation"]["max_depth"] = json!(depth);
        let root_m = load(&signed_text(&root, &alice));
        prop_assert_eq!(verify_chain(&root_m, &|_| None, &keys, &NoAgents), Ok(1));
        let mut child = value_of("examples/mandates/alice-research.yaml");
        let child_cents = (total_cents * share / 100).max(1);
        child["id"] = json!(format!("alice/{name}/child"));
        child["parent"] = json!(root_m.digest().unwrap().to_string());
        child["budget"]["total"] = json!(format!("{}.{:02}", child_cents / 100, child_cents % 100));
        child["budget"]["per_call"] = json!("0.01");
        child["budget"]["per_day"] = json!("0.01");
        child["approval"]["above"] = json!("0.01");
        child["delegation"]["max_depth"] = json!(depth - 1);
        let child_m = load(&signed_text(&child, &assistant));
        let pool = [root_m.clone()];
        let parent = |d: &holon::trust::Digest| pool.iter().find(|m| m.digest().as_ref() == Some(d));
        prop_assert_eq!(verify_chain(&child_m, &parent, &keys, &NoAgents), Ok(2));
        // The signed text with one more cent is another document.
        let text = signed_text(&child, &assistant);
        let more = format!("{}.{:02}", (child_cents + 1) / 100, (child_cents + 1) % 100);
        let tampered = text.replace(
            &format!("total: '{}.{:02}'", child_cents / 100, child_cents % 100),
            &format!("total: '{more}'"),
        );
        prop_assert_ne!(&tampered, &text);
        let tampered = load(&tampered);
        prop_assert!(verify_chain(&tampered, &parent, &keys, &NoAgents).is_err());
    }
}

/// Standard base64 with padding, written out here so the test does not lean on the code
/// under test.
fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
