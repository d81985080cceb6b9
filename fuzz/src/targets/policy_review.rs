//! The policy webhook's answer to an AdmissionReview body
//! (`kerf_agent::webhook::answer_policy`): decoding the review and the policy, converting
//! it as the agent's cache does and judging it with the function that sets its `Valid`
//! condition. Checked: the answer carries the request's uid, a refusal names what is
//! wrong, and the answer encodes.

use kerf_agent::webhook::{Answer, answer_policy, encode};
use serde_json::Value;

/// One input of the target.
pub fn run(data: &[u8]) {
    let Answer::Review(review, _) = answer_policy(data) else {
        return;
    };
    let Some(resp) = &review.response else {
        unreachable!("a review answer without a response");
    };
    if !resp.allowed {
        assert!(
            !resp.result.message.is_empty(),
            "a refusal without a message"
        );
        assert_eq!(resp.result.code, 422, "{resp:?}");
    }
    let wire = encode(&review);
    assert!(wire.is_ok(), "{wire:?}");
    // A body the typed decoder reads may still not load as a `Value`.
    let Ok(sent) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    assert_eq!(sent["request"]["uid"].as_str(), Some(resp.uid.as_str()));
}
