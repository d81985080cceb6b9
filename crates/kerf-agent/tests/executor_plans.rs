//! The pure plans of the rollout, release, HPA and eviction writes, without a server (the
//! OnDelete replacement order is `kerf-decide/tests/ondelete_plan.rs`).

mod executor_plans {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use kerf_agent::executor::WorkloadId;
    use kerf_agent::executor::hpa::{MetricSource, target_patch, utilization_targets};
    use kerf_agent::executor::ondelete::eviction_body;
    use kerf_agent::executor::release::{owned_fields, plan_release};
    use kerf_agent::executor::rollout::{RolloutState, rollout_state};
    use kerf_agent::executor::template::{TemplateContainers, apply_body};
    use kerf_api::{Resource, ResourceRequirements, ResourceValues, WorkloadKind};
    use kerf_decide::ondelete::{ordinal_of, refusal_details};
    use kube::api::DynamicObject;
    use serde_json::{Value, json};

    fn web() -> WorkloadId {
        WorkloadId {
            namespace: "conf".into(),
            name: "web".into(),
            uid: "u1".into(),
            kind: WorkloadKind::Deployment,
        }
    }

    fn rr(req_cpu: &str, req_mem: &str, lim_cpu: Option<&str>) -> ResourceRequirements {
        ResourceRequirements {
            requests: ResourceValues {
                cpu: Some(req_cpu.into()),
                memory: Some(req_mem.into()),
            },
            limits: ResourceValues {
                cpu: lim_cpu.map(Into::into),
                memory: None,
            },
        }
    }

