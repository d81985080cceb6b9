//! Bodies captured from `kubectl create ... -v=9` (kubectl v1.32), decoded against the JSON
//! `kubectl create ... --dry-run=client -o json` prints for the same object (its `null`s
//! left out), and the server's errors for corrupt bodies.

use serde_json::json;

use super::*;

const NAMESPACE: &str = "6b3873000a0f0a02763112094e616d65737061636512190a110a017812001a0022002a0032003800420012001a020a001a002200";
const DEPLOYMENT: &str = "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412ac010a200a0377656212001a017822002a003200380042005a0a0a036170701203776562127a0801120c0a0a0a0361707012037765621a600a1c0a0012001a0022002a003200380042005a0a0a036170701203776562124012220a056e67696e7812056e67696e782a0042006a007200800100880100900100a201001a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038001a0c0800100018002000280038001a002200";
const PDB: &str = "6b3873000a200a09706f6c6963792f76311213506f6444697372757074696f6e427564676574123a0a140a0377656212001a017822002a0032003800420012160a06080010011a00120c0a0a0a0361707012037765621a0a080018002000280030001a002200";

fn body(h: &str) -> Vec<u8> {
    hex::decode(h).unwrap_or_default()
}

fn message(e: ApiError) -> (u16, String) {
    (
        e.code,
        e.to_status()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// A body of `apiVersion`/`kind` around an encoded object.
fn wrap(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    fn len_field(num: u8, v: &[u8]) -> Vec<u8> {
        let mut out = vec![num << 3 | 2, v.len() as u8];
        out.extend_from_slice(v);
        out
    }
    let tm = [
        len_field(1, api_version.as_bytes()),
        len_field(2, kind.as_bytes()),
    ]
    .concat();
    [MAGIC.to_vec(), len_field(1, &tm), len_field(2, raw)].concat()
}

#[test]
fn kubectl_create_namespace_decodes_to_its_json() {
    let v = decode(&body(NAMESPACE), "v1", "Namespace").expect("decodes");
    assert_eq!(
        v,
        json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}, "spec": {}, "status": {}})
    );
}

#[test]
fn kubectl_create_deployment_decodes_to_its_json() {
    let v = decode(&body(DEPLOYMENT), "apps/v1", "Deployment").expect("decodes");
    let want = json!({"kind": "Deployment", "apiVersion": "apps/v1",
        "metadata": {"name": "web", "namespace": "x", "labels": {"app": "web"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}},
            "strategy": {}},
        "status": {}});
    assert_eq!(v, want);
}

#[test]
fn kubectl_create_pdb_keeps_the_status_counters_go_always_writes() {
    let v = decode(&body(PDB), "policy/v1", "PodDisruptionBudget").expect("decodes");
    let want = json!({"kind": "PodDisruptionBudget", "apiVersion": "policy/v1",
        "metadata": {"name": "web", "namespace": "x"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}});
    assert_eq!(v, want);
}

#[test]
fn an_explicit_zero_of_a_pointer_field_is_kept() {
    // DeploymentSpec{replicas: 0 (pointer), minReadySeconds: 0, paused: false}
    let spec = [0x08, 0x00, 0x28, 0x00, 0x38, 0x00];
    let raw = [vec![0x12, spec.len() as u8], spec.to_vec()].concat();
    let v = decode(
        &wrap("apps/v1", "Deployment", &raw),
        "apps/v1",
        "Deployment",
    )
    .expect("decodes");
    assert_eq!(
        v["spec"],
        json!({"replicas": 0, "strategy": {}, "template": {"metadata": {}, "spec": {}}})
    );
}

