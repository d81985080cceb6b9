//! The in-place state machine (design D16, D18, D24), without a server.

mod inplace_plan {
    use chrono::{DateTime, Duration, TimeZone, Utc};
    use kerf_api::WorkloadKind;
    use kerf_decide::facts::{PodFacts, ResizeCondition};
    use kerf_decide::inplace::{
        FallbackReason, InPlaceInput, InPlaceOutcome, PodResize, plan, resumed_first_resize,
    };
    use kerf_decide::values::ContainerResources;
    use kerf_testkit::api::requests as req;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0)
            .single()
            .unwrap_or_default()
    }

    fn target() -> Vec<ContainerResources> {
        vec![("app".into(), req("150m", "256Mi"))]
    }

    fn old() -> Vec<ContainerResources> {
        vec![("app".into(), req("100m", "128Mi"))]
    }

    fn pod(name: &str, spec: Vec<ContainerResources>, status: Vec<ContainerResources>) -> PodFacts {
        PodFacts {
            name: name.into(),
            node: Some("sim-node-1".into()),
            spec_resources: spec,
            status_resources: status,
            current_revision: true,
            ..PodFacts::default()
        }
    }

    fn cond(type_: &str, reason: Option<&str>, msg: &str) -> ResizeCondition {
        ResizeCondition {
            type_: type_.into(),
            reason: reason.map(str::to_owned),
            message: Some(msg.into()),
            since: Some(t0()),
        }
    }

    fn input<'a>(
        kind: WorkloadKind,
        target: &'a [ContainerResources],
        pods: &'a [PodFacts],
        now: DateTime<Utc>,
    ) -> InPlaceInput<'a> {
        InPlaceInput {
            kind,
            rollout_safe: true,
            target,
            pods,
            first_resize_at: Some(t0()),
            fallback_after: Duration::minutes(10),
            may_start: true,
            now,
        }
    }

    // rule: AP-04
    #[test]
    fn every_running_pod_of_the_workload_is_resized() {
        let tg = target();
        let pods = [
            pod("a", old(), old()),
            pod("b", old(), old()),
            pod("c", target(), target()),
        ];
        let p = plan(&InPlaceInput {
            first_resize_at: None,
            ..input(WorkloadKind::Deployment, &tg, &pods, t0())
        });
        assert_eq!(p.resize_now, ["a", "b"]);
        assert_eq!(
            p.outcome,
            InPlaceOutcome::Progress {
                accepted: 1,
                total: 3
            }
        );
    }

    #[test]
    fn terminating_pods_and_pods_of_older_revisions_are_not_targeted() {
        let tg = target();
        let mut gone = pod("gone", old(), old());
        gone.terminating = true;
        let mut stale = pod("stale", old(), old());
        stale.current_revision = false;
        let pods = [gone, stale, pod("ok", target(), target())];
        let p = plan(&input(WorkloadKind::Deployment, &tg, &pods, t0()));
        assert!(p.resize_now.is_empty());
        assert_eq!(p.outcome, InPlaceOutcome::AllAccepted);
    }

    // rule: EV-10
    #[test]
    fn applied_is_due_once_every_pod_accepted_the_resize() {
        let tg = target();
        let mut in_progress = pod("a", target(), old());
        in_progress.resize_conditions = vec![cond("PodResizeInProgress", None, "")];
        let sent = pod("b", target(), old());
        let pods = [in_progress.clone(), sent];
        let p = plan(&input(WorkloadKind::Deployment, &tg, &pods, t0()));
        assert_eq!(p.pods[0].state, PodResize::Accepted);
        assert_eq!(p.pods[1].state, PodResize::Sent);
        assert_eq!(
            p.outcome,
            InPlaceOutcome::Progress {
                accepted: 1,
                total: 2
            }
        );

        let pods = [in_progress, pod("b", target(), target())];
        let p = plan(&input(WorkloadKind::Deployment, &tg, &pods, t0()));
        assert_eq!(p.outcome, InPlaceOutcome::AllAccepted);
        assert_eq!(p.pods[1].state, PodResize::Complete);
    }

    #[test]
    fn in_progress_with_error_is_not_accepted() {
        let tg = target();
        let mut a = pod("a", target(), old());
        a.resize_conditions = vec![cond(
            "PodResizeInProgress",
            Some("Error"),
            "cgroup write failed",
        )];
        let p = plan(&input(WorkloadKind::Deployment, &tg, &[a], t0()));
        assert_eq!(
            p.pods[0].state,
            PodResize::Error {
                message: "cgroup write failed".into()
            }
        );
        assert_eq!(
            p.outcome,
            InPlaceOutcome::Progress {
                accepted: 0,
                total: 1
            }
        );
    }

    #[test]
    fn equal_values_in_other_units_count_as_applied() {
        let tg = vec![("app".to_owned(), req("0.5", "1Gi"))];
        let have = vec![("app".to_owned(), req("500m", "1024Mi"))];
        let p = plan(&input(
            WorkloadKind::Deployment,
            &tg,
            &[pod("a", have.clone(), have)],
            t0(),
        ));
        assert_eq!(p.pods[0].state, PodResize::Complete);
    }

    #[test]
    fn a_workload_with_no_pods_is_applied_at_once() {
        let tg = target();
        let p = plan(&input(WorkloadKind::Deployment, &tg, &[], t0()));
        assert_eq!(p.outcome, InPlaceOutcome::AllAccepted);
    }

    // rule: AP-08, EV-44
    #[test]
    fn infeasible_resize_falls_back_to_rollout_at_once() {
        let tg = target();
        let mut a = pod("a", target(), old());
        a.resize_conditions = vec![cond(
            "PodResizePending",
            Some("Infeasible"),
            "Node didn't have enough capacity: memory",
        )];
        let pods = [a, pod("b", target(), target())];
        let p = plan(&input(WorkloadKind::Deployment, &tg, &pods, t0()));
        match p.outcome {
            InPlaceOutcome::FallBack { reason, message } => {
                assert_eq!(reason, FallbackReason::ResizeInfeasible);
                assert_eq!(reason.as_str(), "ResizeInfeasible");
                assert!(message.contains("enough capacity"), "{message}");
            }
            other => panic!("expected a fallback, got {other:?}"),
        }
        assert!(p.resize_now.is_empty());
    }

    // rule: AP-09, EV-45
    #[test]
    fn deferred_resize_falls_back_once_fallback_after_has_passed_and_not_before() {
        let tg = target();
        let mut a = pod("a", target(), old());
        a.resize_conditions = vec![cond(
            "PodResizePending",
            Some("Deferred"),
            "Node didn't have enough resource: cpu",
        )];
        let pods = [a];
        let before = plan(&input(
            WorkloadKind::Deployment,
            &tg,
            &pods,
            t0() + Duration::minutes(10) - Duration::seconds(1),
        ));
        assert_eq!(
            before.outcome,
            InPlaceOutcome::Progress {
                accepted: 0,
                total: 1
            }
        );
        assert!(matches!(before.pods[0].state, PodResize::Deferred { .. }));
        let after = plan(&input(
            WorkloadKind::Deployment,
            &tg,
            &pods,
            t0() + Duration::minutes(10),
        ));
        match after.outcome {
            InPlaceOutcome::FallBack { reason, .. } => {
                assert_eq!(reason, FallbackReason::ResizeDeferredTimeout)
            }
            other => panic!("expected a fallback, got {other:?}"),
        }
    }

    #[test]
    fn fallback_after_runs_from_the_first_resize_of_the_workload() {
        let tg = target();
        let mut a = pod("a", target(), old());
        // The condition is recent, but the workload's first resize was 11 minutes ago.
        a.resize_conditions = vec![ResizeCondition {
            since: Some(t0() + Duration::minutes(10)),
            ..cond("PodResizePending", Some("Deferred"), "")
        }];
        let p = plan(&input(
            WorkloadKind::Deployment,
            &tg,
            &[a.clone()],
            t0() + Duration::minutes(11),
        ));
        assert!(matches!(
            p.outcome,
            InPlaceOutcome::FallBack {
                reason: FallbackReason::ResizeDeferredTimeout,
                ..
            }
        ));
        let never_sent = plan(&InPlaceInput {
            first_resize_at: None,
            ..input(
                WorkloadKind::Deployment,
                &tg,
                &[a],
                t0() + Duration::hours(5),
            )
        });
        assert!(matches!(
            never_sent.outcome,
            InPlaceOutcome::Progress { .. }
        ));
    }

    #[test]
    fn in_progress_error_past_fallback_after_is_a_deferred_timeout() {
        let tg = target();
        let mut a = pod("a", target(), old());
        a.resize_conditions = vec![cond("PodResizeInProgress", Some("Error"), "failed")];
        let p = plan(&input(
            WorkloadKind::Deployment,
            &tg,
            &[a],
            t0() + Duration::minutes(15),
        ));
        assert!(matches!(
            p.outcome,
            InPlaceOutcome::FallBack {
                reason: FallbackReason::ResizeDeferredTimeout,
                ..
            }
        ));
    }

    // rule: EV-41
    #[test]
    fn daemonset_never_falls_back_and_names_the_node() {
        let tg = target();
        let mut a = pod("ds-a", target(), old());
        a.resize_conditions = vec![cond("PodResizePending", Some("Infeasible"), "no room")];
        let pods = [
            a,
            pod("ds-b", old(), old()),
            pod("ds-c", target(), target()),
        ];
        let p = plan(&input(WorkloadKind::DaemonSet, &tg, &pods, t0()));
        match p.outcome {
            InPlaceOutcome::Refused {
                reason,
                fallback_reason,
                node,
                message,
                resize_back,
            } => {
                assert_eq!(reason, "SingleReplicaUnsafe");
                assert_eq!(fallback_reason, FallbackReason::ResizeInfeasible);
                assert_eq!(node.as_deref(), Some("sim-node-1"));
                assert!(message.contains("sim-node-1"), "{message}");
                assert_eq!(resize_back, ["ds-a", "ds-c"]);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(p.resize_now.is_empty());
    }

    // rule: EV-41
    #[test]
    fn fallback_unsafe_for_a_single_replica_is_refused_with_the_fallback_reason() {
        let tg = target();
        let mut a = pod("a", target(), old());
        a.resize_conditions = vec![cond("PodResizePending", Some("Deferred"), "")];
        let p = plan(&InPlaceInput {
            rollout_safe: false,
            ..input(
                WorkloadKind::Deployment,
                &tg,
                &[a],
                t0() + Duration::hours(1),
            )
        });
        assert!(matches!(
            p.outcome,
            InPlaceOutcome::Refused {
                fallback_reason: FallbackReason::ResizeDeferredTimeout,
                reason: "SingleReplicaUnsafe",
                ..
            }
        ));
    }

    // rule: AP-36, AP-37
    #[test]
    fn freeze_starts_no_new_resize_but_follows_the_submitted_ones() {
        let tg = target();
        let mut accepted = pod("a", target(), old());
        accepted.resize_conditions = vec![cond("PodResizeInProgress", None, "")];
        let pods = [accepted.clone(), pod("b", old(), old())];
        let p = plan(&InPlaceInput {
            may_start: false,
            ..input(WorkloadKind::Deployment, &tg, &pods, t0())
        });
        assert!(p.resize_now.is_empty());
        assert_eq!(
            p.outcome,
            InPlaceOutcome::Progress {
                accepted: 1,
                total: 2
            }
        );
        let p = plan(&InPlaceInput {
            may_start: false,
            ..input(WorkloadKind::Deployment, &tg, &[accepted], t0())
        });
        assert_eq!(p.outcome, InPlaceOutcome::AllAccepted);
    }

    #[test]
    fn restart_baseline_is_taken_when_the_pod_resize_completes() {
        let tg = target();
        let now = t0() + Duration::minutes(2);
        let pods = [pod("a", target(), target())];
        let p = plan(&input(WorkloadKind::Deployment, &tg, &pods, now));
        assert_eq!(p.pods[0].completed_at, Some(now));
        assert_eq!(p.newly_completed(&pods).count(), 1);
        let mut seen = pods[0].clone();
        seen.completed_at = Some(t0());
        let later = [seen];
        let p = plan(&input(
            WorkloadKind::Deployment,
            &tg,
            &later,
            now + Duration::minutes(5),
        ));
        assert_eq!(p.pods[0].completed_at, Some(t0()));
        assert_eq!(p.newly_completed(&later).count(), 0);
    }

    // design D25: an agent stopped between a resize and the status write left no
    // firstResizeAt; the next one starts fallbackAfter at its first pass, so a resize that
    // stays Deferred still falls back.
    #[test]
    fn a_resize_sent_by_a_stopped_agent_starts_the_fallback_timer_on_resume() {
        let deferred = PodFacts {
            resize_conditions: vec![cond("PodResizePending", Some("Deferred"), "no room")],
            ..pod("a", target(), old())
        };
        let resumed = resumed_first_resize(std::slice::from_ref(&deferred), &target(), t0());
        assert_eq!(resumed, Some(t0()));
        let sent = pod("b", target(), old());
        assert_eq!(resumed_first_resize(&[sent], &target(), t0()), Some(t0()));
        let untouched = pod("c", old(), old());
        assert_eq!(resumed_first_resize(&[untouched], &target(), t0()), None);
        let done = pod("d", target(), target());
        assert_eq!(resumed_first_resize(&[done], &target(), t0()), None);

        // The resumed agent's first pass is at t0; ten minutes later the resize is still
        // Deferred: the change falls back.
        let (pods, target) = ([deferred], target());
        let now = t0() + Duration::minutes(10);
        let mut resumed_input = input(WorkloadKind::Deployment, &target, &pods, now);
        resumed_input.first_resize_at = resumed_first_resize(&pods, &target, t0());
        assert!(
            matches!(
                plan(&resumed_input).outcome,
                InPlaceOutcome::FallBack {
                    reason: FallbackReason::ResizeDeferredTimeout,
                    ..
                }
            ),
            "{:?}",
            plan(&resumed_input).outcome
        );
    }
}
