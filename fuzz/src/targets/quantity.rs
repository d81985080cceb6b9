//! Kubernetes quantities as the agent reads them: `kerf_decide::quantity::parse_quantity`
//! (CPU in millicores, memory in bytes), the CRD's pattern check `is_quantity`, the
//! `Quantity` type's JSON decoding and the executor's `same_quantity`.
//!
//! Input: one quantity, or two separated by a newline (compared with each other).

use kerf_api::validate::is_quantity;
use kerf_api::{Quantity, Resource};
use kerf_decide::quantity::parse_quantity;

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some(s) = super::text(data) else {
        return;
    };
    let (a, b) = s.split_once('\n').unwrap_or((s, s));
    for q in [a, b] {
        let _ = is_quantity(q);
        let json = serde_json::Value::String(q.to_owned());
        let decoded: Result<Quantity, _> = serde_json::from_value(json);
        for r in [Resource::Cpu, Resource::Memory] {
            let parsed = parse_quantity(r, q);
            if let Ok(d) = &decoded {
                assert_eq!(kerf_decide::quantity::parse(r, d), parsed);
            }
        }
    }
    let (qa, qb) = (Quantity::from(a), Quantity::from(b));
    for r in [Resource::Cpu, Resource::Memory] {
        let same = kerf_agent::executor::same_quantity(r, &qa, &qb);
        assert_eq!(same, kerf_agent::executor::same_quantity(r, &qb, &qa));
        assert!(kerf_agent::executor::same_quantity(r, &qa, &qa));
    }
}
