//! The OnDelete replacement order (rules AP-52..AP-57), without a server.

mod ondelete_plan {
    use chrono::{DateTime, Duration, TimeZone, Utc};
    use kerf_decide::facts::PodFacts;
    use kerf_decide::ondelete::{OnDeleteInput, OnDeletePlan, WaitReason, plan};

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0)
            .single()
            .unwrap_or_default()
    }

    fn sts_pod(ordinal: u32, rev: &str, ready_for: i64) -> PodFacts {
        PodFacts {
            name: format!("db-{ordinal}"),
            revision_hash: Some(rev.into()),
            ready: true,
            ready_since: Some(t0() - Duration::seconds(ready_for)),
            terminating: false,
            current_revision: true,
            ..PodFacts::default()
        }
    }

    fn input(pods: &[PodFacts]) -> OnDeleteInput<'_> {
        OnDeleteInput {
            replicas: u32::try_from(pods.len()).unwrap_or(0),
            update_revision: "new",
            pods,
            max_deletes_per_run: 1,
            settle: Duration::seconds(30),
            now: t0(),
        }
    }

    // rule: AP-52, AP-53, AP-54
    #[test]
    fn outdated_pods_are_replaced_highest_ordinal_first_within_the_per_run_limit() {
        let pods = [
            sts_pod(0, "old", 60),
            sts_pod(1, "old", 60),
            sts_pod(2, "new", 60),
            sts_pod(3, "old", 60),
        ];
        assert_eq!(
            plan(&input(&pods)),
            OnDeletePlan::Evict {
                pods: vec!["db-3".into()]
            }
        );
        let two = OnDeleteInput {
            max_deletes_per_run: 2,
            ..input(&pods)
        };
        assert_eq!(
            plan(&two),
            OnDeletePlan::Evict {
                pods: vec!["db-3".into(), "db-1".into()]
            }
        );
        let done = [sts_pod(0, "new", 60), sts_pod(1, "new", 60)];
        assert_eq!(plan(&input(&done)), OnDeletePlan::Done);
    }

    // rule: AP-56
    #[test]
    fn a_pod_is_replaced_only_when_every_pod_has_been_ready_for_settle() {
        let pods = [sts_pod(0, "old", 60), sts_pod(1, "new", 10)];
        assert!(matches!(
            plan(&input(&pods)),
            OnDeletePlan::Wait {
                reason: WaitReason::Settling { .. },
                outdated: 1
            }
        ));
        let pods = [sts_pod(0, "old", 60), sts_pod(1, "new", 30)];
        assert!(matches!(plan(&input(&pods)), OnDeletePlan::Evict { .. }));
        let mut not_ready = sts_pod(1, "new", 60);
        not_ready.ready = false;
        let pods = [sts_pod(0, "old", 60), not_ready];
        assert!(matches!(
            plan(&input(&pods)),
            OnDeletePlan::Wait {
                reason: WaitReason::NotReady { .. },
                ..
            }
        ));
        let pods = [sts_pod(0, "old", 60)];
        let missing = OnDeleteInput {
            replicas: 2,
            ..input(&pods)
        };
        assert!(matches!(
            plan(&missing),
            OnDeletePlan::Wait {
                reason: WaitReason::PodMissing {
                    expected: 2,
                    found: 1
                },
                ..
            }
        ));
    }
}