#[test]
fn special_types_take_their_json_forms() {
    // Pod{metadata{creationTimestamp 1700000000}, spec{containers[{name c, resources{limits{cpu: 500m}}}],
    // supplementalGroups packed [1, 2]}, status{}}; Secret data bytes.
    let ts = [0x08, 0x80, 0xe2, 0xcf, 0xaa, 0x06];
    let meta = [vec![0x42, ts.len() as u8], ts.to_vec()].concat();
    let qty = [0x0a, 0x04, b'5', b'0', b'0', b'm'];
    let entry = [
        vec![0x0a, 0x03, b'c', b'p', b'u', 0x12, qty.len() as u8],
        qty.to_vec(),
    ]
    .concat();
    let limits = [vec![0x0a, entry.len() as u8], entry].concat();
    let resources = [vec![0x42, limits.len() as u8], limits].concat();
    let container = [vec![0x0a, 0x01, b'c'], resources].concat();
    let psc = [0x22, 0x02, 0x01, 0x02];
    let spec = [
        vec![0x12, container.len() as u8],
        container,
        vec![0x72, psc.len() as u8],
        psc.to_vec(),
    ]
    .concat();
    let raw = [
        vec![0x0a, meta.len() as u8],
        meta,
        vec![0x12, spec.len() as u8],
        spec,
    ]
    .concat();
    let v = decode(&wrap("v1", "Pod", &raw), "v1", "Pod").expect("decodes");
    assert_eq!(v["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
    assert_eq!(
        v["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "500m"
    );
    assert_eq!(
        v["spec"]["securityContext"]["supplementalGroups"],
        json!([1, 2])
    );
    let data = [0x12, 0x07, 0x0a, 0x01, b'a', 0x12, 0x02, 0xff, 0x00];
    let v = decode(&wrap("v1", "Secret", &data), "v1", "Secret").expect("decodes");
    assert_eq!(v["data"], json!({"a": "/wA="}));
}

/// Decodes a `kind` whose spec (field 2) holds one length-delimited field `tag` of `bytes`.
fn decode_with_spec_field(api_version: &str, kind: &str, tag: u8, bytes: &[u8]) -> Value {
    let spec = [vec![tag, bytes.len() as u8], bytes.to_vec()].concat();
    let raw = [vec![0x12, spec.len() as u8], spec].concat();
    decode(&wrap(api_version, kind, &raw), api_version, kind).expect("decodes")
}

#[test]
fn int_or_string_and_micro_time_take_their_json_forms() {
    // PodDisruptionBudgetSpec.maxUnavailable: IntOrString{type: 1, strVal: "25%"}
    let ios = [0x08, 0x01, 0x1a, 0x03, b'2', b'5', b'%'];
    let v = decode_with_spec_field("policy/v1", "PodDisruptionBudget", 0x1a, &ios);
    assert_eq!(v["spec"]["maxUnavailable"], "25%");
    // LeaseSpec.renewTime: MicroTime{seconds 1700000000, nanos 123456789}
    let t = [
        0x08, 0x80, 0xe2, 0xcf, 0xaa, 0x06, 0x10, 0x95, 0x9a, 0xef, 0x3a,
    ];
    let v = decode_with_spec_field("coordination.k8s.io/v1", "Lease", 0x22, &t);
    assert_eq!(v["spec"]["renewTime"], "2023-11-14T22:13:20.123456Z");
}

#[test]
fn unknown_fields_are_skipped_and_a_missing_kind_defaults_to_the_target() {
    // Namespace{metadata{name x, field 99 varint}} in an Unknown without typeMeta
    let meta = [0x0a, 0x01, b'x', 0x98, 0x06, 0x05];
    let raw = [vec![0x0a, meta.len() as u8], meta.to_vec()].concat();
    let b = [MAGIC.to_vec(), vec![0x12, raw.len() as u8], raw].concat();
    let v = decode(&b, "v1", "Namespace").expect("decodes");
    assert_eq!(v["metadata"], json!({"name": "x"}));
    assert_eq!(v["kind"], "Namespace");
}

#[test]
fn corrupt_bodies_get_the_servers_400() {
    let truncated = body(NAMESPACE)[..40].to_vec();
    assert_eq!(
        message(decode(&truncated, "v1", "Namespace").unwrap_err()),
        (400, "the object provided is unrecognized (must be of type Namespace): unexpected EOF (6b3873000a0f0a02763112094e616d65737061636512190a110a01781200 ...)".to_string())
    );
    // the object itself is corrupt: metadata.name sent as a varint
    let raw = [0x0a, 0x02, 0x08, 0x01];
    assert_eq!(
        message(decode(&wrap("v1", "Namespace", &raw), "v1", "Namespace").unwrap_err()),
        (400, "Namespace in version \"v1\" cannot be handled as a Namespace: proto: wrong wireType = 0 for field Name".to_string())
    );
    assert_eq!(
        message(decode(b"{\"kind\":\"Namespace\"}", "v1", "Namespace").unwrap_err()),
        (400, "the object provided is unrecognized (must be of type Namespace): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({\"kind\":\"Namespace\"})".to_string())
    );
    assert_eq!(
        message(decode(b"", "v1", "Namespace").unwrap_err()).1,
        "the object provided is unrecognized (must be of type Namespace): empty data (<empty>)"
    );
}

#[test]
fn a_body_of_another_kind_is_refused() {
    let raw = [0x0a, 0x03, 0x0a, 0x01, b'x'];
    assert_eq!(
        message(decode(&wrap("v1", "Pod", &raw), "v1", "Namespace").unwrap_err()).1,
        "Pod in version \"v1\" cannot be handled as a Namespace: converting (v1.Pod) to (core.Namespace): unknown conversion"
    );
    assert_eq!(
        message(
            decode(
                &wrap("example.com/v1", "Widget", &raw),
                "apps/v1",
                "Deployment"
            )
            .unwrap_err()
        )
        .1,
        "Widget in version \"v1\" cannot be handled as a Deployment: no kind \"Widget\" is registered for version \"example.com/v1\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    let seeds = [body(NAMESPACE), body(DEPLOYMENT), body(PDB)];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..3000 {
        let mut b = seeds[round % 3].clone();
        for _ in 0..(next() % 4 + 1) {
            let i = 4 + (next() as usize) % (b.len() - 4);
            b[i] = next() as u8;
        }
        b.truncate(4 + (next() as usize) % (b.len() - 3));
        for (v, k) in [
            ("v1", "Namespace"),
            ("apps/v1", "Deployment"),
            ("policy/v1", "PodDisruptionBudget"),
        ] {
            match decode(&b, v, k) {
                Ok(obj) => assert!(obj.is_object()),
                Err(e) => assert_eq!(e.code, 400, "{e:?}"),
            }
        }
    }
}