    // rule: AP-19, AP-20
    #[test]
    fn apply_body_names_only_the_cpu_and_memory_fields_of_the_change() {
        let template = TemplateContainers {
            containers: vec!["app".into(), "log".into()],
            sidecars: vec![],
        };
        let change = [("app".to_owned(), rr("200m", "256Mi", Some("400m")))];
        let plan = apply_body(&web(), &change, &[Resource::Cpu], &template);
        assert_eq!(
            plan.body,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "conf"},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "app", "resources": {"requests": {"cpu": "200m"}, "limits": {"cpu": "400m"}}}
                ]}}}
            })
        );
        assert_eq!(plan.containers, ["app"]);
        assert!(plan.body["spec"].get("selector").is_none());
    }

    #[test]
    fn apply_body_covers_sidecars_and_drops_containers_the_template_lacks() {
        let spec = json!({
            "containers": [{"name": "app"}],
            "initContainers": [{"name": "proxy", "restartPolicy": "Always"}, {"name": "migrate"}],
        });
        let template = TemplateContainers::of_pod_spec(&spec);
        assert_eq!(template.sidecars, ["proxy"]);
        let change = [
            ("app".to_owned(), rr("1", "1Gi", None)),
            ("proxy".to_owned(), rr("50m", "64Mi", None)),
            ("migrate".to_owned(), rr("50m", "64Mi", None)),
            ("gone".to_owned(), rr("50m", "64Mi", None)),
        ];
        let plan = apply_body(&web(), &change, &Resource::ALL, &template);
        assert_eq!(
            plan.body["spec"]["template"]["spec"]["initContainers"][0]["name"],
            "proxy"
        );
        assert_eq!(
            plan.body["spec"]["template"]["spec"]["initContainers"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        assert_eq!(plan.dropped, ["migrate", "gone"]);
    }

    fn live_with_kerf_fields() -> DynamicObject {
        let cpu_and_mem = json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
            ".": {}, "f:name": {}, "f:resources": {"f:requests": {"f:cpu": {}, "f:memory": {}}}
        }}}}}});
        let obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "conf", "uid": "u1", "managedFields": [
                {"manager": "kerf", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": cpu_and_mem},
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {"f:image": {}}}}}}}},
            ]},
            "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "x", "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}}}
            ]}}},
        });
        serde_json::from_value(obj).unwrap_or_else(|_| {
            DynamicObject::new(
                "web",
                &kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
            )
        })
    }

    #[test]
    fn owned_fields_are_read_from_fields_v1() {
        let live = live_with_kerf_fields();
        let f = live
            .metadata
            .managed_fields
            .as_ref()
            .and_then(|m| m[0].fields_v1.clone());
        let owned = owned_fields(&f.map(|f| f.0).unwrap_or(Value::Null));
        let labels: Vec<String> = owned.iter().map(|f| f.label()).collect();
        assert_eq!(labels, ["app/requests.cpu", "app/requests.memory"]);
    }

    // rule: AP-21, EV-46
    #[test]
    fn release_hands_the_fields_over_with_their_live_values_and_keeps_the_rest() {
        let live = live_with_kerf_fields();
        let plan = plan_release(&web(), &live, &[Resource::Cpu]);
        assert_eq!(plan.released, ["app/requests.cpu"]);
        assert_eq!(plan.kept, ["app/requests.memory"]);
        assert_eq!(
            plan.handover["spec"]["template"]["spec"]["containers"],
            json!([{"name": "app", "resources": {"requests": {"cpu": "200m"}}}])
        );
        assert_eq!(
            plan.keep["spec"]["template"]["spec"]["containers"],
            json!([{"name": "app", "resources": {"requests": {"memory": "64Mi"}}}])
        );
        let all = plan_release(&web(), &live, &Resource::ALL);
        assert_eq!(
            all.keep,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "conf"}})
        );
    }

    fn deployment(
        generation: i64,
        observed: i64,
        replicas: i64,
        updated: i64,
        available: i64,
    ) -> Value {
        json!({"metadata": {"generation": generation}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated, "availableReplicas": available}})
    }

    #[test]
    fn rollout_completes_when_all_pods_are_updated_and_available() {
        assert_eq!(
            rollout_state(WorkloadKind::Deployment, &deployment(2, 2, 3, 3, 3)),
            RolloutState::Complete
        );
        assert_eq!(
            rollout_state(WorkloadKind::Deployment, &deployment(2, 1, 3, 3, 3)),
            RolloutState::InProgress {
                updated: 3,
                desired: 3
            }
        );
        assert_eq!(
            rollout_state(WorkloadKind::Deployment, &deployment(2, 2, 3, 2, 3)),
            RolloutState::InProgress {
                updated: 2,
                desired: 3
            }
        );
        let mut stuck = deployment(2, 2, 3, 1, 2);
        stuck["status"]["conditions"] = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
            "message": "ReplicaSet \"web-1\" has timed out progressing."}]);
        assert!(
            matches!(rollout_state(WorkloadKind::Deployment, &stuck), RolloutState::DeadlineExceeded { message } if message.contains("timed out"))
        );
    }

    #[test]
    fn statefulset_and_daemonset_rollouts_complete_on_their_own_counters() {
        let sts = |cur: &str, upd: &str, updated: i64| {
            json!({"metadata": {"generation": 1}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "currentRevision": cur, "updateRevision": upd, "updatedReplicas": updated,
                       "readyReplicas": 2, "availableReplicas": 2}})
        };
        assert_eq!(
            rollout_state(WorkloadKind::StatefulSet, &sts("r2", "r2", 2)),
            RolloutState::Complete
        );
        assert!(matches!(
            rollout_state(WorkloadKind::StatefulSet, &sts("r1", "r2", 1)),
            RolloutState::InProgress { .. }
        ));
        let ds = |updated: i64, available: i64| {
            json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "desiredNumberScheduled": 3, "updatedNumberScheduled": updated, "numberAvailable": available}})
        };
        assert_eq!(
            rollout_state(WorkloadKind::DaemonSet, &ds(3, 3)),
            RolloutState::Complete
        );
        assert!(matches!(
            rollout_state(WorkloadKind::DaemonSet, &ds(3, 2)),
            RolloutState::InProgress { .. }
        ));
    }

    #[test]
    fn hpa_target_is_written_by_test_then_replace() {
        let patch = target_patch(1, MetricSource::ContainerResource, 60, 75)
            .map(|p| serde_json::to_value(p).unwrap_or_default());
        assert_eq!(
            patch.ok(),
            Some(json!([
                {"op": "test", "path": "/spec/metrics/1/containerResource/target/averageUtilization", "value": 60},
                {"op": "replace", "path": "/spec/metrics/1/containerResource/target/averageUtilization", "value": 75},
            ]))
        );
    }

    // rule: RB-24
    #[test]
    fn hpa_restore_tests_the_written_target_and_puts_the_old_one_back() {
        let restore = target_patch(0, MetricSource::Resource, 75, 60)
            .map(|p| serde_json::to_value(p).unwrap_or_default());
        let ops = restore.ok().unwrap_or_default();
        assert_eq!(ops[0]["op"], "test");
        assert_eq!(ops[0]["value"], 75);
        assert_eq!(ops[1]["value"], 60);
        assert_eq!(
            ops[1]["path"],
            "/spec/metrics/0/resource/target/averageUtilization"
        );
    }

    #[test]
    fn hpa_utilization_targets_are_found_by_index() {
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5, "metrics": [
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app",
                    "target": {"type": "Utilization", "averageUtilization": 80}}},
            ]}
        }))
        .unwrap();
        let t = utilization_targets(&hpa);
        assert_eq!(t.len(), 2);
        assert_eq!(
            (
                t[0].index,
                t[0].source,
                t[0].resource,
                t[0].average_utilization
            ),
            (1, MetricSource::Resource, Resource::Cpu, 60)
        );
        assert_eq!(t[1].container.as_deref(), Some("app"));
    }

    // rule: AP-59, EV-43
    #[test]
    fn replacement_is_a_policy_v1_eviction_and_a_refusal_names_the_pod() {
        let body = eviction_body("db", "db-3");
        assert_eq!(body["apiVersion"], "policy/v1");
        assert_eq!(body["kind"], "Eviction");
        assert_eq!(body["metadata"]["name"], "db-3");
        assert_eq!(
            refusal_details("db-3").get("pod").map(String::as_str),
            Some("db-3")
        );
        assert_eq!(ordinal_of("web-db-12"), Some(12));
    }
}
